"""POST /v1/completions/render: vLLM's completion render (entrypoints/scale_out/render/), a
completion request in, one GenerateRequest per prompt out (a JSON list), for
/inference/v1/generate.

The prompt is vLLM's: a string, a list of strings, a list of token ids, or a list of such
lists. Text is tokenized as it is, the tokenizer's special tokens added unless
`add_special_tokens` is false; token ids are taken as given (each checked against the
vocabulary). The ids are "cmpl-" and the client's X-Request-Id (else the body's request_id,
else a random one), "-0", "-1", ... after it when there are several prompts. The sampling
params are the chat render's (app/mmprep/vllm/sampling.py), max_tokens 16 unless the client says,
as vLLM's CompletionRequest.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field

from ...core.errors import ServiceError
from ...interface.prepared import PreparedRequest, SamplingParams, TokenPrompt
from ...model import ModelFolder, load_model_folder
from ...render.prompts import check_ids, encode_prompt
from ...render.renderer import check_prompt_length
from ...service import Service
from ...vllm.request import completion_generate_request, random_request_id
from ..openai.chat_protocol import MAX_TOP_LOGPROBS
from .common import check_model
from .validation import validated

# What vLLM's render refuses of a completion request, each with the field and vLLM's words.
_REFUSED = {
    "suffix": "suffix is only supported for models with FIM completion rendering",
    "prompt_embeds": "prompt_embeds are not supported by this server (it renders text and token ids)",
}


_EMPTY = "Either prompt or prompt_embeds must be provided and non-empty."


class StreamOptions(BaseModel):
    include_usage: bool | None = True
    continuous_usage_stats: bool | None = False


class CompletionRenderRequest(BaseModel):
    """vLLM's CompletionRequest, the fields its render reads; the others are kept (extra)."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    prompt: Any = None  # checked by prompts(): vLLM's four forms
    max_tokens: int | None = Field(16, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=-1)
    n: int = Field(1, ge=1)
    seed: int | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    min_tokens: int = Field(0, ge=0)
    logprobs: int | None = Field(None, ge=0, le=MAX_TOP_LOGPROBS)
    echo: bool | None = False
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    add_special_tokens: bool = True
    use_beam_search: bool = False
    request_id: str | None = None

    def sampling(self) -> SamplingParams:
        return SamplingParams(
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            seed=self.seed,
            stop=tuple([self.stop] if isinstance(self.stop, str) else self.stop or ()),
            stop_token_ids=tuple(self.stop_token_ids or ()),
            ignore_eos=self.ignore_eos,
            min_tokens=self.min_tokens,
            top_k=self.top_k,
            logprobs=self.logprobs is not None,
            top_logprobs=self.logprobs or 0,
        )


async def render_completion(service: Service, document: Any, http: Request, cancel: threading.Event) -> list:
    request = validated(CompletionRenderRequest, document, "a completion request")
    check_model(service, request.model)
    check_refused(request)
    if request.n > 1:
        raise ServiceError("n > 1 is not supported: send one request per choice", "unsupported_n", "n")
    folder = load_model_folder(str(service.settings.model), service.settings.processor)
    prompts = await asyncio.to_thread(prompt_ids, folder, request)
    base = f"cmpl-{http.headers.get('x-request-id') or request.request_id or random_request_id()}"
    extra = request.model_extra or {}
    stream_options = request.stream_options.model_dump() if request.stream_options else None
    answers = []
    for index, ids in enumerate(prompts):
        where = "prompt" if len(prompts) == 1 else f"prompt[{index}]"
        check_prompt_length(len(ids), service.settings.max_model_len, where)
        prepared = PreparedRequest(
            request_id=base,
            model=request.model or service.settings.served_model_name[0],
            messages=[],
            media=[],
            sampling=request.sampling(),
            stream=bool(request.stream),
            extra=extra,
            prompt=TokenPrompt(tuple(ids), ()),
            completion=tuple(ids),
        )
        request_id = base if len(prompts) == 1 else f"{base}-{index}"
        body = completion_generate_request(prepared, service.generate_options, request_id, stream_options)
        body["model"] = request.model
        answers.append(body)
    return answers


def check_refused(request: CompletionRenderRequest) -> None:
    extra = request.model_extra or {}
    for name, message in _REFUSED.items():
        if extra.get(name) is not None:
            raise ServiceError(message, "invalid_request", name)
    if request.use_beam_search:
        raise ServiceError(
            "Beam search is not supported by the render endpoint", "invalid_request", "use_beam_search"
        )


def prompt_forms(request: CompletionRenderRequest) -> list[str | list[int]]:
    """Each prompt, in order: vLLM's four forms (prompt_to_seq), text or token ids."""
    prompt = request.prompt
    if prompt is None or prompt == "":
        raise ServiceError(_EMPTY, "invalid_request", "prompt")
    if isinstance(prompt, list) and not prompt:
        raise ServiceError("You must pass at least one prompt", "invalid_request", "prompt")
    if isinstance(prompt, str) or (isinstance(prompt, list) and all(_is_id(item) for item in prompt)):
        return [prompt]
    if isinstance(prompt, list) and all(isinstance(item, str) or _is_id_list(item) for item in prompt):
        if len({isinstance(item, str) for item in prompt}) == 1:
            return list(prompt)
    raise ServiceError(
        "prompt: a string, a list of strings, a list of token ids or a list of lists of token ids "
        "(one form for all prompts)",
        "invalid_request",
        "prompt",
    )


def prompt_param(request: CompletionRenderRequest, prompts: list, index: int) -> str:
    """The field one of the prompts came in: the prompt itself, or one of its list."""
    return "prompt" if prompts[index] is request.prompt else f"prompt[{index}]"


def prompt_ids(folder: ModelFolder, request: CompletionRenderRequest) -> list[list[int]]:
    """Each prompt's token ids, in order, none empty: text tokenized (the tokenizer's special
    tokens added unless add_special_tokens is false), ids checked against the vocabulary."""
    prompts = prompt_forms(request)
    return [
        item_ids(folder, request, item, prompt_param(request, prompts, index))
        for index, item in enumerate(prompts)
    ]


def item_ids(
    folder: ModelFolder, request: CompletionRenderRequest, item: str | list[int], where: str
) -> list[int]:
    """One prompt's token ids, not empty: text tokenized, ids checked against the vocabulary;
    `where` names the prompt in a refusal."""
    ids = encode_prompt(folder, item, request.add_special_tokens) if isinstance(item, str) else item
    if not ids:
        raise ServiceError(_EMPTY, "invalid_request", where)
    check_ids(folder, ids, where)
    return list(ids)


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_id_list(value: Any) -> bool:
    return isinstance(value, list) and all(map(_is_id, value))
