"""The installed code has one import root, `mmprep`: a user's own `app/` (every FastAPI
project has one), `decoders/`, `families/` or `processors/` never collides with it. (The image's own
install is checked in test_dockerfile.py: only `mmprep` lands in its site-packages.)"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

from mmprep.testing.servers import AppProcess

REPO = Path(__file__).resolve().parents[2]
# Below each source root the folders are the import names: app/mmprep is mmprep,
# decoders/mmprep/decoders is mmprep.decoders, and so on (pyproject.toml).
SOURCE_ROOTS = ("app", "decoders", "families", "processors")


def source_files() -> set[str]:
    """Every file of the source roots, as its path in site-packages (app/mmprep/cli.py is
    mmprep/cli.py)."""
    return {
        str(path.relative_to(REPO / root))
        for root in SOURCE_ROOTS
        for path in (REPO / root).rglob("*")
        if path.is_file() and not {"__pycache__", "mmprep.egg-info"} & set(path.parts)
    }


@pytest.mark.slow  # pip builds and installs a copy
def test_the_installed_copy_holds_every_file_of_the_source_roots(tmp_path):
    """setuptools finds the packages itself (pyproject.toml lists none): a new module, folder
    or data file under a source root ships without being listed anywhere."""
    source = tmp_path / "source"
    for root in SOURCE_ROOTS:
        shutil.copytree(
            REPO / root, source / root, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
        )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(target),
            str(source),
        ],
        check=True,
        capture_output=True,
    )
    installed = {
        str(path.relative_to(target))
        for path in (target / "mmprep").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert installed == source_files()


@pytest.mark.slow  # a Python process
def test_only_mmprep_is_importable_from_a_users_folder(tmp_path):
    """From a folder of the user's own (not this checkout), the old names import nothing
    of ours, and the public names do."""
    code = (
        "import importlib.util as u\n"
        "print([n for n in ('app', 'decoders', 'families', 'processors') if u.find_spec(n)])\n"
        "from mmprep.decoders import decode_video\n"
        "from mmprep.processors import load_processor\n"
        "from mmprep.engines import EngineOutput\n"
        "print('ok')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert result.stdout.split() == ["[]", "ok"], result.stderr


ENGINE = """
from mmprep.engines import EngineOutput
from mmprep.engines.base import NothingToStart


class ShoutEngine(NothingToStart):
    async def generate(self, request):
        yield EngineOutput(text=request.text().upper(), finish_reason="stop")
"""


@pytest.mark.slow  # `mmprep serve` as a process
def test_an_engine_in_a_users_own_app_package_serves(tmp_path):
    """The README's engine recipe (`PYTHONPATH=.`, `--engine-class module:Class`) from a
    FastAPI-style project whose own package is called `app`, run from that project."""
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    (tmp_path / "app" / "engine.py").write_text(textwrap.dedent(ENGINE))
    with AppProcess(
        "serve", "--engine-class", "app.engine:ShoutEngine", import_from=[tmp_path], cwd=tmp_path
    ) as app:
        answer = httpx.post(
            f"{app.url}/v1/chat/completions",
            timeout=10,
            json={"model": "mmprep-echo", "messages": [{"role": "user", "content": "hello"}]},
        )
    assert answer.status_code == 200, answer.text
    assert "HELLO" in answer.json()["choices"][0]["message"]["content"]
