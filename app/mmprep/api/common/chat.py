"""The chat pipeline (POST /v1/chat/completions's): one request, from its body to its answer,
streamed or not.

Admission, preprocessing, the engine's first output, then either a JSON completion or an
SSE stream. Preprocessing finishes (and the engine has answered once) before any status
goes out, so bad media is a JSON 400 and an engine that refuses at once is an HTTP error,
not a broken stream. A client that leaves stops all work done for it.

The other client APIs (/v1/messages, /v1/responses) are this same pipeline behind a
`ClientApi`: it turns their body into a chat request, the chat.completion into their
answer, the stream of chat.completion.chunks into their events, errors into their shape.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import Any, Protocol

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.requests import ClientDisconnect

from ...core.disconnect import ClientGone, close_shielded, until_disconnect
from ...core.errors import ServiceError, as_service_error
from ...core.logging import request_id_var
from ...derender import Delta, Derenderer
from ...interface.engine import EngineHTTPError, EngineOutput, check_fields, first_output
from ...interface.prepared import PreparedRequest
from ...preprocess import Timing
from ...service import Service, Slot
from ...transport.body_limit import BODY_REFUSED
from ...transport.connections import REQUEST_ID
from ...transport.json_body import read_json_body
from ...vllm.request import random_request_id
from .chat_answers import SSE_DONE, Answer, CompletionBuilder, sse, usage
from .chat_protocol import READ_WITH_MODEL, ChatCompletionRequest, NamedToolChoice, parse_chat_request
from .errors import client_gone, refuse

log = logging.getLogger("mmprep.api")


class ClientApi(Protocol):
    """A client API served through the chat pipeline: its request, answer, events and errors."""

    def chat_request(self, document: Any) -> ChatCompletionRequest:
        """The API's JSON body as the chat request it means, or a ServiceError naming its field."""
        ...

    def whole(self, completion: dict) -> dict:
        """The API's answer made of the whole chat.completion."""
        ...

    def events(self, chunks: AsyncIterator[dict | ServiceError]) -> AsyncIterator[str]:
        """The API's SSE events made of the chat.completion.chunks (a ServiceError: it failed)."""
        ...

    def error_body(self, failure: ServiceError) -> dict:
        """The API's error answer."""
        ...


class ChatApi:
    """OpenAI's chat completions: the pipeline's own shapes."""

    def chat_request(self, document: Any) -> ChatCompletionRequest:
        return parse_chat_request(document)

    def whole(self, completion: dict) -> dict:
        return completion

    async def events(self, chunks: AsyncIterator[dict | ServiceError]) -> AsyncIterator[str]:
        async for chunk in chunks:
            yield sse(chunk.body() if isinstance(chunk, ServiceError) else chunk)
        yield SSE_DONE

    def error_body(self, failure: ServiceError) -> dict:
        return failure.body()


CHAT = ChatApi()


async def chat_completion(service: Service, http: Request, api: ClientApi = CHAT) -> Response:
    return await admitted(
        service,
        http,
        api.chat_request,
        lambda body, request_id, slot: _answer(service, body, http, request_id, slot, api),
        api.error_body,
    )


async def admitted(
    service: Service,
    http: Request,
    parse: Callable[[Any], Any],
    answer: Callable[[Any, str, Slot], Awaitable[Response]],
    error_body: Callable[[ServiceError], dict] = ServiceError.body,
) -> Response:
    """A client route's frame (chat's, the other client APIs', completions'): the body read
    and typed (`parse`), an admission slot, the request id in the logs, then `answer`; a
    refusal in the API's shape (`error_body`), a departed client a 499. The slot is freed
    here unless a stream took it over."""
    try:
        body = parse(await read_json_body(http))
    except ServiceError as error:
        return refuse(service, error, error_body)
    except ClientDisconnect:
        if http.scope.get(BODY_REFUSED):  # the body limit cut it off, and answered 413
            return Response(status_code=413)
        return client_gone(service)
    try:
        slot = await service.admit(http)
    except ServiceError as error:
        return refuse(service, error, error_body)
    except ClientGone:  # it left while queued
        return client_gone(service)
    request_id = _request_id(http.headers.get("x-request-id"))
    request_id_var.set(request_id)
    http.scope[REQUEST_ID] = request_id  # for the connection's own log lines (a cut-off reader's)
    try:
        return await answer(body, request_id, slot)
    except ClientGone:
        return client_gone(service)
    except Exception as error:  # a ServiceError is the client's answer; anything else a logged 500
        return refuse(service, error, error_body)
    finally:
        if not slot.handed_over:
            slot.release()


