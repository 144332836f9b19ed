"""The differential test of vLLM's render-server routes (issue 28, point 3): the same requests
to `vllm launch render` (0.33) and to `mmprep serve --model`, and what of each answer must
agree, route by route.

Shared by scripts/record_vllm_routes.py (which records vLLM's answers into
tests/data/vllm_real/routes.json), tests/vllm_real/test_vllm_routes.py (mmprep against that
file, no vLLM needed) and tests/vllm_real/test_real_vllm_routes.py (both live).

Each case is (method, path, body, headers). `comparable` reduces an answer to what must be
equal; what it leaves out is a difference kept on purpose (docs/deployment.md lists them):
the error body's `type` and `code` (mmprep's one error shape: a string code), the random
part of an id nobody named, the fields of /v1/models and /health beyond the model ids,
/version's value, and the sampling params mmprep writes for its own derender (detokenize
false, no stop strings: app/mmprep/vllm/sampling.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from mmprep.vllm.sampling import VLLM_DEFAULTS
from tests.support.model_folder import make_model_folder
from tests.vllm_real.real_vllm import COMMON_ARGS, MEDIA_CASES

FAMILY = "qwen2_vl"
MAX_MODEL_LEN = 4096  # COMMON_ARGS's --max-model-len
ROUTES_ARGS = COMMON_ARGS
QUESTION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hello there, how are you?"},
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]
RESPONSES_TOOL: dict[str, Any] = {"type": "function", **TOOLS[0]["function"]}  # type: ignore[dict-item]
IMAGE = {"type": "image_url", "image_url": {"url": MEDIA_CASES["png"][1]}}
IMAGE_BASE64 = MEDIA_CASES["png"][1].split(",", 1)[1]
# Ids of Qwen's tokenizer: "Hello", " world", "<|im_end|>", "<|im_start|>".
HELLO, WORLD, IM_END, IM_START = 9707, 1879, 151645, 151644
OUT_OF_VOCAB = 10_000_000


def cases(model: str) -> dict[str, tuple[str, str, dict | None, dict]]:
    """name -> (method, path, JSON body or None, headers). `model`: the name both serve."""
    post = "POST"
    chat = {"model": model, "messages": QUESTION}
    out: dict[str, tuple[str, str, dict | None, dict]] = {
        # /tokenize, the prompt form
        "tokenize-prompt": (post, "/tokenize", {"model": model, "prompt": "Hello, world! Ünïcödé 🎬"}, {}),
        "tokenize-prompt-no-model": (post, "/tokenize", {"prompt": "Hello world"}, {}),
        "tokenize-prompt-strs": (
            post,
            "/tokenize",
            {"prompt": "Hello<|im_end|> world  \n\tok", "return_token_strs": True},
            {},
        ),
        "tokenize-prompt-no-special": (post, "/tokenize", {"prompt": "Hi", "add_special_tokens": False}, {}),
        "tokenize-prompt-empty": (post, "/tokenize", {"prompt": ""}, {}),
        # /tokenize, the chat form
        "tokenize-chat": (post, "/tokenize", chat, {}),
        "tokenize-chat-strs": (post, "/tokenize", {**chat, "return_token_strs": True}, {}),
        "tokenize-chat-no-generation-prompt": (
            post,
            "/tokenize",
            {**chat, "add_generation_prompt": False},
            {},
        ),
        "tokenize-chat-continue": (
            post,
            "/tokenize",
            {
                "messages": [*QUESTION, {"role": "assistant", "content": "I am"}],
                "add_generation_prompt": False,
                "continue_final_message": True,
            },
            {},
        ),
        "tokenize-chat-special-tokens": (post, "/tokenize", {**chat, "add_special_tokens": True}, {}),
        "tokenize-chat-tools": (post, "/tokenize", {**chat, "tools": TOOLS}, {}),
        "tokenize-chat-empty-tools": (post, "/tokenize", {**chat, "tools": []}, {}),
        "tokenize-chat-image": (
            post,
            "/tokenize",
            {"messages": [{"role": "user", "content": [IMAGE, {"type": "text", "text": "What is it?"}]}]},
            {},
        ),
        # /tokenize refused
        "tokenize-unknown-model": (post, "/tokenize", {"model": "no-such-model", "prompt": "a"}, {}),
        "tokenize-no-prompt": (post, "/tokenize", {"model": model}, {}),
        "tokenize-prompt-number": (post, "/tokenize", {"prompt": 3}, {}),
        "tokenize-messages-string": (post, "/tokenize", {"messages": "Hello"}, {}),
        "tokenize-both-prompts": (
            post,
            "/tokenize",
            {**chat, "add_generation_prompt": True, "continue_final_message": True},
            {},
        ),
        "tokenize-untrusted-template": (post, "/tokenize", {**chat, "chat_template": "{{ 'x' }}"}, {}),
        "tokenize-not-object": (post, "/tokenize", None, {}),
        # /detokenize
        "detokenize": (post, "/detokenize", {"model": model, "tokens": [HELLO, WORLD]}, {}),
        "detokenize-special": (post, "/detokenize", {"tokens": [IM_START, HELLO, IM_END, WORLD]}, {}),
        "detokenize-empty": (post, "/detokenize", {"tokens": []}, {}),
        "detokenize-negative": (post, "/detokenize", {"tokens": [HELLO, -1]}, {}),
        "detokenize-out-of-vocab": (post, "/detokenize", {"tokens": [HELLO, OUT_OF_VOCAB]}, {}),
        "detokenize-string": (post, "/detokenize", {"tokens": "Hello"}, {}),
        "detokenize-no-tokens": (post, "/detokenize", {}, {}),
        "detokenize-unknown-model": (post, "/detokenize", {"model": "no-such-model", "tokens": [HELLO]}, {}),
        # /v1/completions/render
        "completion-text": (
            post,
            "/v1/completions/render",
            {"model": model, "prompt": "Once upon a time", "max_tokens": 5, "temperature": 0},
            {"X-Request-Id": "text-1"},
        ),
        "completion-default-max-tokens": (
            post,
            "/v1/completions/render",
            {"model": model, "prompt": "Hi"},
            {},
        ),
        "completion-list": (
            post,
            "/v1/completions/render",
            {"model": model, "prompt": ["One", "Two three"]},
            {},
        ),
        "completion-ids": (post, "/v1/completions/render", {"model": model, "prompt": [HELLO, WORLD]}, {}),
        "completion-id-lists": (
            post,
            "/v1/completions/render",
            {"model": model, "prompt": [[HELLO], [WORLD, IM_END]]},
            {"X-Request-Id": "lists"},
        ),
        "completion-stream": (
            post,
            "/v1/completions/render",
            {"model": model, "prompt": "Hi", "stream": True, "stream_options": {"include_usage": True}},
            {},
        ),
        "completion-body-request-id": (
            post,
            "/v1/completions/render",
            {"model": model, "prompt": "Hi", "request_id": "from-body"},
            {},
        ),
        "completion-sampling": (
            post,
            "/v1/completions/render",
            {
                "model": model,
                "prompt": "Hi",
                "max_tokens": 7,
                "temperature": 0.5,
                "top_p": 0.9,
                "top_k": 5,
                "seed": 3,
                "logprobs": 2,
                "min_tokens": 1,
                "stop_token_ids": [IM_END],
            },
            {},
        ),
        "completion-no-special": (
            post,
            "/v1/completions/render",
            {"model": model, "prompt": "Hi", "add_special_tokens": False},
            {},
        ),
        # /v1/completions/render refused
        "completion-no-prompt": (post, "/v1/completions/render", {"model": model}, {}),
        "completion-empty-list": (post, "/v1/completions/render", {"model": model, "prompt": []}, {}),
        "completion-empty-string": (post, "/v1/completions/render", {"model": model, "prompt": ""}, {}),
        "completion-mixed": (post, "/v1/completions/render", {"model": model, "prompt": [[HELLO], "a"]}, {}),
        "completion-bool": (post, "/v1/completions/render", {"model": model, "prompt": True}, {}),
        "completion-negative-id": (
            post,
            "/v1/completions/render",
            {"model": model, "prompt": [HELLO, -1]},
            {},
        ),
        "completion-out-of-vocab": (
            post,
            "/v1/completions/render",
            {"model": model, "prompt": [HELLO, OUT_OF_VOCAB]},
            {},
        ),
        "completion-suffix": (
            post,
            "/v1/completions/render",
            {"model": model, "prompt": "a", "suffix": "b"},
            {},
        ),
        "completion-beam-search": (
            post,
            "/v1/completions/render",
            {"model": model, "prompt": "a", "use_beam_search": True},
            {},
        ),
        "completion-unknown-model": (
            post,
            "/v1/completions/render",
            {"model": "no-such-model", "prompt": "a"},
            {},
        ),
        "completion-max-tokens-too-many": (
            post,
            "/v1/completions/render",
            {"model": model, "prompt": "a", "max_tokens": 5000},
            {},
        ),
        "completion-max-tokens-string": (
            post,
            "/v1/completions/render",
            {"model": model, "prompt": "a", "max_tokens": "many"},
            {},
        ),
        # /v1/messages/render (Anthropic's Messages API)
        "messages-render": (
            post,
            "/v1/messages/render",
            {"model": model, "max_tokens": 20, "messages": [{"role": "user", "content": "Hello there"}]},
            {"X-Request-Id": "m1"},
        ),
        "messages-render-system-blocks": (
            post,
            "/v1/messages/render",
            {
                "model": model,
                "max_tokens": 20,
                "system": [{"type": "text", "text": "Be brief. "}, {"type": "text", "text": "Be kind."}],
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "thinking", "thinking": "Greet."},
                            {"type": "text", "text": "Hello!"},
                        ],
                    },
                    {"role": "user", "content": "How are you?"},
                ],
                "temperature": 0.3,
                "top_k": 4,
                "stop_sequences": ["END"],
            },
            {},
        ),
        "messages-render-image": (
            post,
            "/v1/messages/render",
            {
                "model": model,
                "max_tokens": 20,
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "image",
                                "source": {"type": "base64", "media_type": "image/png", "data": IMAGE_BASE64},
                            },
                            {"type": "text", "text": "What is it?"},
                        ],
                    }
                ],
            },
            {},
        ),
        "messages-render-tools": (
            post,
            "/v1/messages/render",
            {
                "model": model,
                "max_tokens": 50,
                "tools": [
                    {
                        "name": "get_weather",
                        "description": "The weather in a city",
                        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
                    }
                ],
                "messages": [
                    {"role": "user", "content": "Weather in Paris?"},
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "text", "text": "Let me look."},
                            {
                                "type": "tool_use",
                                "id": "toolu_1",
                                "name": "get_weather",
                                "input": {"city": "Paris"},
                            },
                        ],
                    },
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny, 21 C"}
                        ],
                    },
                ],
            },
            {},
        ),
        "messages-render-tool-choice": (
            post,
            "/v1/messages/render",
            {
                "model": model,
                "max_tokens": 20,
                "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
                "tool_choice": {"type": "none"},
                "thinking": {"type": "disabled"},
                "messages": [{"role": "user", "content": "Hi"}],
            },
            {},
        ),
        "messages-render-no-max-tokens": (
            post,
            "/v1/messages/render",
            {"model": model, "messages": [{"role": "user", "content": "Hi"}]},
            {},
        ),
        "messages-render-bad-role": (
            post,
            "/v1/messages/render",
            {"model": model, "max_tokens": 5, "messages": [{"role": "robot", "content": "Hi"}]},
            {},
        ),
        "messages-render-unknown-model": (
            post,
            "/v1/messages/render",
            {"model": "nope", "max_tokens": 5, "messages": [{"role": "user", "content": "Hi"}]},
            {},
        ),
        # /v1/responses/render (OpenAI's Responses API)
        "responses-render": (
            post,
            "/v1/responses/render",
            {"model": model, "input": "Hello there", "max_output_tokens": 20, "temperature": 0.5},
            {"X-Request-Id": "r1"},  # not the render's id: vLLM takes the body's request_id alone
        ),
        "responses-render-items": (
            post,
            "/v1/responses/render",
            {
                "model": model,
                "request_id": "resp_given",
                "instructions": "Be brief.",
                "input": [
                    {"role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
                    {"role": "assistant", "content": "Hello!"},
                    {"role": "user", "content": "How are you?"},
                ],
                "top_p": 0.9,
                "top_k": 4,
            },
            {},
        ),
        "responses-render-image": (
            post,
            "/v1/responses/render",
            {
                "model": model,
                "max_output_tokens": 20,
                "input": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "input_image", "image_url": MEDIA_CASES["png"][1]},
                            {"type": "input_text", "text": "What is it?"},
                        ],
                    }
                ],
            },
            {},
        ),
        "responses-render-tools": (
            post,
            "/v1/responses/render",
            {
                "model": model,
                "max_output_tokens": 50,
                "tools": [RESPONSES_TOOL],
                "input": [
                    {"role": "user", "content": "Weather in Paris?"},
                    {
                        "type": "function_call",
                        "call_id": "call_1",
                        "name": "get_weather",
                        "arguments": '{"city": "Paris"}',
                    },
                    {"type": "function_call_output", "call_id": "call_1", "output": "Sunny, 21 C"},
                ],
            },
            {},
        ),
        "responses-render-tool-choice-none": (
            post,
            "/v1/responses/render",
            {
                "model": model,
                "tools": [RESPONSES_TOOL],
                "tool_choice": "none",
                "input": "Hi",
            },
            {},
        ),
        "responses-render-stream": (
            post,
            "/v1/responses/render",
            {"model": model, "input": "Hi", "stream": True, "max_output_tokens": 8},
            {},
        ),
        "responses-render-previous-response": (
            post,
            "/v1/responses/render",
            {"model": model, "input": "Hi", "previous_response_id": "resp_0123"},
            {},
        ),
        "responses-render-no-input": (post, "/v1/responses/render", {"model": model}, {}),
        "responses-render-unknown-model": (
            post,
            "/v1/responses/render",
            {"model": "nope", "input": "Hi"},
            {},
        ),
        # the chat render, text only (tests/vllm_real/test_vllm_goldens.py has the media)
        "chat-render": (
            post,
            "/v1/chat/completions/render",
            {**chat, "max_tokens": 4},
            {"X-Request-Id": "c1"},
        ),
        "chat-render-tools-without-parser": (
            post,
            "/v1/chat/completions/render",
            {**chat, "tools": TOOLS},
            {},
        ),
        "chat-render-tools-none": (
            post,
            "/v1/chat/completions/render",
            {**chat, "tools": TOOLS, "tool_choice": "none"},
            {},
        ),
        # the routes without a body
        "models": ("GET", "/v1/models", None, {}),
        "health": ("GET", "/health", None, {}),
        "load": ("GET", "/load", None, {}),
        "version": ("GET", "/version", None, {}),
    }
    return out


# The derender routes, on a server with parsers (a second one: vLLM's are set when it starts).
PARSER_ARGS = ["--reasoning-parser", "qwen3", "--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
PARSER_SETTINGS: dict[str, Any] = {
    "reasoning_parser": "qwen3",
    "enable_auto_tool_choice": True,
    "tool_call_parser": "hermes",
}
MALFORMED_CALL = (
    'Sure:\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": }}\n</tool_call>'
)
# What a generate answer may carry beside its choices (vLLM's GenerateResponseBase): its
# derender passes metrics, prompt_logprobs and kv_transfer_params on, not ec_transfer_params.
GENERATED: dict[str, Any] = {
    "metrics": {"time_to_first_token_ms": 12.5, "generation_time_ms": 40.0, "mean_itl_ms": 3.25},
    "prompt_logprobs": [None, {str(HELLO): {"logprob": -1.5, "rank": 1, "decoded_token": "Hello"}}],
    "kv_transfer_params": {"remote_engine_id": "e1", "remote_block_ids": [1, 2]},
    "ec_transfer_params": {"remote_engine_id": "ec1"},
}
STREAMED: dict[str, Any] = {  # a generate stream's chunk: its derender passes the metrics on
    "metrics": {"time_to_first_token_ms": 8.0, "tokens_per_second": 99.5},
    "kv_transfer_params": {"remote_engine_id": "e1"},
}
ANSWERS = {
    "plain": "Hello there! I am fine.",
    "reasoning": "<think>\nThe user greets me.\n</think>\n\nHello! I am well.",
    "tool-call": "<think>I need the weather.</think>\n<tool_call>\n"
    '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
}


def derender_cases(model: str, encode) -> dict[str, tuple[str, str, Any, dict]]:
    """name -> (method, path, body or a list of stream chunk bodies, headers) for the
    derender routes. `encode`: text -> token ids (the folder's tokenizer)."""
    post = "POST"
    prompt = encode("<|im_start|>user\nHello there, how are you?<|im_end|>\n<|im_start|>assistant\n")
    chat_request = {"model": model, "messages": QUESTION, "max_tokens": 100}
    tools_request = {**chat_request, "tools": TOOLS}

    def answer(text: str, finish: str = "stop", eos: bool = True) -> list[int]:
        return encode(text) + ([IM_END] if eos and finish == "stop" else [])

    def choice_of(text: str) -> dict:
        return {"index": 0, "finish_reason": "stop", "stop_reason": None, "token_ids": answer(text)}

    def whole(ids: list[int], request: dict | None, finish: str = "stop", **more) -> dict:
        choice = {"index": 0, "finish_reason": finish, "stop_reason": None, "token_ids": ids}
        return {
            "model": model,
            "generate_response": {"request_id": "chatcmpl-d1", "choices": [choice]},
            "prompt_tokens": len(prompt),
            "prompt_token_ids": prompt,
            "chat_request": request,
            **more,
        }

    def stream(
        ids: list[int], request: dict | None, size: int = 3, finish: str = "stop", **more
    ) -> list[dict]:
        pieces = [ids[start : start + size] for start in range(0, len(ids), size)]
        chunks = []
        for number, piece in enumerate(pieces):
            last = number == len(pieces) - 1
            choice = {"index": 0, "token_ids": piece, "finish_reason": finish if last else None}
            chunks.append(
                {
                    "stream": True,
                    "model": model,
                    "generate_chunk": {"request_id": "chatcmpl-s1", "choices": [choice]},
                    "prompt_tokens": len(prompt),
                    "prompt_token_ids": prompt,
                    "chat_request": request,
                    **more,
                }
            )
        return chunks

    chat, completion = "/v1/chat/completions/derender", "/v1/completions/derender"
    plain = cases(model)
    out: dict[str, tuple[str, str, Any, dict]] = {
        # renders with tools, which need the parsers
        "parsed-messages-render-tools": plain["messages-render-tools"],
        "parsed-chat-render-tools": plain["chat-render-tools-without-parser"],
    }
    for name, text in ANSWERS.items():
        request = tools_request if name == "tool-call" else chat_request
        out[f"derender-chat-{name}"] = (post, chat, whole(answer(text), request), {})
        out[f"derender-chat-stream-{name}"] = (post, chat, stream(answer(text), request), {})
    cut = answer(ANSWERS["reasoning"], eos=False)[:9]
    # tool calls vLLM's hermes reads as no call: malformed JSON, and a call cut by max_tokens
    malformed, cut_call = answer(MALFORMED_CALL), answer(ANSWERS["tool-call"], eos=False)[:-8]
    out |= {
        "derender-chat-tool-call-malformed": (post, chat, whole(malformed, tools_request), {}),
        "derender-chat-stream-tool-call-malformed": (post, chat, stream(malformed, tools_request), {}),
        "derender-chat-tool-call-cut": (post, chat, whole(cut_call, tools_request, "length"), {}),
        "derender-chat-stream-tool-call-cut": (
            post,
            chat,
            stream(cut_call, tools_request, finish="length"),
            {},
        ),
        # what the generate answer carries beside its ids, as vLLM's derender passes it on
        "derender-chat-generate-fields": (
            post,
            chat,
            whole(
                answer("Hi."),
                {**chat_request, "return_token_ids": True},
                generate_response=GENERATED
                | {"request_id": "chatcmpl-g1", "prompt_token_ids": prompt, "choices": [choice_of("Hi.")]},
            ),
            {},
        ),
        "derender-chat-stream-generate-fields": (
            post,
            chat,
            [
                {
                    **chunk,
                    "generate_chunk": {**chunk["generate_chunk"], **STREAMED, "prompt_token_ids": prompt},
                }
                for chunk in stream(answer("Hi there."), {**chat_request, "return_token_ids": True})
            ],
            {},
        ),
        "derender-chat-length": (post, chat, whole(cut, chat_request, "length"), {}),
        "derender-chat-stop-string": (
            post,
            chat,
            whole(answer(ANSWERS["reasoning"]), {**chat_request, "stop": ["well"]}),
            {},
        ),
        "derender-chat-no-model": (post, chat, {**whole(answer("Hi."), chat_request), "model": None}, {}),
        # refused
        "derender-chat-no-chat-request": (post, chat, whole(answer("Hi."), None), {}),
        "derender-chat-empty-token-ids": (post, chat, whole([], chat_request), {}),
        "derender-chat-unknown-model": (
            post,
            chat,
            {**whole(answer("Hi."), chat_request), "model": "nope"},
            {},
        ),
        "derender-chat-stream-on-batch-form": (
            post,
            chat,
            {**whole(answer("Hi."), chat_request), "stream": True},
            {},
        ),
        "derender-chat-no-response": (post, chat, {"model": model, "chat_request": chat_request}, {}),
        "derender-chat-negative-id": (post, chat, whole([HELLO, -5], chat_request), {}),
        "derender-chat-stream-stop-strings": (
            post,
            chat,
            stream(answer("Hi."), {**chat_request, "stop": ["x"]}),
            {},
        ),
        "derender-chat-stream-no-prompt-ids": (
            post,
            chat,
            [{**chunk, "prompt_token_ids": None} for chunk in stream(answer("Hi."), chat_request)],
            {},
        ),
        "derender-chat-stream-bad-state": (
            post,
            chat,
            [
                {
                    **stream(answer("Hi."), chat_request)[0],
                    "stream_state": {"output_token_ids": [1], "output_chunk_lens": [2]},
                }
            ],
            {},
        ),
    }
    # /v1/completions/derender
    texts = [answer("Once upon a time there was"), answer("a cat.", "length")]
    responses = [
        {"request_id": "cmpl-c1", "choices": [{"index": 0, "finish_reason": finish, "token_ids": ids}]}
        for ids, finish in zip(texts, ("stop", "length"), strict=True)
    ]
    completion_request = {"model": model, "prompt": ["a", "b"], "max_tokens": 16}
    completion_body = {"model": model, "generate_responses": responses, "prompt_tokens": [1, 1]}
    chunk_choices = [
        {"index": 0, "token_ids": texts[0][:3]},
        {"index": 0, "token_ids": texts[0][3:], "finish_reason": "stop"},
    ]
    out |= {
        "derender-completion": (
            post,
            completion,
            {**completion_body, "completion_request": completion_request},
            {},
        ),
        # one generate answer's metrics and KV params are the completion's; of two, theirs
        # only where they agree, and no metrics
        "derender-completion-generate-fields": (
            post,
            completion,
            {**completion_body, "generate_responses": [GENERATED | responses[0]], "prompt_tokens": [1]},
            {},
        ),
        "derender-completion-generate-fields-differ": (
            post,
            completion,
            {
                **completion_body,
                "generate_responses": [
                    GENERATED | responses[0],
                    GENERATED | responses[1] | {"kv_transfer_params": {"remote_engine_id": "e2"}},
                ],
            },
            {},
        ),
        "derender-completion-stream-generate-fields": (
            post,
            completion,
            [
                {
                    "stream": True,
                    "model": model,
                    "generate_chunk": {"request_id": "cmpl-s", "choices": [choice], **STREAMED},
                    "prompt_tokens": 1,
                }
                for choice in chunk_choices
            ],
            {},
        ),
        "derender-completion-no-request": (post, completion, completion_body, {}),
        "derender-completion-stream": (
            post,
            completion,
            [
                {
                    "stream": True,
                    "model": model,
                    "generate_chunk": {"request_id": "cmpl-s", "choices": [choice]},
                    "prompt_tokens": 1,
                }
                for choice in chunk_choices
            ],
            {},
        ),
        "derender-completion-prompt-tokens-mismatch": (
            post,
            completion,
            {**completion_body, "prompt_tokens": [1]},
            {},
        ),
        "derender-completion-empty": (post, completion, {"model": model, "generate_responses": []}, {}),
        "derender-completion-unknown-model": (post, completion, {**completion_body, "model": "nope"}, {}),
        "derender-completion-stream-on-batch-form": (
            post,
            completion,
            {**completion_body, "stream": True},
            {},
        ),
    }
    return out


# A call cut by max_tokens, on a server with vLLM's qwen3_coder parser (a third one): vLLM's
# parser engine gives the call with the parameters written whole.
CODER_ARGS = ["--enable-auto-tool-choice", "--tool-call-parser", "qwen3_coder"]
CODER_SETTINGS: dict[str, Any] = {"enable_auto_tool_choice": True, "tool_call_parser": "qwen3_coder"}
CODER_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            },
        },
    }
]
CODER_CALL = (
    "I'll check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nSão Paulo\n</parameter>\n"
    "<parameter=days>\n15\n</parameter>\n</function>\n</tool_call>"
)


