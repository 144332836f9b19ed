"""The frame every route of vLLM's render server runs in here (the renders, the derenders,
/tokenize, /detokenize): the model folder needed, the JSON body read, an admission slot held
while the work runs, the work stopped if the client leaves, the answer or the refusal counted."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response
from starlette.requests import ClientDisconnect

from ...core.disconnect import ClientGone, until_disconnect
from ...core.errors import ServiceError
from ...service import Service
from ...transport.body_limit import BODY_REFUSED
from ...transport.json_body import read_json_body
from ..common.errors import client_gone, refuse

# The work of one request: its parsed body, the HTTP request (headers), a cancel event for
# work in threads -> the answer (JSON-able, or a Response of its own).
Work = Callable[[Any, Request, threading.Event], Awaitable[Any]]
# A route's handler: the same, given the Service first.
ModelHandler = Callable[[Service, Any, Request, threading.Event], Awaitable[Any]]


async def answer_with_model(service: Service, http: Request, work: Work) -> Response:
    """`work`'s answer as JSON, or the refusal in OpenAI's shape (never a 500 for bad input)."""
    if service.settings.model is None:
        return refuse(
            service,
            ServiceError(
                f"{http.url.path} needs the model folder: start mmprep with --model",
                "render_unavailable",
                status=404,
            ),
        )
    try:
        document = await read_json_body(http)
        slot = await service.admit(http)
    except ServiceError as error:
        return refuse(service, error)
    except ClientDisconnect:
        if http.scope.get(BODY_REFUSED):  # the body limit cut it off, and answered 413
            return Response(status_code=413)
        return client_gone(service)
    except ClientGone:  # it left while queued
        return client_gone(service)
    try:
        cancel = threading.Event()
        answer = await until_disconnect(http, work(document, http, cancel), cancel)
        service.record(200)
        return answer if isinstance(answer, Response) else JSONResponse(answer)
    except ClientGone:
        return client_gone(service)
    except Exception as error:  # a ServiceError is the client's answer; anything else a logged 500
        return refuse(service, error)
    finally:
        slot.release()