async def _answer(
    service: Service, body: ChatCompletionRequest, http: Request, request_id: str, slot: Slot, api: ClientApi
) -> Response:
    service.check_request(body.model, body.n)
    extra = body.model_extra or {}
    if service.derendering.model is not None:
        extra = {name: value for name, value in extra.items() if name not in READ_WITH_MODEL}
    check_fields(service.engine, extra)
    check_logprobs(service, bool(body.answer.logprobs))
    check_tool_choice(service, body)
    cancel = threading.Event()
    prepared, timing = await until_disconnect(
        http, service.preprocessor.prepare(body.chat_input(), request_id, cancel), cancel
    )
    log.info("prepared", extra={"media": len(prepared.media), "server_timing": timing.header()})
    include_usage = service.settings.enable_force_include_usage or bool(
        body.stream_options and body.stream_options.include_usage
    )
    builder = CompletionBuilder(request_id, body.model, include_usage)
    derender = _derenderer(service, body, prepared)
    if not body.stream:
        answer = await until_disconnect(http, _complete(service, prepared, derender, builder, timing), cancel)
        service.record(200)
        return JSONResponse(api.whole(answer), headers=_headers(timing, request_id))
    # The engine's first output comes before the 200: an engine (a worker, an upstream)
    # that fails at once is an HTTP error response, not a broken stream.
    handed_over = time.perf_counter()
    outputs = service.engine.generate(prepared)
    first = await until_disconnect(http, first_output(outputs), cancel)
    timing.engine = time.perf_counter() - handed_over
    chunks = _stream(service, prepared, first, outputs, derender, builder, slot)
    events = api.events(chunks)
    slot.handed_over = True  # from here the stream owns the admission slot
    return ClosingStream(
        events,
        on_close=lambda: end_stream(service, slot, events, chunks, outputs),
        media_type="text/event-stream",
        headers=_headers(timing, request_id),
    )


def _request_id(sent: str | None) -> str:
    """The client's X-Request-Id, as vLLM takes it (benchmark clients match their ids to the
    server's logs by it), if it is a sensible one; else a new one."""
    if sent and len(sent) <= 128 and sent.isprintable() and sent.isascii():
        return sent
    return f"chatcmpl-{random_request_id()}"  # vLLM's form: 16 hex digits


def _headers(timing: Timing, request_id: str) -> dict[str, str]:
    return {"Server-Timing": timing.header(), "X-Request-Id": request_id}


def check_tool_choice(service: Service, body: ChatCompletionRequest) -> None:
    """With --model, mmprep parses the tool calls, so it answers for tool_choice as vLLM
    does: tools under "auto" (the default) need the parser flags, or the call markup would
    come back as text; "required" and a named function need structured outputs, which
    mmprep does not apply (vLLM does): refused rather than ignored."""
    if service.derendering.model is None or not body.answer.tools:
        return
    choice = body.answer.tool_choice
    if choice in (None, "auto") and service.derendering.tool_call_parser is None:
        raise ServiceError(
            '"auto" tool choice needs this server started with --enable-auto-tool-choice '
            "and --tool-call-parser",
            "unsupported_field",
            "tool_choice",
        )
    if choice == "required" or isinstance(choice, NamedToolChoice):
        raise ServiceError(
            'tool_choice "required" or a named function needs structured outputs, which this server does not '
            'apply: send "auto" (or "none")',
            "unsupported_field",
            "tool_choice",
        )


def check_logprobs(service: Service, asked: bool, passed_on: bool = True) -> None:
    """logprobs need an engine that gives them (`gives_logprobs = True`). One that says it
    cannot, or a token engine that does not say (mmprep would have none to send), gets a
    400 naming the field, not an answer with empty lists. A text engine that does not say
    is passed the field, as every other field it may read, unless `passed_on` is false
    (completions: mmprep writes their logprobs itself, from the token ids, with --model)."""
    if not asked:
        return
    gives = service.engine.gives_logprobs
    tokens = service.derendering.model is not None
    refused = (
        (gives is False or (gives is None and tokens)) if passed_on else (gives is not True or not tokens)
    )
    if refused:
        raise EngineHTTPError(
            "this model's engine does not give log-probabilities: ask without logprobs",
            400,
            "unsupported_field",
            "logprobs",
        )


