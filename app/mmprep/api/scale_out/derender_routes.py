"""POST /v1/chat/completions/derender and /v1/completions/derender, as vLLM 0.33 answers them
(entrypoints/scale_out/derender/): what /inference/v1/generate gave for a rendered request
(output_mode "tokens") in, the chat or completion response out, through mmprep's own
derender pipeline (app/mmprep/derender: the detokenizer, the stop rules, the server's reasoning and
tool-call parsers), so the answer is the one mmprep's /v1/chat/completions gives for the same
ids.

Two forms on each route, told apart by `stream`, as vLLM's: the whole answer
(`generate_response`, or for completions `generate_responses`, one per prompt) and one
streamed chunk (`generate_chunk` and the `stream_state` the previous call answered). A stream
keeps no state here: the client carries it, and each call replays the chunks before it
through a fresh pipeline (the pipeline gives the same deltas for the same chunks), then
derenders its own. The request the answer belongs to (`chat_request`, `completion_request`:
the body sent to the render route) says the answer's options: tools, stop strings,
skip_special_tokens, max_tokens, logprobs.

Each answer has exactly the top-level fields of vLLM 0.33's response model for it, in its
order (CHAT_COMPLETION, CHAT_CHUNK, TEXT_COMPLETION, TEXT_CHUNK), null where vLLM writes null;
the ones vLLM takes from the generate answer (`metrics`, `prompt_logprobs`,
`kv_transfer_params`, `prompt_token_ids` with the request's `return_token_ids`) are taken as
its derender takes them.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ...core.errors import ServiceError
from ...derender import Delta, Derenderer, OutputOptions
from ...interface.engine import EngineOutput
from ...interface.prepared import SamplingParams
from ...model import load_model_folder
from ...render.prompts import check_ids, decode_prompt
from ...service import Service
from ...vllm.response import BadAnswer, choice_outputs
from ..common.chat_answers import Answer, text_choice, usage
from ..common.chat_protocol import parse_chat_request
from ..common.served_model import check_model, served_model
from ..common.validation import validated

TokenId = Annotated[int, Field(ge=0)]

# vLLM 0.33's response models' top-level fields, in their order (ChatCompletionResponse,
# ChatCompletionStreamResponse, CompletionResponse, CompletionStreamResponse in
# entrypoints/openai/*/protocol.py): a derender answer has these, the unset ones null.
CHAT_COMPLETION = (
    "id",
    "object",
    "created",
    "model",
    "choices",
    "service_tier",
    "system_fingerprint",
    "usage",
    "prompt_logprobs",
    "prompt_token_ids",
    "prompt_text",
    "kv_transfer_params",
    "ec_transfer_params",
    "metrics",
)
CHAT_CHUNK = (
    "id",
    "object",
    "created",
    "model",
    "choices",
    "usage",
    "system_fingerprint",
    "prompt_token_ids",
    "prompt_text",
    "metrics",
    "kv_transfer_params",
)
TEXT_COMPLETION = (
    "id",
    "object",
    "created",
    "model",
    "choices",
    "service_tier",
    "system_fingerprint",
    "usage",
    "kv_transfer_params",
    "ec_transfer_params",
    "metrics",
)
TEXT_CHUNK = (
    "id",
    "object",
    "created",
    "model",
    "choices",
    "usage",
    "system_fingerprint",
    "metrics",
    "kv_transfer_params",
)


def shaped(fields: tuple[str, ...], **values: Any) -> dict:
    """An answer with exactly `fields`, in their order: the ones not given are null."""
    unknown = set(values) - set(fields)
    if unknown:
        raise ValueError(f"not fields of this answer: {sorted(unknown)}")
    return {name: values.get(name) for name in fields}


class Logprob(BaseModel):
    """vLLM's Logprob (vllm/logprobs.py), a prompt token's entry in `prompt_logprobs`."""

    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


class SpeculativeDecodingMetrics(BaseModel):
    """vLLM 0.33's SpeculativeDecodingMetrics (entrypoints/generate/base/protocol.py)."""

    model_config = ConfigDict(extra="allow")

    mean_acceptance_length: float
    draft_acceptance_rate: float
    acceptance_histogram: list[int]
    num_spec_steps: int
    num_accepted_draft_tokens: int
    num_draft_tokens: int
    num_spec_tokens: int
    per_step_accepted: list[int] | None = None
    per_step_drafted: list[int] | None = None


