"""/v1/messages and /v1/responses translate a request into the chat request vLLM 0.33's own
translation makes of it (AnthropicServingMessages.to_chat_completion_request,
construct_input_messages), compared case by case with what vLLM made, recorded in
tests/data/vllm_real/client_api_translations.json by scripts/vllm_client_translations.py;
with vLLM's render venv here, vLLM is asked again and must still answer as recorded.

What is made equal before comparing, and why: Responses' input_text / input_image parts are
mmprep's text / image_url parts (vLLM's chat parser reads both spellings; mmprep's
preprocessor reads the chat ones), a message item's `type: "message"` goes (no chat message
has one), and parallel_tool_calls unsaid is chat's default, true."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mmprep.api.common.messages_protocol import MessagesRequest, MessagesToChat
from mmprep.api.common.responses_protocol import ResponsesRequest, ResponsesToChat
from tests.vllm_real.real_vllm import RENDER_VENV, REPO, missing_venv

FILE = REPO / "tests" / "data" / "vllm_real" / "client_api_translations.json"
RECORDED: dict[str, Any] = json.loads(FILE.read_text())
CASES: dict[str, dict[str, Any]] = RECORDED["cases"]
KEYS: list[str] = RECORDED["compared"]  # the chat request's fields compared


def same_spelling(value: Any) -> Any:
    if isinstance(value, list):
        return [same_spelling(item) for item in value]
    if not isinstance(value, dict):
        return value
    value = {key: same_spelling(item) for key, item in value.items() if item is not None}
    if value.get("type") == "input_text":
        return {"type": "text", "text": value["text"]}
    if value.get("type") == "input_image":
        return {"type": "image_url", "image_url": {"url": value["image_url"]}}
    if "role" in value and value.get("type") == "message":
        value.pop("type")
    return value


def comparable(translation: dict[str, Any]) -> dict[str, Any]:
    found = same_spelling({key: translation.get(key) for key in KEYS})
    if "max_tokens" in found:  # a Responses case compares its messages only
        found.setdefault("parallel_tool_calls", True)
    return found


def ours(case: dict[str, Any]) -> dict[str, Any]:
    if case["api"] == "messages":
        return MessagesToChat().chat_document(MessagesRequest.model_validate(case["body"]))
    return {
        "messages": ResponsesToChat().chat_document(ResponsesRequest.model_validate(case["body"]))["messages"]
    }


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_chat_request_is_the_one_vllm_makes(name):
    assert comparable(ours(CASES[name])) == comparable(CASES[name]["vllm"])


@pytest.mark.slow  # vLLM's imports: about 30 s on 2 cores
@pytest.mark.skipif(missing_venv(RENDER_VENV) is not None, reason=str(missing_venv(RENDER_VENV)))
def test_vllm_still_translates_as_recorded(tmp_path: Path):
    out = tmp_path / "translations.json"
    subprocess.run(
        [
            str(RENDER_VENV / "bin" / "python"),
            str(REPO / "scripts" / "vllm_client_translations.py"),
            str(out),
        ],
        check=True,
        env={**os.environ, "VLLM_TARGET_DEVICE": "cpu"},
        capture_output=True,
        timeout=300,
    )
    assert json.loads(out.read_text()) == RECORDED
