"""The README, held to what mmprep does.

Its blocks are replayed as written, in order, in one shell, as a new user pastes them: the
quick start (a fresh venv, `pip install -e .` and `mmprep serve` in a copy of the checkout),
then what the second terminal runs against that server (the first request, the image and
the sound, the openai client's example). The quick start's server, which serves until
Ctrl-C, runs as the shell's job and is stopped at the end; the port is a free one (the
blocks' 8000 replaced, and mmprep serve told by MMPREP_PORT); nothing else is changed. The
answers are the README's own: each printed account as the README prints it, the client's
frames and usage as the README says them. The test command (`bash scripts/test.sh`) is not
replayed: it is this suite.

Its figures and lists are held to the code where one can be: the quick half's count, the
routes, the tensors a processor adds to the image and the sound."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from mmprep.api.app import create_app
from mmprep.core.config import Settings
from tests.support.media import MEDIA
from tests.support.servers import LiveServer, free_port

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()
MARK = "=== README block"
SERVE = "mmprep serve --allowed-local-media-path tests/data/media"


def bash_blocks(text: str) -> list[str]:
    """The ```bash blocks of the README before its Tests section, in order."""
    return re.findall(r"```bash\n(.*?)```", text[: text.index("\n## Tests")], re.S)


def json_blocks(text: str) -> list[dict]:
    """The README's printed answers (its ```json blocks), in order: the first request's
    answer, its content decoded, the image and the sound's account."""
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", text, re.S)]


def request_body(block: str, root: Path) -> dict:
    """The JSON a curl block sends, its $PWD as `root`."""
    body = re.search(r"-d '(.*?)' \|", block, re.S)
    assert body, block
    return json.loads(body.group(1).replace("'\"$PWD\"'", str(root)))


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
    """Cheap: what the slow replay runs is what the README says (the quick start's two
    commands, then three blocks for a second terminal, none of which starts a server)."""
    serve, tests, first, media, client = bash_blocks(README)
    assert serve.strip() == f"python3 -m venv .venv && . .venv/bin/activate && pip install -e . && {SERVE}"
    assert tests.strip() == "bash scripts/test.sh" and (REPO / "scripts" / "test.sh").exists()
    assert "bash scripts/test.sh" in (REPO / ".ci" / "run").read_text()  # the command CI runs
    for block in (first, media):
        assert block.startswith("curl -s http://127.0.0.1:8000/v1/chat/completions")
    assert "pip install openai" in client and "python - <<'EOF'" in client
    assert "mmprep serve" not in first + media + client


def test_the_decoded_content_is_the_answers():
    answer, decoded, _ = json_blocks(README)
    assert json.loads(answer["choices"][0]["message"]["content"]) == decoded


def test_the_image_and_the_sound_are_fixtures_of_the_checkout():
    media = bash_blocks(README)[3]
    urls = [
        part[key]["url"]
        for part in request_body(media, REPO)["messages"][0]["content"]
        for key in part
        if key.endswith("_url")
    ]
    assert [Path(url.removeprefix("file://")).parent for url in urls] == [MEDIA, MEDIA]
    assert all(Path(url.removeprefix("file://")).exists() for url in urls)


def test_the_routes_named_are_the_routes_served():
    named = re.search(r"\nThe routes: (.*?)\n\n", README, re.S)
    assert named, "the README's list of routes"
    paths = set(re.findall(r"`(?:[A-Z]+ )?(/[\w/.-]*)`", named.group(1)))
    served = set(create_app(Settings()).openapi()["paths"]) | {"/preview"}  # the page is not in the schema
    assert paths == served


def test_a_processor_adds_the_tensors_the_readme_names():
    """The sentence after the image and the sound's account: what --processor
    google/gemma-4-e4b-it adds to each item, and what usage counts."""
    body = request_body(bash_blocks(README)[3], REPO)
    settings = Settings(processor="google/gemma-4-e4b-it", allowed_local_media_path=[MEDIA])
    with LiveServer(settings) as server:
        answer = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=60).json()
    image, sound = json.loads(answer["choices"][0]["message"]["content"])["media"]
    said = " ".join(README.split("--processor google/gemma-4-e4b-it", 1)[1].split("\n\n", 1)[0].split())
    for item in (image, sound):
        for name in item["processed"]["tensors"]:
            assert f"`{name}`" in said, name
    tokens = image["processed"]["num_tokens"] + sound["processed"]["num_tokens"]
    assert answer["usage"]["prompt_tokens"] > tokens  # the text's tokens, and those of the two items


@pytest.mark.slow  # a pytest process collecting the whole suite, about 10 s
def test_the_quick_half_has_as_many_tests_as_the_readme_says():
    said = re.search(r"The quick half, .*?\(over ([\d,]+) tests", README, re.S)
    assert said, "the README's count of the quick half"
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", "not slow"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    count = int(re.search(r"^(\d+)(?:/\d+)? tests? collected", collected, re.M).group(1))
    assert count > int(said.group(1).replace(",", ""))


@pytest.mark.slow  # a venv and pip installs, about 40 s
def test_the_readmes_blocks_paste_and_work_in_order(tmp_path):
    checkout = copy_of_the_checkout(tmp_path / "mmprep")
    port = free_port()
    serve, _tests, *second_terminal = bash_blocks(README)
    *install, server = serve.strip().split(" && ")
    health = f"curl -sf http://127.0.0.1:{port}/health >/dev/null"
    script = [
        "set -e",
        " && ".join([*install, f"{{ {server} & }}"]),  # the quick start, its server as a job
        f"for i in $(seq 300); do {health} && break; sleep 0.1; done",
    ]
    for index, block in enumerate(second_terminal):
        script += [f'echo "{MARK} {index}"', block.replace("127.0.0.1:8000", f"127.0.0.1:{port}")]
    script += [f'echo "{MARK} end"', "kill %1", "wait %1 || true"]  # the README's Ctrl-C
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
    expected, _, media = json_blocks(README)
    # the first request: the README's answer, its id and time aside
    answer = json.loads(said["0"])
    for volatile in ("id", "created"):
        assert answer.pop(volatile) and expected.pop(volatile)
    assert answer == expected
    # the image and the sound: the README's account
    assert json.loads(said["1"]) == media
    # the openai client's example: the account with three frames at one per second, then the usage
    account, usage = said["2"].strip().splitlines()[-2:]
    assert '"timestamps":[0.0,1.0,2.0],"indices":[0,2,4]' in account
    printed_usage = re.search(r"`(CompletionUsage\([^`]*?), \.\.\.\)`", README)
    assert printed_usage and usage.startswith(printed_usage.group(1))  # as the README prints it
    print(f"the README's blocks replayed in {took:.1f} s")


def _without_venvs(path: str) -> str:
    """PATH without this test run's own venv: the README's quick start makes and activates its own."""
    return os.pathsep.join(part for part in path.split(os.pathsep) if "venv" not in part)