def coder_derender_cases(model: str, encode) -> dict[str, tuple[str, str, Any, dict]]:
    """name -> case, as derender_cases, for the server with CODER_ARGS."""
    prompt = encode("<|im_start|>user\nWeather in São Paulo?<|im_end|>\n<|im_start|>assistant\n")
    request = {"model": model, "messages": [{"role": "user", "content": "Weather?"}], "tools": CODER_TOOLS}
    ids = encode(CODER_CALL)
    in_days = len(encode(CODER_CALL[: CODER_CALL.index("15") + 1]))  # cut in the second value
    in_city = len(encode(CODER_CALL[: CODER_CALL.index("Paulo")]))  # in the first one
    complete = ids + [IM_END]

    def whole(token_ids: list[int], finish: str) -> dict:
        choice = {"index": 0, "finish_reason": finish, "stop_reason": None, "token_ids": token_ids}
        return {
            "model": model,
            "generate_response": {"request_id": "chatcmpl-q1", "choices": [choice]},
            "prompt_tokens": len(prompt),
            "prompt_token_ids": prompt,
            "chat_request": request,
        }

    def stream(token_ids: list[int], finish: str) -> list[dict]:
        pieces = [token_ids[start : start + 3] for start in range(0, len(token_ids), 3)]
        return [
            {
                "stream": True,
                "model": model,
                "generate_chunk": {
                    "request_id": "chatcmpl-q2",
                    "choices": [
                        {
                            "index": 0,
                            "token_ids": piece,
                            "finish_reason": finish if n == len(pieces) - 1 else None,
                        }
                    ],
                },
                "prompt_tokens": len(prompt),
                "prompt_token_ids": prompt,
                "chat_request": request,
            }
            for n, piece in enumerate(pieces)
        ]

    chat = "/v1/chat/completions/derender"
    return {
        "coder-derender-chat-tool-call": ("POST", chat, whole(complete, "stop"), {}),
        "coder-derender-chat-tool-call-cut": ("POST", chat, whole(ids[:in_days], "length"), {}),
        "coder-derender-chat-tool-call-cut-in-first-parameter": (
            "POST",
            chat,
            whole(ids[:in_city], "length"),
            {},
        ),
        "coder-derender-chat-stream-tool-call": ("POST", chat, stream(complete, "stop"), {}),
        "coder-derender-chat-stream-tool-call-cut": ("POST", chat, stream(ids[:in_days], "length"), {}),
    }


