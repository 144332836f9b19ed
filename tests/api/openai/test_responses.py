"""POST /v1/responses through real servers and the official openai client's responses API:
input items as the chat request vLLM makes of them (the prompt rendered with --model is the
chat request's own), the fixtures' answers as output items, the semantic events numbered
in order and adding up to the whole response, and bad input as OpenAI's errors naming the
field."""

from __future__ import annotations

import array
import json

import httpx
import openai
import pytest
import xxhash

from tests.support.chat import MODEL, assert_error, openai_client, png_data_url
from tests.support.model_folder import make_model_folder
from tests.support.replay_servers import REPLAY_MODEL, replay
from tests.support.servers import LiveServer

PNG = png_data_url(8, 6)
TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def account(response) -> dict:
    """The echo engine's account of what it was given."""
    return json.loads(response.output_text)


def without_ids(items: list) -> list[dict]:
    """Output items as dicts, their random item ids left out."""
    return [{k: v for k, v in item.model_dump(exclude_none=True).items() if k != "id"} for item in items]


def test_instructions_text_and_images_reach_the_engine_in_order(echo_server):
    response = openai_client(echo_server).responses.create(
        model=MODEL,
        instructions="Be brief.",
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "Compare"},
                    {"type": "input_image", "image_url": PNG},
                ],
            }
        ],
        max_output_tokens=1000,
        temperature=0.5,
        include=["reasoning.encrypted_content"],  # read and dropped
        service_tier="auto",
    )
    seen = account(response)
    assert seen["extra"] == {}
    assert seen["text"] == "Be brief.\nCompare\n<image_0>"
    assert (
        seen["media"][0]["shape"] == [6, 8, 3]
        and seen["media"][0]["param"] == "messages[1].content[1].image_url"
    )
    assert seen["sampling"]["max_tokens"] == 1000 and seen["sampling"]["temperature"] == 0.5
    assert (
        response.status == "completed" and response.object == "response" and response.id.startswith("resp_")
    )
    assert [item.type for item in response.output] == ["message"] and response.output[0].status == "completed"
    assert response.usage.total_tokens == response.usage.input_tokens + response.usage.output_tokens
    plain = openai_client(echo_server).responses.create(model=MODEL, input="hello", max_output_tokens=1000)
    assert account(plain)["text"] == "hello"


def test_a_stream_is_the_semantic_events_numbered_and_adds_up_to_the_whole(echo_server):
    whole = openai_client(echo_server).responses.create(model=MODEL, input="hello", max_output_tokens=1000)
    events = list(
        openai_client(echo_server).responses.create(
            model=MODEL, input="hello", max_output_tokens=1000, stream=True
        )
    )
    kinds = [event.type for event in events]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert set(kinds[4:-4]) == {"response.output_text.delta"}
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert events[0].response.status == "in_progress" and events[0].response.output == []
    text = "".join(event.delta for event in events[4:-4])
    final = events[-1].response
    assert text == events[-4].text == final.output_text == whole.output_text
    assert final.status == "completed" and final.usage.output_tokens == whole.usage.output_tokens
    assert events[-2].item.id == events[2].item.id == final.output[0].id


@pytest.mark.parametrize("chunk", [20, 1])
def test_reasoning_and_a_function_call_come_back_as_items_whole_and_streamed(parsing_server, chunk):
    ask = {
        "model": REPLAY_MODEL,
        "input": "weather in Paris?",
        "tools": [TOOL],
        "extra_body": replay("tool_call_after_reasoning", chunk),
    }
    whole = openai_client(parsing_server).responses.create(**ask)
    assert [item.type for item in whole.output] == ["reasoning", "function_call"]
    reasoning, call = whole.output
    assert reasoning.content[0].text == "\nI need the weather.\n"
    assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Paris", "days": 3})
    assert call.call_id.startswith("chatcmpl-tool-") and call.status == "completed"
    events = list(openai_client(parsing_server).responses.create(**ask, stream=True))
    kinds = [event.type for event in events]
    assert "response.reasoning_text.delta" in kinds and "response.function_call_arguments.delta" in kinds
    done = next(event for event in events if event.type == "response.function_call_arguments.done")
    assert done.arguments == call.arguments
    reasoned = "".join(event.delta for event in events if event.type == "response.reasoning_text.delta")
    assert reasoned == reasoning.content[0].text
    final = events[-1].response
    assert [item.type for item in final.output] == ["reasoning", "function_call"]
    assert without_ids(final.output)[1] | {"call_id": "*"} == without_ids(whole.output)[1] | {"call_id": "*"}


