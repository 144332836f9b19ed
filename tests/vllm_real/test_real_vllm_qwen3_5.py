"""Qwen3.5 / 3.6 chats against vLLM 0.33's `vllm launch render`, live: the published template
(thinking on by default, tools as `<function=...>` calls, a macro that takes each message's
content), so every render field must be vLLM's (token ids, placeholders, hashes, tensors) for
the chats a deployment sends: tools, thinking switched off, a tool call and its result in the
history, an earlier turn's reasoning, several images, a developer message, a system prompt.
Skipped, saying why, where the render venv is absent (scripts/vllm_venv.sh)."""

from __future__ import annotations

import pytest

from mmprep.core.config import Settings
from tests.support.model_folder import make_model_folder
from tests.support.servers import LiveServer
from tests.vllm_real.real_vllm import (
    COMMON_ARGS,
    RENDER_VENV,
    VllmProcess,
    data_url,
    differences,
    missing_venv,
    png,
    render,
    render_fields,
)

pytestmark = pytest.mark.slow
if reason := missing_venv(RENDER_VENV):
    pytest.skip(reason, allow_module_level=True)

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}


def image(width: int, height: int) -> dict:
    return {"type": "image_url", "image_url": {"url": data_url(png(width, height), "image/png")}}


CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Hangzhou", "days": 2}'},
}
# Each chat has images of its own: vLLM's processor cache gives an item back as the batch it
# was first made in wrote it, so an image seen before in a batch of two comes back, alone, with
# that batch's `slices` in its field (the same pixels); mmprep writes each batch's own.
CHATS: dict[str, dict] = {
    "text around two images": {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "First"},
                    image(64, 48),
                    {"type": "text", "text": "then"},
                    image(300, 200),
                    {"type": "text", "text": "compare."},
                ],
            }
        ]
    },
    "plain": {"messages": [{"role": "user", "content": "Hello there"}]},
    "thinking off": {
        "messages": [{"role": "user", "content": "Hello there"}],
        "chat_template_kwargs": {"enable_thinking": False},
    },
    "system and image": {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [image(96, 72), {"type": "text", "text": "What is this?"}]},
        ]
    },
    "tools": {"messages": [{"role": "user", "content": "Weather in Hangzhou?"}], "tools": [WEATHER]},
    "a tool call and its result": {
        "messages": [
            {"role": "user", "content": "Weather in Hangzhou?"},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": '{"temperature": 30}'},
        ],
        "tools": [WEATHER],
    },
    "an earlier turn's reasoning": {
        "messages": [
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "4", "reasoning_content": "Two and two make four."},
            {"role": "user", "content": [image(112, 84), {"type": "text", "text": "And this?"}]},
        ]
    },
    "developer": {
        "messages": [
            {"role": "developer", "content": "Answer in French."},
            {"role": "user", "content": "Hello"},
        ]
    },
}


# vLLM's recipe for Qwen3.5 and 3.6
PARSERS = {"reasoning_parser": "qwen3", "tool_call_parser": "qwen3_coder", "enable_auto_tool_choice": True}


@pytest.fixture(scope="module", params=["qwen3_5", "qwen3_5_moe"])
def servers(request, tmp_path_factory):
    folder = make_model_folder(request.param, tmp_path_factory.mktemp("models") / f"tiny-{request.param}")
    flags = [
        f"--{key.replace('_', '-')}" + ("" if value is True else f"={value}")
        for key, value in PARSERS.items()
    ]
    model = str(folder)
    settings = Settings(model=folder, upstream_model_id=model, served_model_name=[model], **PARSERS)
    with VllmProcess(RENDER_VENV, ["launch", "render"], folder, *COMMON_ARGS, *flags) as vllm:
        with LiveServer(settings) as mmprep:
            yield folder, vllm.url, mmprep.url


def fields(request: dict) -> dict:
    """render_fields, or the token ids alone for a chat without media (no features)."""
    return render_fields(request) if request.get("features") else {"token_ids": request["token_ids"]}


@pytest.mark.parametrize("chat", CHATS)
def test_the_chat_render_is_vllms(servers, chat):
    folder, vllm, mmprep = servers
    body = {"model": str(folder), "max_tokens": 8, "temperature": 0, **CHATS[chat]}
    theirs, ours = fields(render(vllm, body)), fields(render(mmprep, body))
    assert differences(ours, theirs) == []