def _derenderer(service: Service, body: ChatCompletionRequest, prepared: PreparedRequest) -> Derenderer:
    prompt = prepared.prompt
    return service.derendering.start(
        prepared.sampling,
        body.output_options(service.settings.return_tokens_as_token_ids),
        prompt_text=prompt.text if prompt is not None else "",
        prompt_tokens=len(prompt.token_ids) if prompt is not None else 0,
    )


async def _complete(
    service: Service,
    prepared: PreparedRequest,
    derender: Derenderer,
    builder: CompletionBuilder,
    timing: Timing,
) -> dict:
    answer = await whole_answer(service, prepared, derender, timing)
    return builder.answer(
        answer,
        derender.finish_reason,
        derender.stop_reason,
        usage(derender.prompt_tokens, derender.completion_tokens),
    )


async def whole_answer(
    service: Service, prepared: PreparedRequest, derender: Derenderer, timing: Timing
) -> Answer:
    """The engine's whole answer for `prepared`, put together from its steps."""
    answer = Answer(derender.reasoning, derender.logprobs)
    handed_over = time.perf_counter()
    # closed early on a stop: closing its generator is how an engine is told to stop
    async with aclosing(service.engine.generate(prepared)) as outputs:
        first = await first_output(outputs)
        timing.engine = time.perf_counter() - handed_over
        async for delta in answer_steps(first, outputs, derender):
            answer.add(delta)
    return answer


async def answer_steps(
    first: EngineOutput, outputs: AsyncIterator[EngineOutput], derender: Derenderer
) -> AsyncIterator[Delta]:
    """The answer's steps from the engine's outputs (`first` already read), each derendered;
    on a stop the engine is closed at once; last, what the derenderer held back."""
    output: EngineOutput | None = first
    while output is not None:
        delta = derender.feed(output)
        if delta:
            yield delta
        if derender.stopped:
            await close_shielded(outputs)  # the answer is over: the engine stops now
            break
        output = await anext(outputs, None)
    rest = derender.finish()
    if rest:
        yield rest


async def _stream(
    service: Service,
    prepared: PreparedRequest,
    first: EngineOutput,
    outputs: AsyncIterator[EngineOutput],
    derender: Derenderer,
    builder: CompletionBuilder,
    slot: Slot,
):
    """The chunks: a role chunk, the answer's chunks (content, reasoning, tool calls), a
    finish chunk, maybe usage. On a stop the engine is closed at once. A failure after the
    first chunk ends the stream with the ServiceError (an error event), not silence."""
    request_id_var.set(prepared.request_id)
    status = 200
    try:
        yield builder.chunk({"role": "assistant", "content": ""})
        async for delta in answer_steps(first, outputs, derender):
            for chunk in builder.delta_chunks(delta):
                yield chunk
        yield builder.chunk({}, derender.finish_reason, stop_reason=derender.stop_reason)
        if builder.include_usage:
            yield builder.usage_chunk(usage(derender.prompt_tokens, derender.completion_tokens))
    except asyncio.CancelledError:
        status = 499
        log.info("client went away mid-stream; generation stopped")
        raise
    except Exception as error:  # as in chat_completion, but the status is already out
        failure = as_service_error(error)
        status = 500
        service.metrics.errors.labels(failure.code).inc()
        yield failure
    finally:
        await close_shielded(outputs)
        service.record(status)
        slot.release()


async def end_stream(service: Service, slot: Slot, *generators) -> None:
    """However the response ended, even before its first byte (the client gone as the
    headers went out): the generators (the events, the chunks, the engine's outputs) closed
    in that order, the slot freed."""
    for generator in generators:
        await close_shielded(generator)  # runs a started stream's cleanup
    if slot.release():  # still held: the stream never ran
        service.record(499)


class ClosingStream(StreamingResponse):
    """A StreamingResponse that always runs `on_close` when it ends, however it ends:
    Starlette runs nothing of the body if the client is gone before the first byte."""

    def __init__(self, content, on_close, **kwargs):
        super().__init__(content, **kwargs)
        self._on_close = on_close

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._on_close()
