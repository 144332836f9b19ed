"""The preview page: GET /preview (the form) and POST /preview (what it sends), left out of
the OpenAPI document."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import Response

from ..common.dependencies import ServiceDep
from .page import page, preview_post

router = APIRouter()


@router.get("/preview", include_in_schema=False)
async def preview_page(service: ServiceDep) -> Response:
    """A page that shows the frames a video's sampling gives (only with --enable-preview)."""
    return page(service)


@router.post("/preview", include_in_schema=False)
async def preview(service: ServiceDep, request: Request) -> Response:
    return await preview_post(service, request)


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
