"""Errors a client is told about, and OpenAI's shape for them.

Every error meant for a client is a ServiceError: an HTTP status, a stable OpenAI error
code, a message a person can act on, and the request field it is about (`param`). Both HTTP
servers (the front door and `mmprep worker`) turn errors into answers with `error_reply`:
a ServiceError as it says, anything else as a 500 whose details stay in the log (it is a
bug). `read_error_body` is the one reader of the same shape coming back from a worker or an
OpenAI-compatible upstream.
"""

from __future__ import annotations

import json
import logging
from typing import Any

log = logging.getLogger("mmprep")


class ServiceError(Exception):
    status = 400
    code = "invalid_request"
    headers: dict[str, str] | None = None  # e.g. Retry-After on a 503

    def __init__(
        self, message: str, code: str | None = None, param: str | None = None, status: int | None = None
    ):
        super().__init__(message)
        self.message, self.param = message, param
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status

    def body(self) -> dict[str, Any]:
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}


INTERNAL_ERROR = ServiceError(
    "internal error in mmprep; the server log has the details", "internal_error", status=500
)


def as_service_error(error: BaseException) -> ServiceError:
    """`error` if it is meant for the client; otherwise the 500 a bug gets, its traceback logged.
    Server-side failures that are the deployment's state (no worker reachable, an upstream's
    error) are logged as one warning line, not as a bug."""
    if not isinstance(error, ServiceError):
        log.error("internal error", exc_info=error)
        return INTERNAL_ERROR
    if error.status >= 500:
        log.warning("request failed: %s", error.message, extra={"status": error.status, "code": error.code})
    return error


def error_reply(error: BaseException) -> tuple[int, dict[str, Any]]:
    """The status and JSON body an HTTP server answers `error` with."""
    error = as_service_error(error)
    return error.status, error.body()


def read_error_body(payload: bytes | str | dict | None) -> tuple[str | None, str | None, str | None]:
    """(message, code, param) from an error answer: OpenAI's {"error": {...}}, vLLM's older
    flat shape, or plain text (message only). Nones for what it does not say."""
    body = payload
    if isinstance(payload, (bytes, str)):
        try:
            body = json.loads(payload)
        except (ValueError, UnicodeDecodeError):
            text = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else payload
            return (text[:500] or None), None, None
    error = body.get("error") if isinstance(body, dict) and isinstance(body.get("error"), dict) else body
    if not isinstance(error, dict):
        return None, None, None
    message = str(error["message"]) if error.get("message") else None
    code = error["code"] if isinstance(error.get("code"), str) else None
    param = error["param"] if isinstance(error.get("param"), str) else None
    return message, code, param