class PerRequestMetrics(BaseModel):
    """vLLM 0.33's PerRequestMetrics: a generate answer's timings, passed on as its derender
    passes them (every field, the unset ones null)."""

    model_config = ConfigDict(extra="allow")

    time_to_first_token_ms: float | None = None
    generation_time_ms: float | None = None
    queue_time_ms: float | None = None
    mean_itl_ms: float | None = None
    tokens_per_second: float | None = None
    speculative_decoding: SpeculativeDecodingMetrics | None = None


class GenerateChoice(BaseModel):
    model_config = ConfigDict(extra="allow")

    index: int = 0
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    token_ids: list[TokenId] | None = None
    logprobs: dict[str, Any] | None = None


class GenerateResponse(BaseModel):
    """vLLM's GenerateTokensResponse (or a stream's chunk of one), the fields read here."""

    model_config = ConfigDict(extra="allow")

    request_id: str = ""
    output_mode: Literal["tokens"] = "tokens"
    choices: list[GenerateChoice]
    prompt_token_ids: list[TokenId] | None = None
    prompt_logprobs: list[dict[int, Logprob] | None] | None = None
    usage: dict[str, Any] | None = None
    metrics: PerRequestMetrics | None = None
    kv_transfer_params: dict[str, Any] | None = None

    def dumped(self, name: str) -> Any:
        """A field as vLLM's answer writes it (JSON: a prompt logprob's key is a string)."""
        return self.model_dump(mode="json", include={name})[name]


class StreamState(BaseModel):
    """vLLM's DerenderStreamState, the fields mmprep's replay uses (the others are vLLM's
    incremental-detokenizer window, carried back unchanged)."""

    model_config = ConfigDict(extra="allow")

    role_sent: bool = False
    output_token_ids: list[int] = Field(default_factory=list)
    output_chunk_lens: list[int] = Field(default_factory=list)
    tools_streamed: bool = False
    last_tool_call_ids: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _lengths_add_up(self) -> StreamState:
        if any(length <= 0 for length in self.output_chunk_lens):
            raise ValueError("output_chunk_lens must be positive")
        total, count = sum(self.output_chunk_lens), len(self.output_token_ids)
        if total != count:
            raise ValueError(
                f"output_chunk_lens must sum to len(output_token_ids) (got sum={total}, "
                f"len(output_token_ids)={count})"
            )
        return self


