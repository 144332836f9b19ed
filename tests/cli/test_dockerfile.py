"""The Docker image's file set is enough to run the service: the paths the Dockerfile's COPY
lines name, and only those, copied into an empty folder, installed from there, and
`mmprep serve` started from the installed copy, which holds no test support. (No Docker
engine runs here or in CI; this catches a package the image leaves out, which once made the
image fail at start.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.servers import free_port

pytestmark = pytest.mark.slow  # a pip install, then `python -m mmprep serve` as a process

REPO = Path(__file__).resolve().parents[2]
# Below each source root the folders are the import names: app/mmprep is mmprep,
# decoders/mmprep/decoders is mmprep.decoders, and so on (pyproject.toml).
SOURCE_ROOTS = ("app", "decoders", "families", "processors")
LIBRARIES = SOURCE_ROOTS[1:]  # each a root of its own that could be published apart


def copied_paths(dockerfile: Path) -> list[str]:
    """The source paths of every COPY line from the build context (the last word is the
    destination; a COPY --from copies between the image's stages)."""
    paths = []
    for line in dockerfile.read_text().splitlines():
        words = line.split()
        if words and words[0] == "COPY" and not words[1].startswith("--from="):
            sources = [word for word in words[1:-1] if not word.startswith("--")]
            paths.extend(sources)
    return paths


def test_the_images_files_install_and_serve(tmp_path):
    paths = copied_paths(REPO / "Dockerfile")
    assert {"pyproject.toml", "app", "decoders", "families", "processors"} <= set(paths)
    source = tmp_path / "image"
    source.mkdir()
    for path in paths:
        (shutil.copytree if (REPO / path).is_dir() else shutil.copy)(REPO / path, source / path)
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
        cwd=tmp_path,
    )
    # One import root: nothing named app, decoders, families or processors lands beside the user's code.
    installed = {p.name for p in target.iterdir() if not p.name.endswith(".dist-info")} - {"bin"}
    assert installed == {"mmprep"}
    # setuptools finds the packages itself (pyproject.toml lists none): every module, folder
    # and data file of the source roots ships without being listed anywhere, and the C
    # kernel compiled beside its source.
    installed_files = files_below(target, "mmprep")
    kernels = {f for f in installed_files if f.endswith(".so")}
    assert [Path(f).name.split(".")[0] for f in kernels] == ["_resample"]
    assert installed_files - kernels == {
        f for root in SOURCE_ROOTS for f in files_below(REPO / root, "mmprep") if not f.endswith(".so")
    }
    # and the libraries that could be published apart say they are typed (PEP 561)
    assert {f"mmprep/{library}/py.typed" for library in LIBRARIES} <= installed_files
    # What the tests and benchmarks share is beside the tests (tests/support): none of it ships
    # (it was mmprep/testing once).
    assert not {f for f in installed_files if {"testing", "tests", "support"} & set(Path(f).parts)}
    # -S: no site-packages processing, so this checkout's editable install (which would find
    # any package the image lacks in the repository) is out of reach; the dependencies come
    # from this interpreter's own path, less the checkout's source folders (a venv inside
    # the checkout stays).
    dependencies = [
        p
        for p in sys.path
        if p and ("site-packages" in Path(p).parts or not Path(p).resolve().is_relative_to(REPO))
    ]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(target), *dependencies]),
        "MMPREP_LOG_LEVEL": "warning",
    }
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-S", "-m", "mmprep", "serve", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert _answers(f"http://127.0.0.1:{port}/ready", process), process.stderr.read().decode()
        answer = httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            timeout=10,
            json={"model": "mmprep-echo", "messages": [{"role": "user", "content": "hello"}]},
        )
        assert answer.status_code == 200 and "hello" in answer.json()["choices"][0]["message"]["content"]
    finally:
        process.terminate()
        process.wait(timeout=30)


def files_below(folder: Path, name: str) -> set[str]:
    """The files of `folder`/`name`, as paths from `folder`, byte-code and build records aside."""
    return {
        str(path.relative_to(folder))
        for path in (folder / name).rglob("*")
        if path.is_file() and not {"__pycache__", "mmprep.egg-info"} & set(path.parts)
    }


def _answers(url: str, process: subprocess.Popen, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return True
        except httpx.TransportError:
            time.sleep(0.1)
    return False