def encoder(folder: Path):
    """The folder's tokenizer, text -> ids (no special tokens added)."""
    from mmprep.model import load_model_folder

    return load_model_folder(str(folder)).encode


def routes_folder(target: Path) -> Path:
    """The tiny folder, with its chat template also the tokenizer's (chat_template.jinja), as
    the published Qwen-VL folders have it: vLLM renders a request with tools with the
    tokenizer's template alone, and refuses it where there is none."""
    folder = make_model_folder(FAMILY, target)
    template = json.loads((folder / "chat_template.json").read_text())["chat_template"]
    (folder / "chat_template.jinja").write_text(template)
    return folder


@contextmanager
def mmprep_routes_server(folder: Path, model: str, parsers: dict[str, Any] | None = None) -> Iterator[str]:
    """`mmprep serve --model folder --max-model-len 4096` in a thread, serving `model`;
    with `parsers`, those settings (PARSER_SETTINGS for vLLM's PARSER_ARGS, CODER_SETTINGS
    for CODER_ARGS)."""
    from mmprep.core.config import Settings
    from tests.support.servers import LiveServer

    more = parsers or {}
    settings = Settings(
        model=folder,
        served_model_name=[model],
        upstream_model_id=model,  # the media hashes are keyed by the model as vLLM was given it
        max_model_len=MAX_MODEL_LEN,
        **more,
    )
    with LiveServer(settings) as live:
        yield live.url


