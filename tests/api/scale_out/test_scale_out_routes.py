"""The routes of vLLM's render server that mmprep serves beside the chat render (issue 28):
/tokenize, /detokenize, /v1/completions/render, /version and /load, on a real server on
loopback with a tiny Qwen2-VL folder. What vLLM itself answers is checked in
tests/vllm_real/test_vllm_routes.py; here, what holds them together (a conversation's
/tokenize ids are its render's, /detokenize undoes /tokenize) and that bad input on every
route is a 4xx naming the field with the server healthy after it."""

from __future__ import annotations

import base64
import io

import httpx
import numpy as np
import pytest
from PIL import Image

from mmprep.core.config import Settings
from mmprep.core.version import VERSION
from tests.support.model_folder import make_model_folder
from tests.support.servers import LiveServer

MODEL = "tiny"
HELLO_ID, IM_END = 9707, 151645
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello, how are you?"}]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_model_folder("qwen2_vl", tmp_path_factory.mktemp("routes") / "model")


@pytest.fixture(scope="module")
def url(folder):
    with LiveServer(Settings(model=folder, served_model_name=[MODEL], max_model_len=512)) as live:
        yield live.url


def ids(url: str, text: str) -> list[int]:
    return post(url, "/tokenize", {"prompt": text}).json()["tokens"]


