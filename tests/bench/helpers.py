"""What the bench tests share: `mmprep bench` run in the test's own process."""

from __future__ import annotations

import json

from mmprep.cli import main


def bench(server_url: str, tmp_path, *args: str) -> tuple[int, dict]:
    """Run `mmprep bench` in this process; (exit status, the JSON results)."""
    output = tmp_path / "results.json"
    status = main(["bench", "--url", server_url, "--output", str(output), "--save-records", "--quiet", *args])
    return status, json.loads(output.read_text()) if output.exists() else {}
