"""POST /v1/messages through real servers and the official anthropic client: the request as
the chat request vLLM makes of it (the prompt rendered with --model is the chat request's
own), the fixtures' answers as Anthropic's blocks, stop reasons and events, streamed equal
to whole, and bad input as Anthropic's errors naming the field."""

from __future__ import annotations

import base64
import json

import anthropic
import httpx
import pytest
import xxhash

from tests.support.chat import MODEL, png_data_url
from tests.support.media_store import MediaStore
from tests.support.model_folder import make_model_folder
from tests.support.replay_servers import REPLAY_MODEL, replay
from tests.support.servers import LiveServer

PNG = png_data_url(8, 6)
PNG_BASE64 = PNG.removeprefix("data:image/png;base64,")
TOOL = {
    "name": "get_weather",
    "description": "The weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def client(server) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0)


def account(message) -> dict:
    """The echo engine's account of what it was given."""
    assert [block.type for block in message.content] == ["text"]
    return json.loads(message.content[0].text)


def events(server, body: dict) -> list[dict]:
    """The SSE events of a streamed request, each checked to name its own type."""
    found = []
    with httpx.stream(
        "POST", f"{server.url}/v1/messages", json={**body, "stream": True}, timeout=60
    ) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith(
            "text/event-stream"
        )
        lines = [line for line in response.iter_lines() if line]
    for name, data in zip(lines[::2], lines[1::2], strict=True):
        event = json.loads(data.removeprefix("data: "))
        assert name == f"event: {event['type']}"
        found.append(event)
    return found


def test_system_text_and_images_reach_the_engine_in_order(echo_server, tmp_path):
    (tmp_path / "a.png").write_bytes(base64.b64decode(PNG_BASE64))
    with MediaStore(folder=tmp_path) as files:
        message = client(echo_server).messages.create(
            model=MODEL,
            max_tokens=1000,
            system=[
                {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1; cch=0a1b2c"},
                {"type": "text", "text": "Be brief. "},
                {"type": "text", "text": "Be kind."},
            ],
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Compare"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": PNG_BASE64},
                        },
                        {"type": "image", "source": {"type": "url", "url": f"{files.url}/a.png"}},
                    ],
                }
            ],
            extra_body={"temperature": 0.5},  # anthropic 2.x no longer sends it itself
        )
    seen = account(message)
    assert (
        seen["text"] == "Be brief. Be kind.\nCompare\n<image_0>\n<image_1>"
    )  # the system text first, joined
    assert [item["shape"] for item in seen["media"]] == [[6, 8, 3], [6, 8, 3]]
    assert seen["media"][0]["xxh3"] == seen["media"][1]["xxh3"]  # the same picture both ways
    assert seen["sampling"] | {"seed": None} == {
        "max_tokens": 1000,
        "temperature": 0.5,
        "top_p": None,
        "seed": None,
        "stop": [],  # (a stop string would cut the account, which lists it: tested below)
    }
    assert message.stop_reason == "end_turn" and message.role == "assistant" and message.type == "message"
    assert message.usage.output_tokens > 0 and message.usage.input_tokens > 0


