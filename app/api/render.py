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
from starlette.requests import ClientDisconnect

from ..core.disconnect import ClientGone, until_disconnect
from ..core.errors import ServiceError
from ..service import Service
from ..vllm.request import generate_request_body, random_request_id
from .errors import client_gone, refuse
from .json_body import read_json_body
from .schemas import parse_chat_request


async def render_chat_request(service: Service, http: Request) -> Response:
    if service.settings.model is None:
        return refuse(
            service,
            ServiceError(
                "this server renders no prompts: start mmprep with --model (the model folder)",
                "render_unavailable",
                status=404,
            ),
        )
    try:
        body = parse_chat_request(await read_json_body(http))
        slot = service.admit()
    except ServiceError as error:
        return refuse(service, error)
    except ClientDisconnect:
        return client_gone(service)
    try:
        service.check_request(body.model, body.n)
        cancel = threading.Event()
        request_id = _request_id(http, body.model_extra or {})
        prepared, _ = await until_disconnect(
            http, service.preprocessor.prepare(body.chat_input(), request_id, cancel), cancel
        )
        pieces = await asyncio.to_thread(generate_request_body, prepared, service.generate_options)
        service.record(200)
        return Response(b"".join(pieces), media_type="application/json")
    except ClientGone:
        return client_gone(service)
    except Exception as error:  # a ServiceError is the client's answer; anything else a logged 500
        return refuse(service, error)
    finally:
        slot.release()


def _request_id(http: Request, extra: dict[str, Any]) -> str:
    """As vLLM's render names the GenerateRequest: "chatcmpl-" and the client's X-Request-Id,
    else the body's request_id, else vLLM's random id (16 hex digits)."""
    given = extra.get("request_id")
    base = http.headers.get("x-request-id") or (given if isinstance(given, str) else None)
    return f"chatcmpl-{base or random_request_id()}"
