"""GET /v1/models, /health, /ready, /version, /load and /metrics, as vllm serve answers them."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI
from fastapi.responses import JSONResponse, Response

from ...core.version import VERSION
from ..common.dependencies import ServiceDep

router = APIRouter()


@router.get("/v1/models")
async def list_models(service: ServiceDep) -> dict:
    return {
        "object": "list",
        "data": [
            {"id": name, "object": "model", "created": service.started, "owned_by": "mmprep"}
            for name in service.settings.served_model_name
        ],
    }


@router.get("/health")
async def health() -> dict:
    """Alive: the process answers."""
    return {"status": "ok"}


@router.get("/ready")
async def ready(service: ServiceDep) -> Response:
    """Ready to take work: started, and the engine says it can generate."""
    if service.ready():
        return JSONResponse({"status": "ready"})
    return JSONResponse({"status": "not ready"}, status_code=503)


@router.get("/version")
async def version() -> dict:
    """As vLLM's /version, with mmprep's version."""
    return {"version": VERSION}


@router.get("/load")
async def load(service: ServiceDep) -> dict:
    """As vLLM's /load (with --enable-server-load-tracking): the requests in flight."""
    return {"server_load": service.in_flight}


@router.get("/metrics")
async def metrics(service: ServiceDep) -> Response:
    return Response(service.metrics.render(), media_type=service.metrics.content_type)


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
