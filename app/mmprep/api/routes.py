"""The HTTP endpoints. Thin: each gets the Service as a typed dependency and hands it the work."""

from __future__ import annotations

from functools import partial
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from ..core.version import VERSION
from ..service import Service
from .anthropic.messages import MessagesApi
from .openai.chat import chat_completion
from .openai.completions import completion
from .openai.responses import ResponsesApi
from .preview_page import page, preview_post
from .scale_out.chat_render import render_chat_request
from .scale_out.common import ModelHandler, answer_with_model
from .scale_out.completions_render import render_completion
from .scale_out.derender_routes import derender_chat, derender_completion
from .scale_out.messages_render import render_messages
from .scale_out.responses_render import render_responses
from .scale_out.tokenize import detokenize, tokenize

router = APIRouter()


async def get_service(request: Request) -> Service:
    # async, though it awaits nothing: FastAPI runs a plain `def` dependency in its thread
    # pool, a thread hop for every request.
    return request.app.state.service


ServiceDep = Annotated[Service, Depends(get_service)]


@router.post("/v1/chat/completions")
async def chat_completions(service: ServiceDep, request: Request) -> Response:
    return await chat_completion(service, request)


@router.post("/v1/completions")
async def completions(service: ServiceDep, request: Request) -> Response:
    """OpenAI's legacy completions API, as vLLM serves it: prompts without a chat template."""
    return await completion(service, request)


@router.post("/v1/messages")
async def messages(service: ServiceDep, request: Request) -> Response:
    """Anthropic's Messages API, as vLLM serves it, through the chat pipeline."""
    return await chat_completion(service, request, MessagesApi())


@router.post("/v1/responses")
async def responses(service: ServiceDep, request: Request) -> Response:
    """OpenAI's Responses API, as vLLM serves it, through the chat pipeline (nothing stored)."""
    return await chat_completion(service, request, ResponsesApi())


@router.post("/v1/chat/completions/render")
async def render_chat_completion(service: ServiceDep, request: Request) -> Response:
    """vLLM's render endpoint: the GenerateRequest for /inference/v1/generate (needs --model)."""
    return await render_chat_request(service, request)


# vLLM's render-server routes beside the chat render: each its handler (service, body, the
# HTTP request, the cancel event) under answer_with_model's frame (needs --model).
MODEL_ROUTES = {
    "/v1/completions/render": (render_completion, "vLLM's completion render: a GenerateRequest per prompt."),
    "/v1/messages/render": (
        render_messages,
        "vLLM's Messages render: an Anthropic request's GenerateRequest.",
    ),
    "/v1/responses/render": (
        render_responses,
        "vLLM's Responses render: an OpenAI request's GenerateRequest.",
    ),
    "/v1/chat/completions/derender": (
        derender_chat,
        "vLLM's chat derender: generate's ids as the chat answer.",
    ),
    "/v1/completions/derender": (
        derender_completion,
        "vLLM's completion derender: generate's ids as completions.",
    ),
    "/tokenize": (tokenize, "vLLM's /tokenize: a prompt's or a conversation's token ids."),
    "/detokenize": (detokenize, "vLLM's /detokenize: token ids' text."),
}


def _model_route(handler: ModelHandler):
    async def route(service: ServiceDep, request: Request) -> Response:
        return await answer_with_model(service, request, partial(handler, service))

    return route


for path, (handler, summary) in MODEL_ROUTES.items():
    router.add_api_route(
        path,
        _model_route(handler),
        methods=["POST"],
        name=handler.__name__,
        description=summary + " Needs --model.",
    )


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
