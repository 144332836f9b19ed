"""Refuse request bodies over a size, before and while they arrive (ASGI middleware).

A declared Content-Length over the limit is refused at once; a body without one (chunked)
is counted as it streams in and refused the moment it passes the limit. The 413 is sent
from here, not raised: FastAPI would turn an exception while reading the body into a 400.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from ..core.errors import ServiceError

BODY_REFUSED = "mmprep.body_refused"  # set in the ASGI scope when the 413 has gone out


def body_too_large(limit: int) -> ServiceError:
    return ServiceError(
        f"the request body is more than the {limit} bytes this server accepts",
        "request_too_large",
        status=413,
    )


class BodySizeLimit:
    def __init__(self, app, max_bytes: int, on_refused: Callable[[ServiceError], None] = lambda error: None):
        self.app, self.max_bytes, self.on_refused = app, max_bytes, on_refused

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            return await self._refuse(send)
        received, refused = 0, False

        async def counted_receive():
            nonlocal received, refused
            message = await receive()
            if message["type"] == "http.request" and not refused:
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    # Answer now, and let the app see the client as gone: it stops reading.
                    refused = True
                    scope[BODY_REFUSED] = True
                    await self._refuse(send)
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message):
            if not refused:  # the 413 has gone out: whatever the app says now is dropped
                await send(message)

        await self.app(scope, counted_receive, guarded_send)

    async def _refuse(self, send) -> None:
        error = body_too_large(self.max_bytes)
        self.on_refused(error)
        await _send_error(send, error)


async def _send_error(send, error: ServiceError) -> None:
    body = json.dumps(error.body()).encode()
    await send(
        {
            "type": "http.response.start",
            "status": error.status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
