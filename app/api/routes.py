"""The HTTP endpoints. Thin: each gets the Service as a typed dependency and hands it the work."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from ..service import Service
from .chat import chat_completion
from .preview import page, preview_post
from .render import render_chat_request

router = APIRouter()


def get_service(request: Request) -> Service:
    return request.app.state.service


ServiceDep = Annotated[Service, Depends(get_service)]


@router.post("/v1/chat/completions")
async def chat_completions(service: ServiceDep, request: Request) -> Response:
    return await chat_completion(service, request)


@router.post("/v1/chat/completions/render")
async def render_chat_completion(service: ServiceDep, request: Request) -> Response:
    """vLLM's render endpoint: the GenerateRequest for /inference/v1/generate (needs --model)."""
    return await render_chat_request(service, request)


@router.get("/preview", include_in_schema=False)
async def preview_page(service: ServiceDep) -> Response:
    """A page that shows the frames a video's sampling gives (only with --enable-preview)."""
    return page(service)


@router.post("/preview", include_in_schema=False)
async def preview(service: ServiceDep, request: Request) -> Response:
    return await preview_post(service, request)


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


@router.get("/metrics")
async def metrics(service: ServiceDep) -> Response:
    return Response(service.metrics.render(), media_type=service.metrics.content_type)