# Where mmprep answers otherwise on purpose (docs/deployment.md): the tests expect these to
# differ (strict), so a change on either side shows.
KNOWN = {
    "completion-out-of-vocab": "a token id the tokenizer lacks is a 400 naming it; vLLM's render passes "
    "it on (its engine then refuses the prompt)",
    "detokenize-out-of-vocab": "a token id the tokenizer lacks is a 400 naming it; vLLM leaves it out of "
    "the text",
    "tokenize-messages-string": "a body that fits neither form: mmprep names the field of the form it has "
    "(messages), vLLM the first form's (prompt)",
    "derender-chat-stream-bad-state": "a stream_state whose chunk lengths do not add up: mmprep names "
    "stream_state, vLLM the first form's field (stream)",
    "derender-chat-stream-tool-call": "mmprep's stream adds up to its whole answer; vLLM's stream sends the "
    "line break between the reasoning and the call as content, which its whole answer does not",
    "derender-chat-stream-tool-call-malformed": "mmprep's stream adds up to its whole answer (content, as "
    "vLLM's whole answer); vLLM's hermes streams the call that does not parse as a call with broken JSON",
    "derender-chat-stream-tool-call-cut": "mmprep's stream adds up to its whole answer (content, finish "
    "length, as vLLM's whole answer); vLLM's hermes streams the cut call as a call with broken JSON",
    "coder-derender-chat-stream-tool-call": "mmprep's stream adds up to its whole answer; vLLM's stream "
    "sends the line break before the call as content, which its whole answer strips",
    "coder-derender-chat-stream-tool-call-cut": "mmprep's stream adds up to its whole answer (the call with "
    "its whole parameters, as vLLM's whole answer); vLLM's stream sends the cut value too, broken JSON",
}