def png_url(width: int, height: int) -> str:
    buffer = io.BytesIO()
    Image.fromarray(np.zeros((height, width, 3), np.uint8)).save(buffer, "PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def post(url: str, path: str, body, **kwargs) -> httpx.Response:
    return httpx.post(url + path, json=body, timeout=60, **kwargs)


def test_tokenize_a_prompt_and_back(url):
    text = "Hello<|im_end|> wörld 🎬"
    answer = post(url, "/tokenize", {"model": MODEL, "prompt": text, "return_token_strs": True}).json()
    assert answer["count"] == len(answer["tokens"]) == len(answer["token_strs"])
    assert answer["max_model_len"] == 512
    assert "<|im_end|>" in answer["token_strs"]  # special tokens are one token
    assert post(url, "/detokenize", {"tokens": answer["tokens"]}).json() == {"prompt": text}


def test_tokenize_a_chat_gives_its_render_ids(url):
    image = {"type": "image_url", "image_url": {"url": png_url(448, 224)}}
    messages = [*CHAT[:1], {"role": "user", "content": [image, {"type": "text", "text": "What is it?"}]}]
    tokenized = post(url, "/tokenize", {"model": MODEL, "messages": messages}).json()
    rendered = post(url, "/v1/chat/completions/render", {"model": MODEL, "messages": messages}).json()
    assert tokenized["tokens"] == rendered["token_ids"]
    assert tokenized["count"] > 100 and tokenized["token_strs"] is None  # the image's pads, expanded


def test_tokenize_chat_options_reach_the_template(url):
    with_prompt = post(url, "/tokenize", {"messages": CHAT}).json()["tokens"]
    without = post(url, "/tokenize", {"messages": CHAT, "add_generation_prompt": False}).json()["tokens"]
    assert with_prompt[: len(without)] == without and len(with_prompt) > len(without)


def test_completion_render_one_request_per_prompt(url):
    ids = post(url, "/tokenize", {"prompt": "Two three"}).json()["tokens"]
    answer = post(
        url,
        "/v1/completions/render",
        {"model": MODEL, "prompt": ["One", "Two three"], "max_tokens": 3, "stream": True},
        headers={"X-Request-Id": "abc"},
    ).json()
    assert [request["request_id"] for request in answer] == ["cmpl-abc-0", "cmpl-abc-1"]
    assert answer[1]["token_ids"] == ids
    body = {"model": MODEL, "prompt": [ids, [5]], "max_tokens": 3, "stream": True}
    as_ids = post(url, "/v1/completions/render", body).json()
    assert [request["token_ids"] for request in as_ids] == [ids, [5]]
    answer += as_ids
    assert all(request["sampling_params"]["max_tokens"] == 3 and request["stream"] for request in answer)
    assert all(request["features"] is None and request["model"] == MODEL for request in answer)


def test_completion_render_max_tokens_defaults_to_16_within_the_context(url):
    [request] = post(url, "/v1/completions/render", {"prompt": "Hi"}).json()
    assert request["sampling_params"]["max_tokens"] == 16 and request["request_id"].startswith("cmpl-")
    long = list(range(100, 600))  # 500 of the 512 tokens: 12 left
    [request] = post(url, "/v1/completions/render", {"prompt": long}).json()
    assert request["sampling_params"]["max_tokens"] == 12


def test_version_and_load(url):
    assert httpx.get(f"{url}/version").json() == {"version": VERSION}
    assert httpx.get(f"{url}/load").json() == {"server_load": 0}


BAD = [
    ("/tokenize", {"prompt": 3}, 400, "prompt"),
    ("/tokenize", {}, 400, "prompt"),
    ("/tokenize", {"prompt": "a", "add_special_tokens": "maybe"}, 400, "add_special_tokens"),
    ("/tokenize", {"prompt": "a", "model": "other"}, 404, "model"),
    ("/tokenize", {"messages": "hi"}, 400, "messages"),
    ("/tokenize", {"messages": [{"role": "robot", "content": "x"}]}, 400, "messages[0].role"),
    ("/tokenize", {"messages": CHAT, "continue_final_message": True}, 400, "continue_final_message"),
    ("/tokenize", {"messages": CHAT, "chat_template": "{{ 1 }}"}, 400, "chat_template"),
    ("/tokenize", [1, 2], 400, None),
    ("/detokenize", {"tokens": [1, -1]}, 400, "tokens[1]"),
    ("/detokenize", {"tokens": [10**9]}, 400, "tokens[0]"),
    ("/detokenize", {"tokens": "12"}, 400, "tokens"),
    ("/detokenize", {"tokens": [1], "model": "other"}, 404, "model"),
    ("/v1/completions/render", {}, 400, "prompt"),
    ("/v1/completions/render", {"prompt": []}, 400, "prompt"),
    ("/v1/completions/render", {"prompt": True}, 400, "prompt"),
    ("/v1/completions/render", {"prompt": [[1], "a"]}, 400, "prompt"),  # one form for all, as vLLM
    ("/v1/completions/render", {"prompt": [[1], [2.5]]}, 400, "prompt"),
    ("/v1/completions/render", {"prompt": ["a", ""]}, 400, "prompt[1]"),
    ("/v1/completions/render", {"prompt": [1, 10**9]}, 400, "prompt[1]"),
    ("/v1/completions/render", {"prompt": "a", "max_tokens": 0}, 400, "max_tokens"),
    ("/v1/completions/render", {"prompt": "a", "max_tokens": 513}, 400, "max_tokens"),
    ("/v1/completions/render", {"prompt": list(range(600))}, 400, "prompt"),
    ("/v1/completions/render", {"prompt": "a", "logprobs": 21}, 400, "logprobs"),
    ("/v1/completions/render", {"prompt": "a", "suffix": "b"}, 400, "suffix"),
    ("/v1/completions/render", {"prompt": "a", "use_beam_search": True}, 400, "use_beam_search"),
    ("/v1/completions/render", {"prompt": "a", "n": 2}, 400, "n"),
    ("/v1/completions/render", {"prompt": "a", "model": "other"}, 404, "model"),
    ("/v1/completions/render", {"prompt": "a", "cache_salt": ""}, 400, "cache_salt"),
    ("/v1/chat/completions/derender", {}, 400, "generate_response"),
    (
        "/v1/chat/completions/derender",
        {"generate_response": {"choices": [{}]}},
        400,
        "generate_response.choices.token_ids",
    ),
    (
        "/v1/chat/completions/derender",
        {"generate_response": {"choices": [{"token_ids": [1, -1]}]}},
        400,
        "generate_response.choices[0].token_ids[1]",
    ),
    (
        "/v1/chat/completions/derender",
        {"generate_response": {"choices": [{"token_ids": [10**9]}]}},
        400,
        "generate_response.choices[0].token_ids[0]",
    ),
    (
        "/v1/chat/completions/derender",
        {"generate_response": {"choices": [{"token_ids": [1]}]}, "stream": True},
        400,
        "stream",
    ),
    (
        "/v1/chat/completions/derender",
        {"generate_response": {"choices": [{"token_ids": [1]}]}, "model": "other"},
        404,
        "model",
    ),
    (
        "/v1/chat/completions/derender",
        {"generate_response": {"choices": [{"token_ids": [1]}]}, "chat_request": {"messages": "x"}},
        400,
        "chat_request.messages",
    ),
    (
        "/v1/chat/completions/derender",
        {"stream": True, "generate_chunk": {"choices": [{}, {}]}},
        400,
        "generate_chunk.choices",
    ),
    (
        "/v1/chat/completions/derender",
        {
            "stream": True,
            "generate_chunk": {"choices": []},
            "stream_state": {"output_token_ids": [1], "output_chunk_lens": [2]},
        },
        400,
        "stream_state",
    ),
    (
        "/v1/chat/completions/derender",
        {
            "stream": True,
            "generate_chunk": {"choices": [{"token_ids": [1]}]},
            "chat_request": {"messages": [{"role": "user", "content": "x"}], "stop": ["a"]},
        },
        400,
        "chat_request.stop",
    ),
    ("/v1/completions/derender", {"generate_responses": []}, 400, "generate_responses"),
    (
        "/v1/completions/derender",
        {"generate_responses": [{"choices": [{"token_ids": [1]}]}], "prompt_tokens": [1, 2]},
        400,
        None,
    ),
    (
        "/v1/completions/derender",
        {"generate_responses": [{"choices": [{"token_ids": [1]}]}], "stream": True},
        400,
        "stream",
    ),
    (
        "/v1/completions/derender",
        {"generate_responses": [{"choices": [{"token_ids": [1]}]}], "model": "other"},
        404,
        "model",
    ),
    ("/v1/completions/derender", {"generate_responses": "x"}, 400, "generate_responses"),
    ("/v1/messages/render", {"model": MODEL, "messages": []}, 400, "max_tokens"),
    ("/v1/messages/render", {"model": MODEL, "max_tokens": 5, "messages": "hi"}, 400, "messages"),
    (
        "/v1/messages/render",
        {"model": MODEL, "max_tokens": 5, "messages": [{"role": "tool", "content": "x"}]},
        400,
        "messages[0].role",
    ),
    (
        "/v1/messages/render",
        {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "video"}]}]},
        400,
        "messages[0].content[0].type",
    ),
    (
        "/v1/messages/render",
        {
            "model": MODEL,
            "max_tokens": 5,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
                        }
                    ],
                }
            ],
        },
        400,
        "messages[0].content[0].image_url",
    ),
    (
        "/v1/messages/render",
        {
            "model": MODEL,
            "max_tokens": 5,
            "messages": [{"role": "user", "content": "x"}],
            "output_config": {},
        },
        400,
        "output_config",
    ),
    (
        "/v1/messages/render",
        {"model": "other", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]},
        404,
        "model",
    ),
    ("/v1/chat/completions/render", {"model": MODEL, "messages": CHAT, "tools": TOOLS}, 400, "tool_choice"),
]


