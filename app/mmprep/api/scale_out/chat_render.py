"""POST /v1/chat/completions/render: what vLLM's render endpoint answers, from mmprep.

A chat request in, the GenerateRequest JSON out (app/mmprep/vllm/request.py): token ids with the media
expanded, features with mm_hashes, placeholders and the processed tensors, sampling_params.
A coordinator can POST it unchanged to any `vllm serve --enable-scale-out` (or
--tokens-only) at /inference/v1/generate. It needs the model folder (--model: its tokenizer,
template and processor); without one the route answers 404 saying so.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from ...core.errors import ServiceError
from ...service import Service
from ...transport.pieces_response import PiecesResponse
from ...vllm.request import generate_request_body, random_request_id
from ..common.chat_protocol import ChatCompletionRequest, parse_chat_request
from .frame import answer_with_model


async def render_chat_request(service: Service, http: Request) -> Response:
    return await answer_with_model(
        service, http, lambda document, http, cancel: render_chat_document(service, document, http, cancel)
    )


async def render_chat_document(
    service: Service,
    document: Any,
    http: Request,
    cancel: threading.Event,
    changes: dict[str, Any] | None = None,
    check_tools: bool = True,
) -> PiecesResponse:
    """A chat request's JSON (the client's, or one made of another API's: messages_render.py,
    responses_render.py) rendered into the GenerateRequest, `changes` made to its fields.
    `check_tools`: the tool choice checked as vLLM's chat render checks it (its Responses
    render does not)."""
    body = parse_chat_request(document)
    service.check_request(body.model, body.n)
    if check_tools:
        _check_auto_tool_choice(service, body)
    request_id = _request_id(http, body.model_extra or {})
    chat = body.chat_input()
    # vLLM's adjust_request, before its SamplingParams are made: a tool-call parser that needs
    # the special tokens (hermes) turns skip_special_tokens off, and the render writes it
    skip = service.derendering.adjusted(body.output_options()).skip_special_tokens
    if skip is not None:
        chat = dataclasses.replace(chat, extra={**chat.extra, "skip_special_tokens": skip})
    prepared, _ = await service.preprocessor.prepare(chat, request_id, cancel)
    # vLLM's render answers an item whose embeddings text splits as one item (vllm launch
    # render's answer); --engine vllm-generate sends it as image runs, or the request's
    # images as files (vllm/request.py)
    options = dataclasses.replace(service.generate_options, for_generate=False)
    if prepared.media:  # hashing and encoding the tensors: milliseconds, off the event loop
        pieces = await asyncio.to_thread(generate_request_body, prepared, options, changes)
    else:  # a text prompt's answer is its ids (80k in 0.4 ms): less than a thread hop costs
        pieces = generate_request_body(prepared, options, changes)
    return PiecesResponse(pieces, media_type="application/json")


def _check_auto_tool_choice(service: Service, body: ChatCompletionRequest) -> None:
    """vLLM's render refuses tools under "auto" (the default with tools) unless the server
    parses tool calls: the answer's calls would come back as text."""
    answer = body.answer
    if answer.tools and answer.tool_choice in (None, "auto") and service.derendering.tool_call_parser is None:
        raise ServiceError(
            '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
            "unsupported_field",
            "tool_choice",
        )


def _request_id(http: Request, extra: dict[str, Any]) -> str:
    """As vLLM's render names the GenerateRequest: "chatcmpl-" and the client's X-Request-Id,
    else the body's request_id, else vLLM's random id (16 hex digits)."""
    given = extra.get("request_id")
    base = http.headers.get("x-request-id") or (given if isinstance(given, str) else None)
    return f"chatcmpl-{base or random_request_id()}"