def ask(url: str, case: tuple[str, str, Any, dict]) -> dict[str, Any]:
    """One case's answer: its status and its JSON (or None). A list of bodies is a stream's
    chunks, each sent with the stream_state the previous one answered: the answers' list
    (until one is refused)."""
    method, path, body, headers = case
    if isinstance(body, list) and body and isinstance(body[0], dict):
        answers, state = [], None
        for chunk in body:
            answer = ask(
                url, (method, path, {**chunk, "stream_state": chunk.get("stream_state", state)}, headers)
            )
            answers.append(answer)
            if answer["status"] != 200:
                break
            state = answer["body"]["stream_state"]
        return {"status": answers[-1]["status"], "body": answers[-1]["body"], "chunks": answers}
    if method == "GET":
        response = httpx.get(url + path, timeout=120)
    elif body is None:
        response = httpx.post(url + path, content=b"[1, 2]", headers={"content-type": "application/json"})
    else:
        response = httpx.post(url + path, json=body, headers=headers, timeout=120)
    try:
        payload = response.json()
    except ValueError:
        payload = None
    answer = {"status": response.status_code, "body": payload}
    if path.endswith("/derender") and response.status_code == 200 and isinstance(payload, dict):
        # the answer's top-level fields in the order they came (the goldens sort their keys)
        answer["fields"] = list(payload.get("chunk", payload))
    return answer