@pytest.mark.parametrize(
    ("path", "body", "status", "param"), BAD, ids=[f"{p}-{b}"[:60] for p, b, _, _ in BAD]
)
def test_bad_input_is_a_4xx_naming_the_field(url, path, body, status, param):
    response = post(url, path, body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["param"] == param and error["message"]
    assert httpx.get(f"{url}/health").status_code == 200


def test_a_body_that_is_not_json_is_a_400(url):
    paths = (
        "/tokenize",
        "/detokenize",
        "/v1/completions/render",
        "/v1/completions/derender",
        "/v1/messages/render",
    )
    for path in paths:
        response = httpx.post(url + path, content=b"{", headers={"content-type": "application/json"})
        assert response.status_code == 400, response.text


def test_without_a_model_folder_the_routes_say_so():
    with LiveServer(Settings()) as live:
        for path in ("/tokenize", "/detokenize", "/v1/completions/render", "/v1/chat/completions/derender"):
            response = post(live.url, path, {"prompt": "a", "tokens": [1]})
            assert response.status_code == 404
            assert "--model" in response.json()["error"]["message"]
        assert httpx.get(f"{live.url}/version").status_code == 200


def test_a_chat_with_an_image_counts_its_tokens(url):
    """Twice the pixels, twice the image's tokens (Qwen2-VL: one per 28 x 28 block)."""
    counts = []
    for width in (224, 448):
        part = {"type": "image_url", "image_url": {"url": png_url(width, 224)}}
        counts.append(
            post(url, "/tokenize", {"messages": [{"role": "user", "content": [part]}]}).json()["count"]
        )
    assert counts[1] - counts[0] == (448 - 224) * 224 // (28 * 28)


ANSWER = (
    '<think>Cold?</think>\nLet me look.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}'
    "\n</tool_call>"
)


@pytest.fixture(scope="module")
def parsing_url(folder):
    settings = Settings(
        model=folder,
        served_model_name=[MODEL],
        reasoning_parser="qwen3",
        enable_auto_tool_choice=True,
        tool_call_parser="hermes",
    )
    with LiveServer(settings) as live:
        yield live.url


def test_derender_parses_reasoning_and_tool_calls(parsing_url):
    url = parsing_url
    chat_request = {"model": MODEL, "messages": CHAT, "tools": TOOLS}
    prompt = post(url, "/tokenize", {"messages": CHAT, "tools": TOOLS}).json()["tokens"]
    output = [*ids(url, ANSWER), IM_END]
    body = {
        "generate_response": {"request_id": "chatcmpl-x", "choices": [{"index": 0, "token_ids": output}]},
        "prompt_token_ids": prompt,
        "prompt_tokens": len(prompt),
        "chat_request": chat_request,
    }
    answer = post(url, "/v1/chat/completions/derender", body).json()
    [choice] = answer["choices"]
    assert choice["message"]["reasoning"] == "Cold?" and choice["message"]["content"] == "\nLet me look."
    [call] = choice["message"]["tool_calls"]
    assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Oslo"}'}
    assert choice["finish_reason"] == "tool_calls" and answer["id"] == "chatcmpl-x"
    assert answer["usage"] == {
        "prompt_tokens": len(prompt),
        "completion_tokens": len(output),
        "total_tokens": len(prompt) + len(output),
    }
    # streamed a token at a time, the state carried by the client: the same answer
    state, content, reasoning, arguments, finish, call_ids = None, "", "", "", None, set()
    for at, token_id in enumerate(output):
        last = at == len(output) - 1
        chunk_body = {
            "stream": True,
            "generate_chunk": {
                "request_id": "chatcmpl-x",
                "choices": [{"index": 0, "token_ids": [token_id], "finish_reason": "stop" if last else None}],
            },
            "prompt_token_ids": prompt,
            "chat_request": chat_request,
            "stream_state": state,
        }
        reply = post(url, "/v1/chat/completions/derender", chunk_body).json()
        state = reply["stream_state"]
        [streamed] = reply["chunk"]["choices"]
        content += streamed["delta"].get("content") or ""
        reasoning += streamed["delta"].get("reasoning") or ""
        for delta in streamed["delta"].get("tool_calls") or []:
            arguments += delta["function"].get("arguments", "")
            call_ids |= {delta["id"]} if "id" in delta else set()
        finish = streamed["finish_reason"] or finish
    assert (content, reasoning, arguments, finish) == (
        "\nLet me look.",
        "Cold?",
        '{"city": "Oslo"}',
        "tool_calls",
    )
    assert len(call_ids) == 1


def test_derender_needs_the_chat_request_with_parsers(parsing_url):
    body = {"generate_response": {"choices": [{"token_ids": [HELLO_ID]}]}}
    response = post(parsing_url, "/v1/chat/completions/derender", body)
    assert response.status_code == 400 and response.json()["error"]["param"] == "chat_request"


def test_completion_derender_applies_the_request_stop_strings(url):
    output = ids(url, "Once upon a time there was")
    body = {
        "generate_responses": [{"request_id": "cmpl-1", "choices": [{"token_ids": output}]}],
        "prompt_tokens": [2],
        "completion_request": {"prompt": "x", "stop": [" time"]},
    }
    answer = post(url, "/v1/completions/derender", body).json()
    assert answer["choices"][0]["text"] == "Once upon a" and answer["choices"][0]["stop_reason"] == " time"
    assert answer["object"] == "text_completion" and answer["usage"]["completion_tokens"] == len(output)


def test_logprobs_from_the_echo_engine_are_a_400_with_a_model_or_without(url):
    body = {"model": MODEL, "messages": CHAT, "logprobs": True}
    with LiveServer(Settings(served_model_name=[MODEL])) as bare:
        for server in (url, bare.url):
            response = post(server, "/v1/chat/completions", body)
            assert response.status_code == 400 and response.json()["error"]["param"] == "logprobs"


def test_messages_render_is_the_chat_render_of_the_converted_chat(url):
    """An Anthropic conversation with a tool call and its result renders as the chat vLLM
    converts it to (tool_choice "none": this server parses no calls)."""
    anthropic = {
        "model": MODEL,
        "max_tokens": 9,
        "system": "Be brief.",
        "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "none"},
        "messages": [
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "get_weather", "input": {}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "Sunny"}]},
        ],
    }
    chat = {
        "model": MODEL,
        "max_tokens": 9,
        "tools": TOOLS,
        "tool_choice": "none",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "t1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "t1", "content": "Sunny"},
        ],
    }
    ours = post(url, "/v1/messages/render", anthropic).json()
    theirs = post(url, "/v1/chat/completions/render", chat).json()
    assert ours["token_ids"] == theirs["token_ids"] and ours["sampling_params"]["max_tokens"] == 9
