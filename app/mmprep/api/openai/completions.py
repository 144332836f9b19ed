"""POST /v1/completions: OpenAI's legacy completions API as vLLM 0.33 serves it
(entrypoints/openai/completion/), through the chat route's pipeline pieces: admission
(chat.admitted), the engine, app/mmprep/derender (stops, token ids to text; no reasoning or
tool-call parser, as vLLM parses none on completions), disconnects and metrics.

The prompt is vLLM's (completions_render.prompt_forms): a string, a list of strings, token
ids or a list of id lists, one choice per prompt in the prompts' order. There is no chat
template: with --model a text prompt is tokenized as it is (the tokenizer's special tokens
added unless add_special_tokens is false) and token ids are taken as given, so a token
engine gets exactly the render route's ids; without --model a text prompt goes to a text
engine as text (the echo engine's account, an OpenAI upstream's own /v1/completions), and
token ids are refused (nothing could read them). The prompts are generated at once; a
stream sends the choices' chunks as they come, as vLLM's merges its prompts' generators.

`echo` puts the prompt's text before the answer (token ids: their text, as vLLM decodes
them); `logprobs` (an int) gives OpenAI's completions shape, tokens / token_logprobs /
top_logprobs (the sampled token and the best others, logprobs + 1 at most, as vLLM) /
text_offset, from engines that give logprobs. What vLLM has and mmprep does not do (beam
search, echo with logprobs, which needs the prompt's logprobs, suffix, prompt_embeds,
n or best_of above 1) is a 400 naming the field.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Coroutine, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from ...core.disconnect import close_shielded, until_disconnect
from ...core.errors import ServiceError, as_service_error
from ...derender import Derenderer, OutputOptions
from ...interface.engine import EngineOutput, check_fields, first_output
from ...interface.prepared import PreparedRequest, TokenPrompt
from ...model import load_model_folder
from ...preprocess import Timing
from ...render.prompts import decode_prompt
from ...render.renderer import check_prompt_length
from ...service import Service, Slot
from ...vllm.request import random_request_id
from ..common.chat import ClosingStream, admitted, answer_steps, check_logprobs, end_stream, whole_answer
from ..common.chat_answers import SSE_DONE, sse, text_choice, text_completion, usage
from ..common.chat_protocol import AnswerFields
from ..common.completion_protocol import (
    CompletionRenderRequest,
    check_refused,
    item_ids,
    prompt_forms,
    prompt_param,
)
from ..common.served_model import check_model, served_model
from ..common.validation import field_name, validated

T = TypeVar("T")


async def completion(service: Service, http: Request) -> Response:
    return await admitted(
        service,
        http,
        lambda document: validated(CompletionRenderRequest, document, "a completion request"),
        lambda body, request_id, slot: _answer(service, body, http, slot),
    )


@dataclass
class _Choice:
    """One prompt's generation: what the engine got, its derenderer, the text to echo."""

    prepared: PreparedRequest
    derender: Derenderer
    echo: str
    logprobs: int | None
    offset: int = 0  # text_offset of the next token (its logprobs)

    def usage(self) -> tuple[int, int]:
        return self.derender.prompt_tokens, self.derender.completion_tokens


async def _answer(service: Service, body: CompletionRenderRequest, http: Request, slot: Slot) -> Response:
    check_model(service, body.model)
    _check_request(service, body)
    extra, options = _answer_fields(service, body.model_extra or {})
    check_fields(service.engine, extra)
    # mmprep writes a completion's logprobs from the engine's token ids: no passing them on
    check_logprobs(service, body.logprobs is not None, passed_on=False)
    request_id = f"cmpl-{http.headers.get('x-request-id') or body.request_id or random_request_id()}"
    model = served_model(service, body.model)
    cancel = threading.Event()
    choices = await until_disconnect(
        http, asyncio.to_thread(_choices, service, body, extra, options, request_id)
    )
    timing = Timing()
    if not body.stream:
        answers = await until_disconnect(
            http,
            _all([whole_answer(service, c.prepared, c.derender, timing) for c in choices]),
            cancel,
        )
        service.record(200)
        whole = [
            text_choice(
                index,
                choice.echo + answer.text(),
                _logprobs(choice, answer.logprobs),
                choice.derender.finish_reason,
                choice.derender.stop_reason,
            )
            for index, (choice, answer) in enumerate(zip(choices, answers, strict=True))
        ]
        return JSONResponse(
            text_completion(request_id, model, int(time.time()), whole, _usage(choices)),
            headers={"X-Request-Id": request_id},
        )
    # Every prompt's first output before the 200: an engine that fails at once is an HTTP error.
    outputs = [service.engine.generate(choice.prepared) for choice in choices]
    try:
        firsts = await until_disconnect(http, _all([first_output(output) for output in outputs]), cancel)
    except BaseException:
        for generation in outputs:
            await close_shielded(generation)
        raise
    include_usage = service.settings.enable_force_include_usage or bool(
        body.stream_options and body.stream_options.include_usage
    )
    chunks = _stream(service, choices, firsts, outputs, request_id, model, include_usage, slot)
    slot.handed_over = True  # from here the stream owns the admission slot
    return ClosingStream(
        chunks,
        on_close=lambda: end_stream(service, slot, chunks, *outputs),
        media_type="text/event-stream",
        headers={"X-Request-Id": request_id},
    )


