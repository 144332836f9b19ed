"""The HTTP endpoints. Thin: each hands its work to the Service."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from starlette.requests import ClientDisconnect

from ..errors import RequestError
from .body_limit import BODY_REFUSED
from .json_body import read_json_body
from .schemas import parse_chat_request

router = APIRouter()


def _service(request: Request):
    return request.app.state.service


@router.post("/v1/chat/completions")
async def chat_completions(request: Request) -> Response:
    service = _service(request)
    try:
        body = parse_chat_request(await read_json_body(request))
    except RequestError as error:
        return service.refuse(error.status, error.message, error.code, error.param)
    except ClientDisconnect:
        if request.scope.get(BODY_REFUSED):  # the body limit cut it off, and answered 413
            return Response(status_code=413)
        return service.client_gone()
    return await service.chat(body, request)


@router.get("/v1/models")
async def list_models(request: Request) -> dict:
    service = _service(request)
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
async def ready(request: Request) -> Response:
    """Ready to take work: started, and the engine says it can generate."""
    if _service(request).ready():
        return JSONResponse({"status": "ready"})
    return JSONResponse({"status": "not ready"}, status_code=503)


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    service = _service(request)
    return Response(service.metrics.render(), media_type=service.metrics.content_type)
