"""vLLM's render-server routes: the renders (/v1/chat/completions/render and the completion,
Messages and Responses renders), the derenders, /tokenize and /detokenize. Each needs the
model folder (--model)."""

from __future__ import annotations

from functools import partial

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import Response

from ..common.dependencies import ServiceDep
from .chat_render import render_chat_request
from .completions_render import render_completion
from .derender_routes import derender_chat, derender_completion
from .frame import ModelHandler, answer_with_model
from .messages_render import render_messages
from .responses_render import render_responses
from .tokenize import detokenize, tokenize

router = APIRouter()


async def render_chat_completion(request: Request) -> Response:
    """vLLM's render endpoint: the GenerateRequest for /inference/v1/generate (needs --model)."""
    # The Service read off the app, not through ServiceDep: FastAPI's dependency solving
    # costs about 15 us a request, on the route a text-heavy deployment hits most.
    return await render_chat_request(request.app.state.service, request)


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


def attach_router(app: FastAPI) -> None:
    # The chat render on the app itself, first among its routes: FastAPI (0.16x) keeps each
    # included router as a layer of its own and walks the families before this one, 25-40 us
    # of a text render's ~1 ms (a tiny render through uvicorn: 0.575 -> 0.525 CPU-ms).
    app.add_api_route("/v1/chat/completions/render", render_chat_completion, methods=["POST"])
    app.router.routes.insert(0, app.router.routes.pop())
    app.include_router(router)