async def _all(works: list[Coroutine[Any, Any, T]]) -> list[T]:
    """Each work's result, run at once; on the first failure the others are cancelled and
    awaited (none still runs in an engine's generator when it is closed)."""
    tasks = [asyncio.ensure_future(work) for work in works]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def _check_request(service: Service, body: CompletionRenderRequest) -> None:
    """What mmprep refuses of a completion request, each a 400 naming the field."""
    check_refused(body)
    extra = body.model_extra or {}
    best_of = extra.get("best_of")
    if body.n > 1 or (best_of is not None and best_of != 1):
        field = "n" if body.n > 1 else "best_of"
        raise ServiceError(
            f"{field} above 1 is not supported: send one request per choice", "unsupported_n", field
        )
    if body.stream_options is not None and not body.stream:
        raise ServiceError(
            "Stream options can only be defined when `stream=True`.", "invalid_request", "stream_options"
        )
    if body.max_tokens is not None and body.min_tokens > body.max_tokens:
        raise ServiceError(
            f"min_tokens: {body.min_tokens} is more than max_tokens ({body.max_tokens})",
            "invalid_request",
            "min_tokens",
        )
    if body.echo and body.logprobs is not None:
        raise ServiceError(
            "echo with logprobs needs the prompt's log-probabilities, which this server's engines do "
            "not give: ask for one of them",
            "unsupported_field",
            "echo",
        )


# OpenAI's fields read here and not passed on: refused unless empty (_check_request), or
# changing nothing of the answer (user: the end user's id)
READ_HERE = frozenset({"best_of", "suffix", "prompt_embeds", "user"})


def _answer_fields(service: Service, extra: dict[str, Any]) -> tuple[dict[str, Any], OutputOptions]:
    """The client's other fields as an engine gets them, and the answer's text options
    (vLLM's skip_special_tokens, spaces_between_special_tokens, include_stop_str_in_output)."""
    extra = {name: value for name, value in extra.items() if name not in READ_HERE}
    try:
        answer = AnswerFields.model_validate(extra)
    except ValidationError as error:
        first = error.errors()[0]
        param = field_name(first["loc"])
        raise ServiceError(f"{param}: {first['msg']}", "invalid_request", param) from None
    tokens_as_ids = answer.return_tokens_as_token_ids
    options = OutputOptions(
        include_stop_str_in_output=answer.include_stop_str_in_output,
        skip_special_tokens=answer.skip_special_tokens,
        spaces_between_special_tokens=answer.spaces_between_special_tokens,
        return_tokens_as_token_ids=service.settings.return_tokens_as_token_ids
        if tokens_as_ids is None
        else tokens_as_ids,
    )
    if service.derendering.model is not None:  # mmprep applies them itself: not the engine's
        extra = {name: value for name, value in extra.items() if name not in AnswerFields.model_fields}
    return extra, options


def _choices(
    service: Service,
    body: CompletionRenderRequest,
    extra: dict[str, Any],
    options: OutputOptions,
    request_id: str,
) -> list[_Choice]:
    """A generation per prompt (its ids with --model), each with its own derenderer."""
    prompts = prompt_forms(body)
    folder = (
        load_model_folder(str(service.settings.model), service.settings.processor)
        if service.settings.model
        else None
    )
    plain = service.derendering.plain()  # a completion's text is parsed by no reasoning or tool parser
    sampling = body.sampling()
    out = []
    for index, given in enumerate(prompts):
        where = prompt_param(body, prompts, index)
        if folder is None:
            if not isinstance(given, str):
                raise ServiceError(
                    f"{where}: token id prompts need the model folder: start mmprep with --model",
                    "model_required",
                    where,
                )
            text, prompt = given, None
        else:
            ids = item_ids(folder, body, given, where)
            check_prompt_length(len(ids), service.settings.max_model_len, where)
            text = given if isinstance(given, str) else decode_prompt(folder, ids)
            prompt = TokenPrompt(tuple(ids), (), text)
        prepared = PreparedRequest(
            request_id=f"{request_id}-{index}",
            model=body.model or service.settings.served_model_name[0],
            messages=[],
            media=[],
            sampling=sampling,
            stream=bool(body.stream),
            extra=extra,
            prompt=prompt,
            completion=given if isinstance(given, str) else tuple(given),
        )
        tokens = len(prompt.token_ids) if prompt is not None else 0
        derender = plain.start(sampling, options, prompt_text=text, prompt_tokens=tokens)
        out.append(_Choice(prepared, derender, text if body.echo else "", body.logprobs))
    return out