def test_a_cut_answer_is_incomplete(plain_server):
    ask = {
        "model": REPLAY_MODEL,
        "input": "count",
        "max_output_tokens": 4,
        "extra_body": replay("max_tokens", 2),
    }
    whole = openai_client(plain_server).responses.create(**ask)
    assert whole.status == "incomplete" and whole.incomplete_details.reason == "max_output_tokens"
    assert whole.output_text == "one two three four" and whole.output[0].status == "incomplete"
    events = list(openai_client(plain_server).responses.create(**ask, stream=True))
    assert events[-1].type == "response.incomplete" and events[-1].response.output_text == whole.output_text


@pytest.fixture(scope="module")
def qwen3_server(tmp_path_factory):
    folder = make_model_folder("qwen3_vl", tmp_path_factory.mktemp("m") / "Qwen3-VL-Test")
    with LiveServer(model=folder) as server:
        yield server


def test_with_a_model_the_prompt_is_the_one_vllms_chat_request_renders(qwen3_server):
    """function_call, function_call_output, reasoning and message items rendered as the chat
    request vLLM's construct_input_messages makes of them renders."""
    items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [],
            "content": [{"type": "reasoning_text", "text": "A tool knows."}],
        },
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "Sunny"},
        {
            "role": "user",
            "content": [{"type": "input_text", "text": "Look:"}, {"type": "input_image", "image_url": PNG}],
        },
    ]
    chat = [
        {"role": "system", "content": "You forecast."},
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
        {
            "role": "assistant",
            "reasoning": "A tool knows.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "Look:"}, {"type": "image_url", "image_url": {"url": PNG}}],
        },
    ]
    tools = [{"type": "function", "function": {k: TOOL[k] for k in ("name", "description", "parameters")}}]
    rendered = httpx.post(
        f"{qwen3_server.url}/v1/chat/completions/render",
        json={"model": "Qwen3-VL-Test", "messages": chat, "tools": tools, "tool_choice": "none"},
        timeout=60,
    ).json()
    # the echo engine takes no tool parser: tool_choice "none" keeps the tools in the prompt
    response = openai_client(qwen3_server).responses.create(
        model="Qwen3-VL-Test", instructions="You forecast.", input=items, tools=[TOOL], tool_choice="none"
    )
    prompt = account(response)["prompt"]
    assert prompt["tokens"] == len(rendered["token_ids"]) == response.usage.input_tokens
    assert prompt["xxh3"] == xxhash.xxh3_64_hexdigest(array.array("q", rendered["token_ids"]).tobytes())
    assert [p["modality"] for p in prompt["placeholders"]] == ["image"]


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"input": None}, 400, "input"),
        ({"model": "other"}, 404, None),
        ({"input": []}, 400, "input"),
        ({"input": [{"type": "web_search_call"}]}, 400, "input[0].type"),
        ({"input": [{"role": "robot", "content": "x"}]}, 400, "input[0].role"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
            400,
            "input[0].content[0]",
        ),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]},
            400,
            "input[0].content[0].image_url",
        ),
        (
            {
                "input": [
                    {
                        "role": "user",
                        "content": [{"type": "input_image", "image_url": "data:image/png;base64,bm90"}],
                    }
                ]
            },
            400,
            "input[0].content[0].image_url",
        ),
        ({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]}, 400, "input[0].call_id"),
        ({"max_output_tokens": 0}, 400, "max_output_tokens"),
        ({"previous_response_id": "resp_1"}, 400, "previous_response_id"),
        ({"background": True}, 400, "background"),
        ({"tools": [{"type": "web_search"}]}, 400, "tools[0].type"),
        ({"text": {"format": {"type": "json_schema", "schema": {}}}}, 400, "text.format"),
        ({"temperature": 3}, 400, "temperature"),
        ({"reasoning": {"effort": "extreme"}}, 400, "reasoning.effort"),
    ],
)
def test_bad_input_is_openais_error_naming_the_field(echo_server, body, status, param):
    sent = {"model": MODEL, "input": "hi", **body}
    response = httpx.post(f"{echo_server.url}/v1/responses", json=sent, timeout=30)
    error = assert_error(response, status, param=param)
    if param is not None:
        assert error["message"].startswith(param)
    assert httpx.get(f"{echo_server.url}/health").status_code == 200


def test_the_client_raises_openais_error_classes(echo_server):
    with pytest.raises(openai.NotFoundError):
        openai_client(echo_server).responses.create(model="other", input="x")
    with pytest.raises(openai.BadRequestError, match="previous_response_id"):
        openai_client(echo_server).responses.create(model=MODEL, input="x", previous_response_id="resp_x")