# Sampling params mmprep writes as its derender needs them (app/mmprep/vllm/sampling.py): compared
# for what the client asked (these keys), not for the rest.
SAMPLING_KEYS = (
    "max_tokens",
    "temperature",
    "top_p",
    "top_k",
    "seed",
    "min_tokens",
    "logprobs",
    "stop_token_ids",
    "skip_special_tokens",
)
RANDOM_ID = re.compile(r"^(cmpl-|chatcmpl-|resp_)[0-9a-f]{16,32}((?:-\d+)?)$")


def comparable(path: str, answer: dict[str, Any]) -> dict[str, Any]:
    """What of an answer both servers must give alike (the module's docstring says what not)."""
    status, body = answer["status"], answer["body"]
    if status != 200:
        error = body.get("error") if isinstance(body, dict) else None
        return {"status": status, "has_message": bool(error and error.get("message"))}
    if path == "/v1/models":
        return {"status": status, "ids": [model["id"] for model in body["data"]]}
    if path in ("/health", "/version"):
        return {
            "status": status,
            "keys": sorted(body) if isinstance(body, dict) and path == "/version" else None,
        }
    if path.endswith("/derender"):
        return {
            "status": status,
            **(_streamed(answer["chunks"]) if "chunks" in answer else _derendered(body)),
            # every top-level field, in vLLM's order, with its value (the random ones aside)
            "fields": [_top_level(chunk) for chunk in answer["chunks"]]
            if "chunks" in answer
            else _top_level(answer),
        }
    if path.endswith("/render"):
        requests = body if isinstance(body, list) else [body]
        return {"status": status, "requests": [_generate_request(request) for request in requests]}
    return {"status": status, "body": body}


