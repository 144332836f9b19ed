"""The derender fixtures (tests/fixtures/frontend_*.json) and what the tests share about
them: the real Qwen3 tokenizer, the model's EOS ids, how an answer is compared with the
expected one (tool call ids are random: they are checked by pattern), and a fixture's ids
replayed through a Derenderer as an engine gives them (`replay`)."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

from tokenizers import Tokenizer

from mmprep.api.common.chat_protocol import parse_chat_request
from mmprep.derender import Delta, Derenderer, Derendering, ModelFacts
from mmprep.interface.engine import EngineOutput, TokenLogprob
from tests.support.qwen_tokenizer import tokenizer_file

FIXTURES = Path(__file__).parents[1] / "fixtures"
CHUNK_SIZES = (20, 5, 2, 1)  # tokens per engine output, as Dynamo replays its fixtures
EOS_IDS = (151645, 151643)  # Qwen3-VL's generation_config.json: <|im_end|>, <|endoftext|>
TOOL_ID = re.compile(r"chatcmpl-tool-[0-9a-f]{16}")
MISTRAL_ID = re.compile(r"[A-Za-z0-9]{9}")  # mistral's


@cache
def tokenizer() -> Tokenizer:
    return Tokenizer.from_file(str(tokenizer_file("qwen3_vl")))


def facts() -> ModelFacts:
    return ModelFacts(tokenizer(), EOS_IDS)


def fixture_names() -> list[str]:
    return sorted(path.stem.removeprefix("frontend_") for path in FIXTURES.glob("frontend_*.json"))


@cache
def _load(name: str) -> str:
    return (FIXTURES / f"frontend_{name}.json").read_text()


def load(name: str) -> dict:
    return json.loads(_load(name))


def derendering(fixture: dict, partial: bool = False) -> Derendering:
    """The fixture's server setup; `partial`: with --stream-partial-tool-calls."""
    server = fixture["server"]
    return Derendering(
        facts(),
        server.get("reasoning_parser"),
        server.get("tool_call_parser"),
        enable_auto_tool_choice="tool_call_parser" in server,
        stream_partial_tool_calls=partial,
    )


def assert_message(found: dict, expected: dict) -> None:
    """`found` is the expected message, random tool call ids aside (a vLLM-shaped id where
    the fixture says chatcmpl-tool-*; a format that writes its own, kimi_k2's, is compared)."""
    found = json.loads(json.dumps(found))
    for call in found.get("tool_calls") or []:
        if TOOL_ID.fullmatch(call["id"]):
            call["id"] = "chatcmpl-tool-*"
        elif MISTRAL_ID.fullmatch(call["id"]):
            call["id"] = "mistral-*"
    assert found == expected


def replay(fixture: dict, chunk: int, partial: bool = False) -> tuple[list[Delta], Derenderer]:
    """The fixture's ids through a Derenderer, `chunk` at a time, as an engine gives
    them; stops early when the derenderer says so. (deltas, derenderer)"""
    body = parse_chat_request(
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], **fixture["request"]}
    )
    setup = derendering(fixture, partial)
    derender = setup.start(body.sampling_params(), body.output_options(), prompt_tokens=7)
    ids, logprobs = fixture["token_ids"], fixture.get("logprobs") or []
    deltas = []
    for start in range(0, len(ids), chunk):
        given = tuple(
            TokenLogprob(i, lp, tuple(map(tuple, top))) for i, lp, top in logprobs[start : start + chunk]
        )
        deltas.append(
            derender.feed(EngineOutput(token_ids=tuple(ids[start : start + chunk]), logprobs=given))
        )
        if derender.stopped:
            break
    else:
        deltas.append(
            derender.feed(
                EngineOutput(
                    finish_reason=fixture["engine_finish"], prompt_tokens=7, completion_tokens=len(ids)
                )
            )
        )
    deltas.append(derender.finish())
    return deltas, derender
