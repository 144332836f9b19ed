"""Ours against vLLM's own parsers on the same token ids. vLLM's answers (whole, and
streamed a token at a time; for a few calls, whole when cut by max_tokens after each token)
are stored in the fixtures by tests/fixtures/vllm_parsers.py, so this runs everywhere; where
vLLM is installed (MMPREP_VLLM_PYTHON, default the .venv-vllm-render that scripts/vllm_venv.sh
makes: see vllm_parsers.py), the stored answers are checked to be still vLLM's. A fixture whose
answer differs from vLLM's on purpose says why (`vllm_differs`).

Ours is compared streamed a token at a time with vLLM's whole answer: on the same ids,
vLLM's own stream differs from its whole answer where its parsers stream a call before it
is known to be one (a malformed call, one cut by max_tokens: test_vllm_streams_... below)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.derender_fixtures import FIXTURES, fixture_names, load, replay, tokenizer
from tests.support.qwen_tokenizer import tokenizer_file

REPO = Path(__file__).resolve().parents[2]
VLLM_PYTHON = os.environ.get("MMPREP_VLLM_PYTHON", str(REPO / ".venv-vllm-render" / "bin" / "python"))
COMPARED = [name for name in fixture_names() if "vllm" in load(name)]
CUT_EVERYWHERE = [name for name in COMPARED if "cuts" in load(name)["vllm"]]


def ours(name: str | dict) -> dict:
    deltas, _ = replay(load(name) if isinstance(name, str) else name, 1)
    calls: list[list[str]] = []
    for call in (call for d in deltas for call in d.tool_calls):
        if call.id is not None:
            calls.append([call.name or "", ""])
        calls[call.index][1] += call.arguments
    return {
        "reasoning": "".join(d.reasoning for d in deltas) or None,
        "content": "".join(d.content for d in deltas) or None,
        "tool_calls": calls,
    }


@pytest.mark.skipif(
    not COMPARED, reason="no fixture holds vLLM's answer yet (run tests/fixtures/vllm_parsers.py)"
)
@pytest.mark.parametrize("name", COMPARED)
def test_our_answer_is_vllms_on_the_same_ids(name):
    fixture = load(name)
    if "vllm_differs" in fixture:
        pytest.skip(f"differs on purpose: {fixture['vllm_differs']}")
    assert ours(name) == fixture["vllm"]["whole"]


def test_vllms_stream_of_a_malformed_or_cut_call_is_a_broken_call_ours_is_content():
    """The stored finding behind the jail: vLLM 0.33's hermes streams a call that never
    parses (vllm#28297's family); its whole answer, and ours streamed, are content."""
    for name in (
        "tool_call_malformed",
        "tool_call_cut_by_max_tokens",
        "tool_call_malformed_after_its_first_argument",
        "tool_call_cut_after_its_first_argument",
        "tool_calls_hermes_one_malformed",
    ):
        vllm = load(name)["vllm"]
        assert vllm["streamed"]["tool_calls"] and not vllm["whole"]["tool_calls"]
        assert ours(name)["tool_calls"] == [] and ours(name)["content"] == vllm["whole"]["content"]


@pytest.mark.parametrize("name", CUT_EVERYWHERE)
def test_a_call_cut_by_max_tokens_anywhere_is_answered_as_vllm(name):
    """The answer cut after each of its tokens, ours streamed a token at a time against
    vLLM's whole answer: a hermes call that did not close as JSON is content, a qwen3_coder
    call is a call with the parameters written whole ({} before one is), finish_reason
    "length" either way. One difference kept: a qwen3_coder answer cut inside its
    <tool_call> wrapper before a <function= is written keeps the wrapper as content, where
    vLLM drops the text (mmprep never loses what the model wrote)."""
    fixture = load(name)
    for limit, theirs in enumerate(fixture["vllm"]["cuts"], start=1):
        cut = {**fixture, "request": {**fixture["request"], "max_tokens": limit}}
        mine = ours(cut)
        text = tokenizer().decode(fixture["token_ids"][:limit], skip_special_tokens=False)
        if fixture["server"]["tool_call_parser"] == "qwen3_coder" and text.rfind("<tool_call>") > text.rfind(
            "<function="
        ):
            wrapper = text[text.rfind("<tool_call>") :].strip()
            assert mine["content"].startswith((theirs["content"] or "").strip()), limit
            assert mine["content"].strip().endswith(wrapper), limit
            assert mine["tool_calls"] == theirs["tool_calls"], limit
            continue
        assert mine == theirs, limit
        assert replay(cut, 1)[1].finish_reason == "length"


def _vllm_importable() -> bool:
    if not Path(VLLM_PYTHON).exists():
        return False
    check = subprocess.run(
        [VLLM_PYTHON, "-c", "import vllm.parser.parser_manager"],
        capture_output=True,
        timeout=120,
        check=False,
    )
    return check.returncode == 0


@pytest.mark.slow  # vLLM's own interpreter as a process
@pytest.mark.skipif(not COMPARED, reason="no fixture holds vLLM's answer yet")
def test_the_stored_answers_are_still_vllms():
    """Slow (about a minute: vLLM and torch import) and only where vLLM is installed: CI
    checks the stored answers above without it."""
    if not _vllm_importable():
        pytest.skip(f"vLLM's parsers do not import with {VLLM_PYTHON}")
    run = subprocess.run(
        [VLLM_PYTHON, str(FIXTURES / "vllm_parsers.py"), str(tokenizer_file("qwen3_vl"))],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    for line in run.stdout.splitlines():
        found = json.loads(line)
        fixture = load(found.pop("fixture").removeprefix("frontend_"))
        if "error" in found:  # vLLM's parser refuses the Qwen vocabulary (llama3_json's, mistral's)
            assert "vllm" not in fixture
        else:  # every answer vLLM gives is stored, and is what it gives now
            assert found == fixture.get("vllm")