def test_a_stream_is_anthropics_events_and_adds_up_to_the_whole_answer(echo_server):
    body = {"model": MODEL, "max_tokens": 32, "messages": [{"role": "user", "content": "hello"}]}
    whole = client(echo_server).messages.create(**body)
    found = events(echo_server, body)
    kinds = [event["type"] for event in found]
    assert kinds[:2] == ["message_start", "content_block_start"]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(kinds[2:-3]) == {"content_block_delta"}
    assert found[0]["message"]["content"] == [] and found[0]["message"]["role"] == "assistant"
    assert found[1] == {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": ""},
    }
    text = "".join(event["delta"]["text"] for event in found[2:-3])
    assert text == whole.content[0].text
    assert found[-2]["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    assert found[-2]["usage"]["output_tokens"] == whole.usage.output_tokens
    with client(echo_server).messages.stream(**body) as stream:
        final = stream.get_final_message()
    assert final.content[0].text == whole.content[0].text and final.stop_reason == "end_turn"


def test_thinking_and_a_tool_call_come_back_as_blocks_whole_and_streamed(parsing_server):
    body = {
        "model": REPLAY_MODEL,
        "max_tokens": 100,
        "tools": [TOOL],
        "messages": [{"role": "user", "content": "weather in Paris?"}],
    }
    for chunk in (20, 1):
        extra = replay("tool_call_after_reasoning", chunk)
        whole = client(parsing_server).messages.create(**body, extra_body=extra)
        assert [block.type for block in whole.content] == ["thinking", "tool_use"]
        thinking, call = whole.content
        assert thinking.thinking == "\nI need the weather.\n" and len(thinking.signature) == 32
        assert (call.name, call.input) == ("get_weather", {"city": "Paris", "days": 3})
        assert call.id.startswith("chatcmpl-tool-") and whole.stop_reason == "tool_use"
        with client(parsing_server).messages.stream(**body, extra_body=extra) as stream:
            final = stream.get_final_message()
        assert [block.type for block in final.content] == ["thinking", "tool_use"]
        assert final.content[0].thinking == thinking.thinking
        assert (final.content[1].name, final.content[1].input) == (
            "get_weather",
            {"city": "Paris", "days": 3},
        )
        assert final.stop_reason == "tool_use"
    found = events(parsing_server, {**body, **replay("tool_call_after_reasoning", 5)})
    deltas = [event["delta"]["type"] for event in found if event["type"] == "content_block_delta"]
    # the thinking block's signature comes last, before its stop; the text between the two
    # blocks is whitespace the hermes parser drops
    assert deltas[0] == "thinking_delta" and "signature_delta" in deltas and deltas[-1] == "input_json_delta"
    starts = [event["content_block"] for event in found if event["type"] == "content_block_start"]
    assert [block["type"] for block in starts] == ["thinking", "tool_use"] and starts[1]["input"] == {}


def test_reasoning_then_text(parsing_server):
    message = client(parsing_server).messages.create(
        model=REPLAY_MODEL,
        max_tokens=50,
        messages=[{"role": "user", "content": "salut"}],
        extra_body=replay("reasoning_then_answer"),
    )
    assert [(b.type, getattr(b, "thinking", None) or b.text) for b in message.content] == [
        ("thinking", "\nThe user greets me in French. 🤔\n"),
        ("text", "\n\nBonjour ! 👋"),
    ]


@pytest.mark.parametrize("stream", [False, True])
def test_stop_reasons_say_why_the_answer_ended(plain_server, stream):
    def ask(fixture: str, **fields):
        body = {
            "model": REPLAY_MODEL,
            "max_tokens": 50,
            "messages": [{"role": "user", "content": "hi"}],
            **fields,
        }
        if not stream:
            return client(plain_server).messages.create(**body, extra_body=replay(fixture, 2))
        with client(plain_server).messages.stream(**body, extra_body=replay(fixture, 2)) as answer:
            return answer.get_final_message()

    stopped = ask("stop_string", stop_sequences=["END", "never"])
    assert (stopped.stop_reason, stopped.stop_sequence, stopped.content[0].text) == (
        "stop_sequence",
        "END",
        "The answer is 42. ",
    )
    cut = ask("max_tokens", max_tokens=4)
    assert (cut.stop_reason, cut.content[0].text) == ("max_tokens", "one two three four")


@pytest.fixture(scope="module")
def qwen3_server(tmp_path_factory):
    folder = make_model_folder("qwen3_vl", tmp_path_factory.mktemp("m") / "Qwen3-VL-Test")
    with LiveServer(model=folder) as server:
        yield server


def test_with_a_model_the_prompt_is_the_one_vllms_chat_request_renders(qwen3_server):
    """tool_use, tool_result (text and an image), thinking and system blocks rendered as
    the chat request vLLM's translation makes of them renders."""
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "A tool knows.", "signature": "s"},
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [
                        {"type": "text", "text": "Sunny"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": PNG_BASE64},
                        },
                    ],
                },
                {"type": "text", "text": "And tomorrow?"},
            ],
        },
    ]
    chat = [
        {"role": "system", "content": "You forecast."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "Let me look.",
            "reasoning": "A tool knows.",
            "tool_calls": [
                {
                    "id": "toolu_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "toolu_1", "content": "Sunny"},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": PNG}}]},
        {"role": "user", "content": "And tomorrow?"},
    ]
    tools = [
        {
            "type": "function",
            "function": {
                "name": TOOL["name"],
                "description": TOOL["description"],
                "parameters": TOOL["input_schema"],
            },
        }
    ]
    rendered = httpx.post(
        f"{qwen3_server.url}/v1/chat/completions/render",
        json={"model": "Qwen3-VL-Test", "messages": chat, "tools": tools, "tool_choice": "none"},
        timeout=60,
    ).json()
    # the echo engine takes no tool parser: tool_choice "none" keeps the tools in the prompt
    message = client(qwen3_server).messages.create(
        model="Qwen3-VL-Test",
        max_tokens=1000,
        system="You forecast.",
        messages=messages,
        tools=[TOOL],
        tool_choice={"type": "none"},
    )
    prompt = account(message)["prompt"]
    import array

    assert prompt["tokens"] == len(rendered["token_ids"]) == message.usage.input_tokens
    assert prompt["xxh3"] == xxhash.xxh3_64_hexdigest(array.array("q", rendered["token_ids"]).tobytes())
    assert [p["modality"] for p in prompt["placeholders"]] == ["image"]