async def _stream(
    service: Service,
    choices: list[_Choice],
    firsts: list[EngineOutput],
    outputs: Sequence[AsyncIterator[EngineOutput]],
    request_id: str,
    model: str,
    include_usage: bool,
    slot: Slot,
) -> AsyncIterator[str]:
    """The choices' chunks as their engines give them (vLLM's merge of the prompts'
    generators), each choice's echo first and its finish last, then the usage if asked, then
    [DONE]. A failure after the 200 is an error event, as chat's."""
    created = int(time.time())
    status = 200

    def chunk(choices_: list[dict], **fields) -> str:
        return sse({**text_completion(request_id, model, created, choices_), **fields})

    async def one(index: int) -> AsyncGenerator[str, None]:
        choice = choices[index]
        if choice.echo:
            yield chunk([text_choice(index, choice.echo, None, None, None)])
        async for delta in answer_steps(firsts[index], outputs[index], choice.derender):
            if delta.content or delta.logprobs:
                yield chunk(
                    [text_choice(index, delta.content, _logprobs(choice, delta.logprobs), None, None)]
                )
        finish = choice.derender
        yield chunk([text_choice(index, "", None, finish.finish_reason, finish.stop_reason)])

    try:
        async with aclosing(_merged([one(index) for index in range(len(choices))])) as merged:
            async for event in merged:
                yield event
        if include_usage:
            yield chunk([], usage=_usage(choices))
    except asyncio.CancelledError:
        status = 499
        raise
    except Exception as error:  # the status is already out: the failure is an error event
        failure = as_service_error(error)
        status = 500
        service.metrics.errors.labels(failure.code).inc()
        yield sse(failure.body())
    finally:
        for generation in outputs:
            await close_shielded(generation)
        service.record(status)
        slot.release()
    yield SSE_DONE


_ENDED = object()


async def _merged(streams: list[AsyncGenerator[str, None]]) -> AsyncGenerator[str, None]:
    """The streams' items as they come, each stream read by a task of its own; the first
    failure raised here. Closed early, the tasks are cancelled and awaited, so no stream is
    still running when its engine is closed."""
    queue: asyncio.Queue = asyncio.Queue()

    async def pump(stream: AsyncGenerator[str, None]) -> None:
        try:
            async with aclosing(stream) as items:
                async for item in items:
                    await queue.put(item)
            await queue.put(_ENDED)
        except Exception as error:  # handed to the reader, which raises it
            await queue.put(error)

    tasks = [asyncio.create_task(pump(stream)) for stream in streams]
    try:
        running = len(tasks)
        while running:
            item = await queue.get()
            if item is _ENDED:
                running -= 1
            elif isinstance(item, Exception):
                raise item
            else:
                yield item
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _logprobs(choice: _Choice, entries: list[dict] | None) -> dict | None:
    """Chat-shaped logprobs entries (app/mmprep/derender) in OpenAI's completions shape, as vLLM's
    _create_completion_logprobs writes them: each token, its logprob, the sampled token and
    the best others by their text (logprobs + 1 at most), each token's offset in the text."""
    if choice.logprobs is None or entries is None:
        return None
    out: dict[str, list] = {"text_offset": [], "token_logprobs": [], "tokens": [], "top_logprobs": []}
    for entry in entries:
        ranked = [(entry["token"], entry["logprob"])]
        ranked += [(other["token"], other["logprob"]) for other in entry["top_logprobs"]]
        top: dict[str, float] = {}
        for token, logprob in ranked:
            if token not in top and len(top) == choice.logprobs + 1:
                break
            top[token] = logprob
        out["tokens"].append(entry["token"])
        out["token_logprobs"].append(entry["logprob"])
        out["top_logprobs"].append(top)
        out["text_offset"].append(choice.offset)
        choice.offset += len(entry["token"])
    return out


def _usage(choices: list[_Choice]) -> dict:
    counts = [choice.usage() for choice in choices]
    return usage(sum(prompt for prompt, _ in counts), sum(made for _, made in counts))