class _Common(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    prompt_token_ids: list[TokenId] | None = None


class ChatDerender(_Common):
    stream: Literal[False] = False
    generate_response: GenerateResponse
    prompt_tokens: int | None = None
    chat_request: dict[str, Any] | None = None


class ChatDerenderChunk(_Common):
    stream: Literal[True]
    generate_chunk: GenerateResponse
    stream_state: StreamState | None = None
    prompt_tokens: int | None = None
    chat_request: dict[str, Any] | None = None


class CompletionDerender(_Common):
    stream: Literal[False] = False
    generate_responses: list[GenerateResponse]
    prompt_tokens: list[int] | None = None
    prompt_token_ids: list[list[TokenId] | None] | None = None  # type: ignore[assignment]
    completion_request: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _one_per_response(self) -> CompletionDerender:
        count = len(self.generate_responses)
        for name in ("prompt_tokens", "prompt_token_ids"):
            given = getattr(self, name)
            if given is not None and len(given) != count:
                raise ValueError(
                    f"{name} length ({len(given)}) must equal generate_responses length ({count})"
                )
        return self


class CompletionDerenderChunk(_Common):
    stream: Literal[True]
    generate_chunk: GenerateResponse
    stream_state: StreamState | None = None
    prompt_tokens: int | None = None
    completion_request: dict[str, Any] | None = None


_STREAM_STOP_STRINGS = (
    "stop strings are not supported by streaming derender because text already sent cannot be cut. "
    "Use non-streaming derender or output_mode=text on /inference/v1/generate which holds stop strings back."
)
_NEEDS_CHAT_REQUEST = (
    "chat_request is required when a tool or reasoning parser is configured because plain "
    "detokenization would leak raw parser markup into content."
)


# -- the routes -------------------------------------------------------------------------------


async def derender_chat(service: Service, document: Any, http, cancel) -> dict:
    if _streamed(document, "generate_response"):
        chunk = validated(ChatDerenderChunk, document, "a streamed chat derender request")
        return _chat_chunk(service, chunk)
    request = validated(ChatDerender, document, "a chat derender request")
    check_model(service, request.model)
    if _has_parser(service) and request.chat_request is None:
        raise ServiceError(_NEEDS_CHAT_REQUEST, "invalid_request", "chat_request")
    answer = request.generate_response
    _check_lengths(service, answer, request.prompt_token_ids)
    prompt_ids = request.prompt_token_ids or answer.prompt_token_ids or []
    choices = []
    for choice in answer.choices:
        token_ids, logprobs = _outputs(service, choice, "generate_response")
        steps = _Steps(service, request.chat_request, prompt_ids, request.prompt_tokens or 0, chat=True)
        whole = Answer(steps.derenderer.reasoning, steps.derenderer.logprobs)
        whole.add(
            steps.feed(
                EngineOutput(token_ids=token_ids, logprobs=logprobs, finish_reason=_finish(choice) or "stop")
            )
        )
        whole.add(steps.derenderer.finish())
        choices.append(
            {
                "index": choice.index,
                "message": whole.message(),
                "logprobs": None if whole.logprobs is None else {"content": whole.logprobs},
                "finish_reason": steps.finish_reason(),
                "stop_reason": steps.stop_reason(choice.stop_reason),
            }
        )
    return shaped(
        CHAT_COMPLETION,
        id=answer.request_id,
        object="chat.completion",
        created=int(time.time()),
        model=served_model(service, request.model),
        choices=choices,
        usage=usage(request.prompt_tokens or 0, _completion_tokens([answer])),
        prompt_logprobs=answer.dumped("prompt_logprobs"),
        prompt_token_ids=answer.prompt_token_ids if _returns_token_ids(request.chat_request) else None,
        kv_transfer_params=answer.kv_transfer_params,
        metrics=answer.dumped("metrics"),
    )


async def derender_completion(service: Service, document: Any, http, cancel) -> dict:
    if _streamed(document, "generate_responses"):
        chunk = validated(CompletionDerenderChunk, document, "a streamed completion derender request")
        return _completion_chunk(service, chunk)
    request = validated(CompletionDerender, document, "a completion derender request")
    check_model(service, request.model)
    if not request.generate_responses:
        raise ServiceError("generate_responses must not be empty", "invalid_request", "generate_responses")
    choices: list[dict] = []
    prompt_total = 0
    for number, answer in enumerate(request.generate_responses):
        prompt_ids = (request.prompt_token_ids or [None] * (number + 1))[number]
        _check_lengths(service, answer, prompt_ids)
        prompt_tokens = request.prompt_tokens[number] if request.prompt_tokens is not None else 0
        prompt_total += prompt_tokens
        for choice in answer.choices:
            token_ids, logprobs = _outputs(service, choice, f"generate_responses[{number}]")
            steps = _Steps(service, request.completion_request, prompt_ids or [], prompt_tokens, chat=False)
            text = steps.feed(
                EngineOutput(token_ids=token_ids, logprobs=logprobs, finish_reason=_finish(choice) or "stop")
            )
            rest = steps.derenderer.finish()
            choices.append(
                text_choice(
                    len(choices),
                    text.content + rest.content,
                    None,
                    steps.finish_reason(),
                    steps.stop_reason(choice.stop_reason),
                )
            )
    first, *others = request.generate_responses
    return shaped(
        TEXT_COMPLETION,
        id=first.request_id,
        object="text_completion",
        created=int(time.time()),
        model=served_model(service, request.model),
        choices=choices,
        usage=usage(prompt_total, _completion_tokens(request.generate_responses)),
        # as vLLM's: none where the answers' differ; one prompt's metrics, not several merged
        kv_transfer_params=None
        if any(other.kv_transfer_params != first.kv_transfer_params for other in others)
        else first.kv_transfer_params,
        metrics=None if others else first.dumped("metrics"),
    )


# -- a stream's chunk -------------------------------------------------------------------------


def _chat_chunk(service: Service, request: ChatDerenderChunk) -> dict:
    check_model(service, request.model)
    if request.chat_request is not None and request.chat_request.get("stop"):
        raise ServiceError(_STREAM_STOP_STRINGS, "invalid_request", "chat_request.stop")
    if _has_parser(service) and request.chat_request is None:
        raise ServiceError(_NEEDS_CHAT_REQUEST, "invalid_request", "chat_request")
    if _has_parser(service) and request.prompt_token_ids is None:
        raise ServiceError(
            "prompt_token_ids is required when a tool or reasoning parser is configured. Without it "
            "parse_delta cannot tell whether the prompt left reasoning open (e.g. a chat template that "
            "pre-opens <think>) and would misclassify reasoning content as plain content.",
            "invalid_request",
            "prompt_token_ids",
        )
    delta, state, choice, steps = _replayed(service, request, request.chat_request, chat=True)
    fields: dict[str, Any] = {}
    if not state.role_sent:
        fields["role"] = "assistant"
        state.role_sent = True
    if delta.reasoning:
        fields["reasoning"] = fields["reasoning_content"] = delta.reasoning
    if delta.content:
        fields["content"] = delta.content
    if delta.tool_calls:
        fields["tool_calls"] = _tool_call_deltas(delta, state)
    finish = None
    if choice is not None and choice.finish_reason is not None:
        finish = steps.finish_reason()
        finish = "tool_calls" if state.tools_streamed and finish == "stop" else finish
    generated = request.generate_chunk
    body = shaped(
        CHAT_CHUNK,
        id=generated.request_id,
        object="chat.completion.chunk",
        created=int(time.time()),
        model=served_model(service, request.model),
        choices=[]
        if choice is None
        else [
            {
                "index": choice.index,
                "delta": fields,
                "logprobs": {"content": delta.logprobs} if delta.logprobs else None,
                "finish_reason": finish,
                "stop_reason": steps.stop_reason(choice.stop_reason) if finish else None,
            }
        ],
        usage=_chunk_usage(request),
        prompt_token_ids=generated.prompt_token_ids if _returns_token_ids(request.chat_request) else None,
        metrics=generated.dumped("metrics"),
    )
    return {"chunk": body, "stream_state": state.model_dump()}


def _completion_chunk(service: Service, request: CompletionDerenderChunk) -> dict:
    check_model(service, request.model)
    if request.completion_request is not None and request.completion_request.get("stop"):
        raise ServiceError(_STREAM_STOP_STRINGS, "invalid_request", "completion_request.stop")
    delta, state, choice, steps = _replayed(service, request, request.completion_request, chat=False)
    finish = steps.finish_reason() if choice and choice.finish_reason else None
    body = shaped(
        TEXT_CHUNK,
        id=request.generate_chunk.request_id,
        object="text_completion",
        created=int(time.time()),
        model=served_model(service, request.model),
        choices=[]
        if choice is None
        else [
            text_choice(
                choice.index,
                delta.content,
                None,
                finish,
                steps.stop_reason(choice.stop_reason) if finish else None,
            )
        ],
        usage=_chunk_usage(request),
        metrics=request.generate_chunk.dumped("metrics"),
    )
    return {"chunk": body, "stream_state": state.model_dump()}


def _replayed(service: Service, request, given: dict | None, chat: bool):
    """This chunk's delta after the chunks before it are replayed, the state to carry on,
    the chunk's choice (None on a usage-only chunk) and the steps that made them."""
    chunk = request.generate_chunk
    if len(chunk.choices) > 1:
        raise ServiceError(
            f"derender_chat_stream expects at most one choice per chunk (got {len(chunk.choices)}).",
            "invalid_request",
            "generate_chunk.choices",
        )
    state = request.stream_state or StreamState()
    prompt_ids = request.prompt_token_ids or chunk.prompt_token_ids or []
    prior = len(state.output_token_ids)
    choice = chunk.choices[0] if chunk.choices else None
    new = len(choice.token_ids or ()) if choice else 0
    limit = service.settings.max_model_len
    if limit is not None and len(prompt_ids) + prior + new > limit:
        raise ServiceError(
            f"prompt_token_ids length ({len(prompt_ids)}) plus output_token_ids length ({prior}) plus delta "
            f"({new}) exceeds max_model_len ({limit}).",
            "invalid_request",
            "generate_chunk",
        )
    steps = _Steps(service, given, prompt_ids, request.prompt_tokens or 0, chat=chat)
    start = 0
    for length in state.output_chunk_lens:  # what the client was already sent
        steps.feed(EngineOutput(token_ids=tuple(state.output_token_ids[start : start + length])))
        start += length
    delta = Delta()
    if choice is not None:
        token_ids, logprobs = _outputs(service, choice, "generate_chunk", allow_empty=True)
        delta = steps.feed(
            EngineOutput(token_ids=token_ids, logprobs=logprobs, finish_reason=_finish(choice))
        )
        if token_ids:
            state.output_token_ids += list(token_ids)
            state.output_chunk_lens.append(len(token_ids))
    if choice is not None and choice.finish_reason is not None:
        rest = steps.derenderer.finish()
        delta = Delta(
            content=delta.content + rest.content,
            reasoning=delta.reasoning + rest.reasoning,
            tool_calls=delta.tool_calls + rest.tool_calls,
            logprobs=delta.logprobs,
        )
    return delta, state, choice, steps


def _tool_call_deltas(delta: Delta, state: StreamState) -> list[dict]:
    """The chunk's tool-call deltas in OpenAI's stream shape, each call's first with its id
    (kept in the state: a replay makes new ones) and name."""
    out: dict[int, dict] = {}
    for call in delta.tool_calls:
        entry = out.setdefault(call.index, {"index": call.index, "function": {}})
        if call.id is not None:
            while len(state.last_tool_call_ids) <= call.index:
                state.last_tool_call_ids.append(call.id)
            entry.update(id=state.last_tool_call_ids[call.index], type="function")
            entry["function"]["name"] = call.name
            entry["function"].setdefault("arguments", "")
        if call.arguments:
            entry["function"]["arguments"] = entry["function"].get("arguments", "") + call.arguments
    state.tools_streamed = state.tools_streamed or bool(out)
    return list(out.values())


def _chunk_usage(request) -> dict | None:
    if request.generate_chunk.usage is None:
        return None
    state = request.stream_state or StreamState()
    done = len(state.output_token_ids) + sum(len(c.token_ids or ()) for c in request.generate_chunk.choices)
    return usage(request.prompt_tokens or 0, done)


# -- the pipeline for one choice --------------------------------------------------------------


class _Steps:
    """mmprep's derender pipeline for one choice, set up from the request the answer
    belongs to (as the render route read it) and the prompt's ids."""

    def __init__(
        self, service: Service, given: dict | None, prompt_ids: list[int], prompt_tokens: int, chat: bool
    ):
        sampling, options = _answer_options(service, given, chat)
        prompt_text = decode_prompt(_folder(service), prompt_ids) if prompt_ids else ""
        setup = service.derendering if chat else service.derendering.plain()
        self.derenderer: Derenderer = setup.start(sampling, options, prompt_text, prompt_tokens)

    def feed(self, output: EngineOutput) -> Delta:
        return self.derenderer.feed(output)

    def finish_reason(self) -> str:
        """A stop the pipeline found, else the engine's; "tool_calls" for a stop with calls."""
        return self.derenderer.finish_reason

    def stop_reason(self, engine: int | str | None) -> int | str | None:
        """The stop the pipeline found (None: EOS), else what the engine said stopped it."""
        return self.derenderer.stop_reason if self.derenderer.stopped else engine


def _answer_options(service: Service, given: dict | None, chat: bool) -> tuple[SamplingParams, OutputOptions]:
    """The sampling and output options of the request the answer belongs to; none given:
    vLLM's defaults."""
    if given is None:
        return SamplingParams(), OutputOptions()
    name = "chat_request" if chat else "completion_request"
    body = {**given, "model": served_model(service, given.get("model"))}
    if not chat:  # the completion's answer fields, read as a chat's (no messages to render)
        body["messages"] = [{"role": "user", "content": ""}]
        if isinstance(body.get("logprobs"), int) and not isinstance(body.get("logprobs"), bool):
            body["top_logprobs"], body["logprobs"] = body["logprobs"], True
    try:
        request = parse_chat_request(body)
    except ServiceError as error:
        param = f"{name}.{error.param}" if error.param else name
        raise ServiceError(f"{name}: {error.message}", "invalid_request", param) from None
    return request.sampling_params(), request.output_options()


def _finish(choice: GenerateChoice):
    """The engine's finish reason as the pipeline takes it (None: the stream goes on)."""
    if choice.finish_reason is None:
        return None
    return "length" if choice.finish_reason == "length" else "stop"


def _returns_token_ids(given: dict | None) -> bool:
    """The chat request's `return_token_ids` (vLLM's: the prompt's ids in the answer)."""
    asked = (given or {}).get("return_token_ids")
    if asked is not None and not isinstance(asked, bool):
        raise ServiceError(
            "chat_request.return_token_ids: must be a boolean",
            "invalid_request",
            "chat_request.return_token_ids",
        )
    return bool(asked)


def _streamed(document: Any, batch_field: str) -> bool:
    """Whether the body is the streamed form (stream true). The batch form's answer with
    stream true is refused, as vLLM refuses it, naming `stream`."""
    if not isinstance(document, dict) or document.get("stream") is not True:
        return False
    if batch_field in document and "generate_chunk" not in document:
        raise ServiceError(
            f"stream: the whole answer ({batch_field}) is derendered with stream false; a stream's chunk "
            "(generate_chunk) with stream true",
            "invalid_request",
            "stream",
        )
    return True


def _has_parser(service: Service) -> bool:
    derendering = service.derendering
    return derendering.reasoning_parser is not None or derendering.tool_call_parser is not None


def _folder(service: Service):
    return load_model_folder(str(service.settings.model), service.settings.processor)


def _outputs(service: Service, choice: GenerateChoice, where: str, allow_empty: bool = False):
    if not choice.token_ids and not allow_empty:
        raise ServiceError(
            f"choice {choice.index} has empty or null token_ids",
            "invalid_request",
            f"{where}.choices.token_ids",
        )
    check_ids(_folder(service), choice.token_ids or [], f"{where}.choices[{choice.index}].token_ids")
    try:
        return choice_outputs(choice.model_dump(), 20)
    except BadAnswer as error:
        raise ServiceError(f"{where}: {error}", "invalid_request", where) from None


def _check_lengths(service: Service, answer: GenerateResponse, prompt_ids: list[int] | None) -> None:
    limit = service.settings.max_model_len
    if limit is None:
        return
    for choice in answer.choices:
        if choice.token_ids and len(choice.token_ids) > limit:
            raise ServiceError(
                f"token_ids length ({len(choice.token_ids)}) in choice {choice.index} exceeds "
                f"max_model_len ({limit}).",
                "invalid_request",
                "token_ids",
            )
    if prompt_ids is not None and len(prompt_ids) > limit:
        raise ServiceError(
            f"prompt_token_ids length ({len(prompt_ids)}) exceeds max_model_len ({limit}).",
            "invalid_request",
            "prompt_token_ids",
        )


def _completion_tokens(answers: list[GenerateResponse]) -> int:
    """As vLLM counts them: every id the engine gave, the stop token too."""
    return sum(len(choice.token_ids or ()) for answer in answers for choice in answer.choices)
