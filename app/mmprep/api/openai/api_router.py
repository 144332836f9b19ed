"""OpenAI's client APIs: POST /v1/chat/completions, /v1/completions and /v1/responses."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import Response

from ..common.chat import chat_completion
from ..common.dependencies import ServiceDep
from .completions import completion
from .responses import ResponsesApi

router = APIRouter()


@router.post("/v1/chat/completions")
async def chat_completions(service: ServiceDep, request: Request) -> Response:
    return await chat_completion(service, request)


@router.post("/v1/completions")
async def completions(service: ServiceDep, request: Request) -> Response:
    """OpenAI's legacy completions API, as vLLM serves it: prompts without a chat template."""
    return await completion(service, request)


@router.post("/v1/responses")
async def responses(service: ServiceDep, request: Request) -> Response:
    """OpenAI's Responses API, as vLLM serves it, through the chat pipeline (nothing stored)."""
    return await chat_completion(service, request, ResponsesApi())


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
