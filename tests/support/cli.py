"""`mmprep ...` run as an operator runs it: `python -m mmprep` as a real process, this
interpreter, the environment of the test plus `env`, and what it printed; and `mmprep bench`
run in the test's own process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mmprep.cli import main

MMPREP = (sys.executable, "-m", "mmprep")


def run_mmprep(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    """Run `mmprep <args>` to its end: the exit status, stdout and stderr as text. COLUMNS
    is fixed at 100 so help and tables wrap the same on every terminal (`env` may change it)."""
    return subprocess.run(
        [*MMPREP, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "100", **(env or {})},
        check=False,
    )


def start_mmprep(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start `mmprep <args>` and return at once (a test that runs several together):
    `communicate()` gives its stdout and stderr as text."""
    return subprocess.Popen(
        [*MMPREP, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "100", **(env or {})},
    )


def bench(server_url: str, tmp_path: Path, *args: str) -> tuple[int, dict]:
    """Run `mmprep bench` in this process; (exit status, the JSON results)."""
    output = tmp_path / "results.json"
    status = main(["bench", "--url", server_url, "--output", str(output), "--save-records", "--quiet", *args])
    return status, json.loads(output.read_text()) if output.exists() else {}
