"""/v1/messages and /v1/responses through the engines that answer from elsewhere: a
vLLM-like chat upstream (`--engine openai`, which gets the translated chat request and
the decoded image) and a vLLM-like /inference/v1/generate (`--engine vllm-generate` with a
Qwen2-VL folder: token ids out, detokenized here), whole and streamed, with the official
clients (tests/support/vllm_like.py's upstreams, real servers on loopback); and an engine
that fails mid-stream, whose failure is each API's error event."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator

import anthropic
import httpx
import pytest

from mmprep.core.config import Settings
from mmprep.interface.engine import EngineError, EngineOutput, NothingToStart
from mmprep.interface.prepared import PreparedRequest
from tests.support.chat import openai_client, png_data_url
from tests.support.model_folder import make_model_folder
from tests.support.servers import LiveServer, ThreadServer
from tests.support.vllm_like import ANSWER_IDS, VllmGenerateLike, VllmLike

MODEL = "test-vlm"
PNG = png_data_url(32, 24)


def claude(server) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0)


@pytest.fixture(scope="module")
def chat_upstream():
    upstream = VllmLike(model=MODEL, max_model_len=4096)
    with ThreadServer(upstream.app) as server:
        upstream.url = server.url
        settings = Settings(
            engine="openai",
            upstream_url=f"{server.url}/v1",
            upstream_model=MODEL,
            allow_private_networks=True,
        )
        with LiveServer(settings) as front:
            yield front, upstream


def test_through_an_openai_compatible_upstream(chat_upstream):
    front, upstream = chat_upstream
    content = [
        {"type": "text", "text": "What is it?"},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": PNG.split(",", 1)[1]},
        },
    ]
    message = claude(front).messages.create(
        model=MODEL, max_tokens=500, system="Be brief.", messages=[{"role": "user", "content": content}]
    )
    sent = upstream.received[-1]["body"]
    assert [m["role"] for m in sent["messages"]] == ["system", "user"] and sent["max_tokens"] == 500
    assert json.loads(message.content[0].text)["images"][0]["shape"] == [
        24,
        32,
        3,
    ]  # decoded by mmprep, sent on
    with claude(front).messages.stream(
        model=MODEL, max_tokens=500, messages=[{"role": "user", "content": content}]
    ) as stream:
        assert json.loads(stream.get_final_message().content[0].text)["images"][0]["shape"] == [24, 32, 3]
    parts = [{"type": "input_text", "text": "What is it?"}, {"type": "input_image", "image_url": PNG}]
    response = openai_client(front).responses.create(model=MODEL, input=[{"role": "user", "content": parts}])
    assert json.loads(response.output_text)["images"][0]["shape"] == [24, 32, 3]
    events = list(
        openai_client(front).responses.create(
            model=MODEL, input=[{"role": "user", "content": parts}], stream=True
        )
    )
    assert events[-1].type == "response.completed" and events[-1].response.output_text == response.output_text


@pytest.fixture(scope="module")
def generate_upstream(tmp_path_factory):
    folder = make_model_folder("qwen2_vl", tmp_path_factory.mktemp("models") / "Qwen2-VL-2B-Instruct")
    upstream = VllmGenerateLike(model=MODEL, max_model_len=4096)
    with ThreadServer(upstream.app) as server:
        upstream.url = server.url
        settings = Settings(
            engine="vllm-generate",
            upstream_url=f"{server.url}/v1",
            upstream_model=MODEL,
            model=folder,
            served_model_name=[MODEL],
            max_model_len=4096,
            allow_private_networks=True,
        )
        with LiveServer(settings) as front:
            yield front, upstream


def test_through_vllm_generate_token_ids_back_as_text(generate_upstream):
    front, upstream = generate_upstream
    content = [{"type": "text", "text": "Hi"}]
    message = claude(front).messages.create(
        model=MODEL, max_tokens=3, messages=[{"role": "user", "content": content}]
    )
    assert (message.content[0].text, message.stop_reason) == ("Hello, world", "max_tokens")
    assert upstream.received[-1]["body"]["sampling_params"]["max_tokens"] == 3
    with claude(front).messages.stream(
        model=MODEL, max_tokens=100, messages=[{"role": "user", "content": content}]
    ) as stream:
        final = stream.get_final_message()
    assert final.content[0].text == "Hello, world!" and final.usage.output_tokens == len(ANSWER_IDS)
    response = openai_client(front).responses.create(model=MODEL, input="Hi", max_output_tokens=3)
    assert (response.output_text, response.status) == ("Hello, world", "incomplete")
    events = list(openai_client(front).responses.create(model=MODEL, input="Hi", stream=True))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "Hello, world!"
    assert events[-1].response.usage.output_tokens == len(ANSWER_IDS)


class BreaksMidway(NothingToStart):
    """Answers a first piece of text, then fails: the 200 is out, so the failure is an event."""

    async def generate(self, request: PreparedRequest) -> AsyncGenerator[EngineOutput, None]:
        yield EngineOutput(text="Half an ")
        raise EngineError("the engine broke after its first output")


@pytest.fixture(scope="module")
def breaking():
    with LiveServer(Settings(served_model_name=[MODEL]), engine=BreaksMidway()) as front:
        yield front


def test_a_failure_mid_stream_is_the_apis_error_event(breaking):
    body = {"model": MODEL, "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with httpx.stream("POST", f"{breaking.url}/v1/messages", json=body, timeout=30) as response:
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    events = [json.loads(line.removeprefix("data: ")) for line in lines]
    assert [e["type"] for e in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",  # the open block closed first
        "error",
    ]
    assert events[-1]["error"] == {
        "type": "api_error",
        "message": "the engine failed: the engine broke after its first output",
    }
    body = {"model": MODEL, "input": "hi", "stream": True}
    with httpx.stream("POST", f"{breaking.url}/v1/responses", json=body, timeout=30) as response:
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    events = [json.loads(line.removeprefix("data: ")) for line in lines]
    assert [e["type"] for e in events][-2:] == ["response.output_text.delta", "error"]
    assert events[-1]["code"] == "engine_error" and events[-1]["sequence_number"] == len(events) - 1
    assert httpx.get(f"{breaking.url}/health").status_code == 200
