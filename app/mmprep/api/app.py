"""create_app: the FastAPI application around one Service, each endpoint family's router
attached (as vLLM's `attach_router(app)`)."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..core.config import Settings
from ..core.errors import ServiceError, error_reply
from ..core.lifespan import lifespan_of
from ..core.version import VERSION
from ..service import Service
from ..transport.body_limit import BodySizeLimit
from .anthropic import api_router as anthropic
from .auth import ApiKeys
from .openai import api_router as openai
from .preview import api_router as preview
from .probes import api_router as probes
from .scale_out import api_router as scale_out

# The endpoint families, in the order their routes are listed (the OpenAPI document's order).
FAMILIES = (openai, anthropic, scale_out, preview, probes)


def create_app(settings: Settings | None = None, service: Service | None = None) -> FastAPI:
    service = service or Service(settings or Settings())

    settings = service.settings
    app = FastAPI(title="mmprep", version=VERSION, lifespan=lifespan_of(service))
    app.root_path = settings.root_path  # --root-path, set as vllm serve sets it (the parameter is deprecated)
    app.state.service = service
    install_error_handlers(app)
    for family in FAMILIES:
        family.attach_router(app)

    def record(error: ServiceError) -> None:
        service.record(error.status, error.code, error.param)

    # The last added is the outermost: CORS, then the keys, then the body limit, so a browser
    # can read a 401 and no body is read for a request without a key.
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_request_bytes, on_refused=record)
    if settings.api_key:
        app.add_middleware(ApiKeys, keys=settings.api_key, on_refused=record)
    if settings.allowed_origins:  # as vllm serve's CORSMiddleware (which adds nothing without origins)
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.allowed_origins,
            allow_credentials=settings.allow_credentials,
            allow_methods=settings.allowed_methods,
            allow_headers=settings.allowed_headers,
        )
    return app


def install_error_handlers(app: FastAPI) -> None:
    """Errors nothing else caught, in OpenAI's shape: a route that does not exist is a 404
    `not_found`; an unexpected exception a 500 whose traceback goes to the log."""

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException):
        code = "not_found" if error.status_code == 404 else "http_error"
        return JSONResponse(
            ServiceError(str(error.detail), code, status=error.status_code).body(), error.status_code
        )

    @app.exception_handler(Exception)
    async def unexpected(request: Request, error: Exception):
        status, body = error_reply(error)
        return JSONResponse(body, status_code=status)
