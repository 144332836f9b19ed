"""The installed code has one import root, `mmprep`: a user's own `app/` (every FastAPI
project has one), `decoders/`, `families/` or `processors/` never collides with it. (The image's own
install is checked in test_dockerfile.py: only `mmprep` lands in its site-packages.)"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import httpx
import pytest

from tests.support.servers import AppProcess


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
from mmprep.interface.engine import NothingToStart


class ShoutEngine(NothingToStart):
    async def generate(self, request):
        yield EngineOutput(text=request.text().upper(), finish_reason="stop")
"""


@pytest.mark.slow  # `mmprep serve` as a process
def test_an_engine_in_a_users_own_app_package_serves(tmp_path):
    """library.md's engine recipe (`PYTHONPATH=.`, `--engine-class module:Class`) from a
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
