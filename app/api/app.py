"""create_app: the FastAPI application around one Service."""

from __future__ import annotations

from contextlib import asynccontextmanager

from fastapi import FastAPI

from ..core.config import Settings
from ..service import Service
from .body_limit import BodySizeLimit
from .errors import install_error_handlers
from .routes import router


def create_app(settings: Settings | None = None, service: Service | None = None) -> FastAPI:
    service = service or Service(settings or Settings())

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await service.start()
        try:
            yield
        finally:
            await service.stop()

    app = FastAPI(title="mmprep", version="0.1.0", lifespan=lifespan)
    app.state.service = service
    install_error_handlers(app)
    app.include_router(router)
    app.add_middleware(
        BodySizeLimit,
        max_bytes=service.settings.max_request_bytes,
        on_refused=lambda error: service.record_refusal(error.status, error.code, error.param),
    )
    return app
