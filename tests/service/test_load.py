"""A few hundred mixed requests at concurrency 64 against a live `mmprep serve`: the load
benchmark (benchmarks/load.py) run as a user runs it, for fewer requests."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

LOAD = Path(__file__).resolve().parents[2] / "benchmarks" / "load.py"

pytestmark = pytest.mark.slow  # benchmarks/load.py as a process, 300 requests


def test_under_load_every_request_is_answered_as_it_should_be():
    command = [sys.executable, str(LOAD), "--requests", "300", "--concurrency", "64", "--seed", "3"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert summary["answered"] == 300  # nothing lost: no timeouts, no dropped connections
    assert summary["as_expected"] == 300, summary["wrong"]  # valid: 200; bad input: its 4xx
    assert summary["server_errors"] == 0
    assert {"200", "400", "404"} <= set(summary["statuses"])
    assert summary["rss_after_mib"] - summary["rss_before_mib"] < 64, summary  # memory comes back
