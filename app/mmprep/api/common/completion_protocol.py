"""OpenAI's legacy completion request as vLLM types it (its CompletionRequest, the fields
mmprep reads), what /v1/completions serves and /v1/completions/render renders: the fields
vLLM's render refuses, and the prompt in vLLM's four forms (a string, a list of strings, a
list of token ids, or a list of such lists), each prompt's token ids (text tokenized, the
tokenizer's special tokens added unless `add_special_tokens` is false; ids checked against
the vocabulary).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ...core.errors import ServiceError
from ...interface.prepared import SamplingParams
from ...model import ModelFolder
from ...render.prompts import check_ids, encode_prompt
from .chat_protocol import MAX_TOP_LOGPROBS

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