def slim(answer: dict[str, Any]) -> dict[str, Any]:
    """An answer as the goldens keep it: a GenerateRequest's encoded tensors left out (what
    `comparable` reads of its features stays; test_vllm_goldens.py checks the tensors)."""
    body = answer["body"]
    for request in body if isinstance(body, list) else [body]:
        if isinstance(request, dict) and isinstance(request.get("features"), dict):
            for key in ("kwargs_data", "mm_metadata"):
                request["features"].pop(key, None)
    return answer


def differences(path: str, ours: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    """How mmprep's answer differs from vLLM's: what `comparable` keeps, and the field a
    refusal names where vLLM's names one."""
    mine, vllms = comparable(path, ours), comparable(path, theirs)
    found = [] if mine == vllms else [f"mmprep {mine} != vLLM {vllms}"]
    if theirs["status"] >= 400 and (named := field(theirs)) and field(ours) != named:
        found.append(f"mmprep names the field {field(ours)!r}, vLLM {named!r}")
    return found


def field(answer: dict[str, Any]) -> str | None:
    """The top-level field a refusal names: vLLM's validation errors say `body.tokens.1`,
    mmprep (as OpenAI) `tokens[1]`; both `tokens`."""
    body = answer["body"]
    param = (body.get("error") or {}).get("param") if isinstance(body, dict) else None
    if not param:
        return None
    # vLLM's names start with the union member tried (body.DerenderChatRequest.stream)
    parts = [part for part in re.split(r"[.\[]", param) if part != "body" and not part.startswith("Derender")]
    return parts[0] if parts else None  # none: the body as a whole


def _derendered(body: dict[str, Any]) -> dict[str, Any]:
    """A derendered answer: each choice's message (or text), finish and stop reasons, usage."""
    choices = []
    for choice in body["choices"]:
        kept = {key: choice.get(key) for key in ("index", "text", "finish_reason", "stop_reason")}
        if "message" in choice:
            kept["message"] = _message(choice["message"])
        choices.append(kept)
    return {
        "id": body["id"],
        "object": body["object"],
        "model": body["model"],
        "choices": choices,
        # the counts (vLLM adds its *_details, null here)
        "usage": {key: body["usage"][key] for key in ("prompt_tokens", "completion_tokens", "total_tokens")},
    }


VARYING = ("id", "created", "choices", "usage", "model")  # compared apart, or random


def _top_level(answer: dict[str, Any]) -> list[Any]:
    """A derender answer's top-level fields in order, each with its value but the VARYING."""
    body = answer["body"]
    body = body.get("chunk", body)
    return [[name, None if name in VARYING else body[name]] for name in answer.get("fields") or list(body)]


def _message(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": message.get("role"),
        "content": message.get("content"),
        "reasoning": message.get("reasoning"),
        "tool_calls": [
            {"type": call.get("type"), "function": call["function"], "id": bool(call.get("id"))}
            for call in message.get("tool_calls") or []
        ],
    }


def _streamed(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """A stream's chunks put together: the text, reasoning and calls they add up to, the
    finish reason, and the role sent once (how the deltas are cut may differ)."""
    text, reasoning, roles, finish = "", "", 0, None
    calls: dict[int, dict[str, Any]] = {}
    for answer in chunks:
        chunk = answer["body"]["chunk"]
        for choice in chunk["choices"]:
            delta = choice.get("delta") or {}
            roles += delta.get("role") == "assistant"
            text += delta.get("content") or choice.get("text") or ""
            reasoning += delta.get("reasoning") or ""
            for call in delta.get("tool_calls") or []:
                entry = calls.setdefault(call["index"], {"name": None, "arguments": "", "id": False})
                function = call.get("function") or {}
                entry["name"] = function.get("name") or entry["name"]
                entry["arguments"] += function.get("arguments") or ""
                entry["id"] = entry["id"] or bool(call.get("id"))
            finish = choice.get("finish_reason") or finish
    return {
        "text": text,
        "reasoning": reasoning,
        "tool_calls": [calls[index] for index in sorted(calls)],
        "roles": roles,
        "finish_reason": finish,
    }


def _generate_request(request: dict[str, Any]) -> dict[str, Any]:
    # What each field is, a default left out or not (vLLM leaves out max_tokens 16, mmprep
    # temperature 1): the values the engine reads.
    sampling = {**VLLM_DEFAULTS, **request["sampling_params"]}
    return {
        "request_id": RANDOM_ID.sub(r"\1<random>\2", request["request_id"]),
        "token_ids": request["token_ids"],
        # the media's hashes and places (the tensors: test_vllm_goldens.py)
        "features": {key: request["features"][key] for key in ("mm_hashes", "mm_placeholders")}
        if request["features"]
        else None,
        "model": request["model"],
        "stream": request["stream"],
        "stream_options": request["stream_options"],
        "sampling_params": {key: sampling.get(key) for key in SAMPLING_KEYS},
    }