@pytest.mark.parametrize(
    ("body", "status", "kind", "says"),
    [
        ({"max_tokens": None}, 400, "invalid_request_error", "max_tokens: "),
        ({"max_tokens": 0}, 400, "invalid_request_error", "max_tokens: "),
        ({"model": "other"}, 404, "not_found_error", "'other' does not exist"),
        ({"messages": []}, 400, "invalid_request_error", "messages: "),
        (
            {"messages": [{"role": "user", "content": [{"type": "video", "text": "x"}]}]},
            400,
            "invalid_request_error",
            "messages[0].content[0].type: ",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "base64"}}]}]},
            400,
            "invalid_request_error",
            "messages[0].content[0].source.data: a base64 source needs its data",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "image"}]}]},
            400,
            "invalid_request_error",
            "messages[0].content[0].source: a image block needs source",
        ),
        (
            {
                "system": "s",
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "a"},
                            {
                                "type": "image",
                                "source": {
                                    "type": "base64",
                                    "media_type": "image/png",
                                    "data": "bm90IGFuIGltYWdl",
                                },
                            },
                        ],
                    }
                ],
            },
            400,
            "invalid_request_error",
            "messages[0].content[1].source",  # the system message before it is not counted
        ),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 2048}},
            400,
            "invalid_request_error",
            "thinking.budget_tokens: must be less than max_tokens",
        ),
        ({"tool_choice": {"type": "tool"}}, 400, "invalid_request_error", "tool_choice.name: "),
        ({"temperature": 3}, 400, "invalid_request_error", "temperature: "),
    ],
)
def test_bad_input_is_anthropics_error_naming_the_field(echo_server, body, status, kind, says):
    sent = {"model": MODEL, "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}], **body}
    response = httpx.post(f"{echo_server.url}/v1/messages", json=sent, timeout=30)
    assert response.status_code == status, response.text
    assert response.json()["type"] == "error" and set(response.json()["error"]) == {"type", "message"}
    assert response.json()["error"]["type"] == kind
    assert says in response.json()["error"]["message"]
    assert httpx.get(f"{echo_server.url}/health").status_code == 200


def test_the_client_raises_anthropics_error_classes(echo_server):
    with pytest.raises(anthropic.NotFoundError):
        client(echo_server).messages.create(
            model="other", max_tokens=5, messages=[{"role": "user", "content": "x"}]
        )
    with pytest.raises(anthropic.BadRequestError, match="max_tokens"):
        client(echo_server).messages.create(
            model=MODEL, max_tokens=-1, messages=[{"role": "user", "content": "x"}]
        )
    response = httpx.post(
        f"{echo_server.url}/v1/messages", content=b"[1, 2]", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400 and response.json()["error"]["type"] == "invalid_request_error"


def test_thinking_disabled_turns_the_templates_thinking_off(parsing_server):
    """As vLLM: `thinking: disabled` is reasoning_effort "none", so the template's thinking
    is off and the qwen3 parser leaves the text as the model wrote it."""

    def blocks(**fields) -> list[tuple[str, str]]:
        message = client(parsing_server).messages.create(
            model=REPLAY_MODEL,
            max_tokens=2000,
            messages=[{"role": "user", "content": "hi"}],
            extra_body=replay("reasoning_thinking_off_model_thinks_anyway"),
            **fields,
        )
        return [(b.type, getattr(b, "thinking", None) or b.text) for b in message.content]

    assert blocks(thinking={"type": "disabled"}) == [("text", "<think>\n\n</think>\n\nPlain answer.")]
    thought = [("thinking", "\n\n"), ("text", "\n\nPlain answer.")]
    assert blocks(thinking={"type": "enabled", "budget_tokens": 1024}) == blocks() == thought
