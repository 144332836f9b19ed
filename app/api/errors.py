"""Every failure leaves as OpenAI's error shape: {"error": {message, type, param, code}}.

Bad input is a 400 naming the part; an unknown model 404; too much work 503 with
Retry-After. An engine's error keeps the status it carries (a worker's or upstream's own,
502 for one that broke, 503 when none is reachable). A 500 means a bug in mmprep or in
the engine, never bad input.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from decoders.errors import MediaError

from ..errors import MediaPartError, RequestError
from ..workers.base import EngineError, EngineHTTPError

log = logging.getLogger("mmprep.api")


def error_body(message: str, code: str, param: str | None = None, kind: str = "invalid_request_error") -> dict:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_response(status: int, message: str, code: str, param: str | None = None, headers=None) -> JSONResponse:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return JSONResponse(error_body(message, code, param, kind), status_code=status, headers=headers)


def describe(error: Exception) -> tuple[int, str, str, str | None]:
    """(status, message, code, param) for an error raised while serving a request."""
    if isinstance(error, MediaPartError):
        return 400, str(error), error.error.code, error.param
    if isinstance(error, RequestError):
        return error.status, error.message, error.code, error.param
    if isinstance(error, MediaError):
        return 400, str(error), error.code, None
    if isinstance(error, EngineHTTPError):
        return error.status, error.message, error.code, error.param
    if isinstance(error, EngineError):
        return 500, f"the engine failed: {error}", "engine_error", None
    return 500, "internal error in mmprep; the server log has the details", "internal_error", None


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException):
        code = "not_found" if error.status_code == 404 else "http_error"
        return error_response(error.status_code, str(error.detail), code)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, error: Exception):
        log.exception("unhandled error serving %s", request.url.path)
        status, message, code, param = describe(error)
        return error_response(status, message, code, param)
