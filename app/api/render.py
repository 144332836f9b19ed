"""POST /v1/chat/completions/render: what vLLM's render endpoint answers, from mmprep.

A chat request in, the GenerateRequest JSON out (app/vllm/request.py): token ids with the media
expanded, features with mm_hashes, placeholders and the processed tensors, sampling_params.
A coordinator can POST it unchanged to any `vllm serve --enable-scale-out` (or
--tokens-only) at /inference/v1/generate. It needs the model folder (--model: its tokenizer,
template and processor); without one the route answers 404 saying so.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from ..service import Service
from ..vllm.request import generate_request_body, random_request_id
from .model_routes import answer_with_model
from .schemas import parse_chat_request


async def render_chat_request(service: Service, http: Request) -> Response:
    return await answer_with_model(
        service, http, lambda document, http, cancel: _render(service, document, http, cancel)
    )


async def _render(service: Service, document: Any, http: Request, cancel: threading.Event) -> Response:
    body = parse_chat_request(document)
    service.check_request(body.model, body.n)
    request_id = _request_id(http, body.model_extra or {})
    prepared, _ = await service.preprocessor.prepare(body, request_id, cancel)
    pieces = await asyncio.to_thread(generate_request_body, prepared, service.generate_options)
    return Response(b"".join(pieces), media_type="application/json")


def _request_id(http: Request, extra: dict[str, Any]) -> str:
    """As vLLM's render names the GenerateRequest: "chatcmpl-" and the client's X-Request-Id,
    else the body's request_id, else vLLM's random id (16 hex digits)."""
    given = extra.get("request_id")
    base = http.headers.get("x-request-id") or (given if isinstance(given, str) else None)
    return f"chatcmpl-{base or random_request_id()}"
