"""The README's blocks, replayed as written, in order, in one shell, as a new user pastes them
into one terminal: the set-up (a fresh venv and `pip install -e .` in a copy of the checkout),
the first request (the server in the background, the wait for /health, curl), the openai
client's example and the server's stop. The port is a free one (the blocks' 8000 replaced, and
mmprep serve told by MMPREP_PORT), nothing else is changed. The answers are the README's own:
the first request's account as the README prints it, the client's frames and usage as the
README says them. The Tests section's commands are not replayed (they are this suite)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.servers import free_port

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()
MARK = "=== README block"


def bash_blocks(text: str) -> list[str]:
    """The ```bash blocks of the README before its Tests section, in order."""
    return re.findall(r"```bash\n(.*?)```", text[: text.index("\n## Tests")], re.S)


def printed_json(text: str) -> dict:
    """The README's printed answer to the first request (the ```json block after it)."""
    return json.loads(re.findall(r"```json\n(.*?)```", text, re.S)[0])


def copy_of_the_checkout(target: Path) -> Path:
    """The checkout's files as a clone would have them, uncommitted changes too (git's tracked
    and untracked files, not its ignored ones: no venvs, no caches)."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            (target / name).write_bytes(source.read_bytes())
    return target


def test_the_blocks_are_the_ones_this_test_replays():
    """Cheap: what the slow replay runs is what the README says (four blocks, the server
    started in the background and stopped at the end, no server left in the set-up)."""
    blocks = bash_blocks(README)
    assert len(blocks) == 4
    setup, first, client, stop = blocks
    assert "pip install -e ." in setup and "mmprep serve" not in setup
    assert first.startswith("mmprep serve") and first.splitlines()[0].endswith("&")
    assert "/health" in first and "curl -s http://127.0.0.1:8000/v1/chat/completions" in first
    assert "pip install openai" in client and "python - <<'EOF'" in client
    assert stop.strip() == "kill %1"


@pytest.mark.slow  # a venv and pip installs, about 40 s
def test_the_readmes_blocks_paste_and_work_in_order(tmp_path):
    checkout = copy_of_the_checkout(tmp_path / "mmprep")
    port = free_port()
    script = ["set -e"]
    for index, block in enumerate(bash_blocks(README)):
        script += [f'echo "{MARK} {index}"', block.replace("127.0.0.1:8000", f"127.0.0.1:{port}")]
    script.append(f'echo "{MARK} end"')
    env = {key: value for key, value in os.environ.items() if not key.startswith(("VIRTUAL_ENV", "PYTHON"))}
    env |= {"MMPREP_PORT": str(port), "PATH": _without_venvs(env.get("PATH", ""))}
    started = time.monotonic()
    done = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    took = time.monotonic() - started
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    outputs = re.split(rf"^{MARK} (\d+|end)\n", done.stdout, flags=re.M)[1:]
    said = dict(zip(outputs[::2], outputs[1::2], strict=True))
    # the first request: the README's answer, its id and time aside
    answer = json.loads(said["1"])
    expected = printed_json(README)
    for volatile in ("id", "created"):
        assert answer.pop(volatile) and expected.pop(volatile)
    assert answer == expected
    # the openai client's example: the account with three frames at one per second, then the usage
    account, usage = said["2"].strip().splitlines()[-2:]
    assert '"timestamps":[0.0,1.0,2.0],"indices":[0,2,4]' in account
    printed_usage = re.search(r"`(CompletionUsage\([^`]*?), \.\.\.\)`", README)
    assert printed_usage and usage.startswith(printed_usage.group(1))  # as the README prints it
    print(f"the README's blocks replayed in {took:.1f} s")


def _without_venvs(path: str) -> str:
    """PATH without this test run's own venv: the README's set-up makes and activates its own."""
    return os.pathsep.join(part for part in path.split(os.pathsep) if "venv" not in part)
