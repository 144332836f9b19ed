"""Anthropic's Messages API: POST /v1/messages."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import Response

from ..common.chat import chat_completion
from ..common.dependencies import ServiceDep
from .messages import MessagesApi

router = APIRouter()


@router.post("/v1/messages")
async def messages(service: ServiceDep, request: Request) -> Response:
    """Anthropic's Messages API, as vLLM serves it, through the chat pipeline."""
    return await chat_completion(service, request, MessagesApi())


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
