"""The chat-completions service: admission, preprocessing, the engine, and the
response, streamed or not. Routes stay thin; this is where a request is served."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from decoders.errors import DecodeCancelledError

from .api.errors import describe, error_body, error_response
from .api.responses import SSE_DONE, CompletionBuilder, sse, usage
from .api.schemas import ChatCompletionRequest
from .core.config import Settings
from .core.logging import request_id_var
from .decode_cache import DecodeCache
from .decode_pool import DecodePool
from .disconnect import ClientGone, close_shielded, until_disconnect
from .errors import RequestError
from .media.fetch import FetchLimits, MediaFetcher
from .media.network import NetworkPolicy
from .metrics import Metrics
from .prepared import PreparedRequest
from .preprocess import Preprocessor, Timing
from .workers import Engine, EngineOutput, build_engine
from .workers.base import first_output

log = logging.getLogger("mmprep.service")


class Service:
    def __init__(self, settings: Settings, engine: Engine | None = None):
        self.settings = settings
        self.metrics = Metrics()
        self.engine = engine or build_engine(settings)
        self.pool = DecodePool(settings.decode_workers, fixed_threads=settings.decode_threads)
        self.metrics.decodes_in_flight.set_function(lambda: self.pool.active)
        self.cache = None
        if settings.decode_cache_bytes:
            self.cache = DecodeCache(
                settings.decode_cache_bytes,
                on_lookup=lambda hit: self.metrics.decode_cache.labels("hit" if hit else "miss").inc(),
                retry_on=(asyncio.CancelledError, DecodeCancelledError),
            )
            self.metrics.decode_cache_bytes.set_function(lambda: self.cache.bytes)
        self.started = int(time.time())
        self.fetcher: MediaFetcher | None = None
        self.preprocessor: Preprocessor | None = None
        self._in_flight = 0

    async def start(self) -> None:
        s = self.settings
        limits = FetchLimits(
            max_bytes=s.max_fetch_bytes,
            connect_timeout=s.fetch_connect_timeout,
            read_timeout=s.fetch_read_timeout,
            max_redirects=s.max_redirects,
            allowed_local_paths=tuple(s.allowed_local_media_path),
        )
        policy = NetworkPolicy(s.allow_private_networks, tuple(s.allowed_media_domains))
        self.fetcher = MediaFetcher(limits, policy)
        self.preprocessor = Preprocessor(s, self.fetcher, self.pool, self.metrics, self.cache)
        await self.engine.start()

    async def stop(self) -> None:
        await self.engine.stop()
        if self.fetcher is not None:
            await self.fetcher.aclose()
        self.pool.shutdown()

    def ready(self) -> bool:
        return self.preprocessor is not None and self.engine.ready()

    # -- one request ------------------------------------------------------------------

    async def chat(self, body: ChatCompletionRequest, http: Request) -> Response:
        if self._in_flight >= self.settings.max_concurrent_requests:
            return self.refuse(
                503, f"the server is at its limit of {self.settings.max_concurrent_requests} requests in flight; retry shortly",
                "overloaded", headers={"Retry-After": "1"},
            )
        request_id = f"chatcmpl-{uuid.uuid4().hex}"
        request_id_var.set(request_id)
        slot = self._admit()
        try:
            self._check_request(body)
            cancel = threading.Event()
            prepared, timing = await until_disconnect(http, self.preprocessor.prepare(body, request_id, cancel), cancel)
            log.info("prepared", extra={"media": len(prepared.media), "server_timing": timing.header()})
            builder = CompletionBuilder(request_id, body.model, bool(body.stream_options and body.stream_options.include_usage))
            if body.stream:
                # The engine's first output comes before the 200: an engine (a worker, an
                # upstream) that fails at once is an HTTP error response, not a broken stream.
                handed_over = time.perf_counter()
                outputs = self.engine.generate(prepared)
                first = await until_disconnect(http, first_output(outputs), cancel)
                timing.engine = time.perf_counter() - handed_over
                headers = {"Server-Timing": timing.header(), "X-Request-Id": request_id}
                events = self._stream(prepared, first, outputs, builder, slot)
                slot.handed_over = True  # from here the stream owns the admission slot
                return _ClosingStream(
                    events, on_close=lambda: self._end_stream(events, outputs, slot),
                    media_type="text/event-stream", headers=headers,
                )
            answer = await until_disconnect(http, self._complete(prepared, builder, timing), cancel)
            self.metrics.requests.labels("200").inc()
            return JSONResponse(answer, headers={"Server-Timing": timing.header(), "X-Request-Id": request_id})
        except ClientGone:
            return self.client_gone()
        except Exception as error:  # noqa: BLE001 - describe() maps it; a 500 logs its traceback
            status, message, code, param = describe(error)
            _log_failure(status, message)
            return self.refuse(status, message, code, param)
        finally:
            if not slot.handed_over:
                slot.release()

    def _check_request(self, body: ChatCompletionRequest) -> None:
        if body.model not in self.settings.served_model_name:
            raise RequestError(
                f"the model {body.model!r} does not exist here; this server serves {', '.join(self.settings.served_model_name)}",
                "model_not_found", "model", status=404,
            )
        if body.n > 1:
            raise RequestError("n > 1 is not supported: send one request per choice", "unsupported_n", "n")

    async def _complete(self, prepared: PreparedRequest, builder: CompletionBuilder, timing: Timing) -> dict:
        text, last = [], None
        handed_over = time.perf_counter()
        async for output in self.engine.generate(prepared):
            if last is None:
                timing.engine = time.perf_counter() - handed_over
            text.append(output.text)
            last = output
        return builder.completion(
            "".join(text), last.finish_reason or "stop", usage(last.prompt_tokens or 0, last.completion_tokens or 0)
        )

    async def _stream(
        self, prepared: PreparedRequest, first: EngineOutput, outputs: AsyncIterator[EngineOutput],
        builder: CompletionBuilder, slot: _Slot,
    ):
        """SSE events: a role chunk, content chunks, a finish chunk, maybe usage, [DONE].
        A failure after the first event ends the stream with an error event, not silence."""
        request_id_var.set(prepared.request_id)
        status = "200"
        try:
            yield sse(builder.chunk({"role": "assistant", "content": ""}))
            output = last = first
            while output is not None:
                if output.text:
                    yield sse(builder.chunk({"content": output.text}))
                last = output
                output = await anext(outputs, None)
            yield sse(builder.chunk({}, last.finish_reason or "stop"))
            if builder.include_usage:
                yield sse(builder.usage_chunk(usage(last.prompt_tokens or 0, last.completion_tokens or 0)))
        except asyncio.CancelledError:
            status = "499"
            log.info("client went away mid-stream; generation stopped")
            raise
        except Exception as error:  # noqa: BLE001 - describe() maps it; a 500 logs its traceback
            failed, message, code, param = describe(error)
            _log_failure(failed, f"stream ended early: {message}")
            status = "500"
            self.metrics.errors.labels(code).inc()
            yield sse(error_body(message, code, param, "server_error"))
        finally:
            await close_shielded(outputs)
            self.metrics.requests.labels(status).inc()
            slot.release()
        yield SSE_DONE

    async def _end_stream(self, events, outputs, slot: _Slot) -> None:
        """However the response ended, even before its first byte (the client gone as the
        headers went out): the events generator and the engine are closed, the slot freed."""
        await events.aclose()  # runs _stream's cleanup if it started
        await close_shielded(outputs)
        if slot.release():  # still held: the stream never ran
            self.metrics.requests.labels("499").inc()

    def refuse(self, status: int, message: str, code: str, param=None, headers=None) -> JSONResponse:
        """An error answer, counted in /metrics and logged."""
        self.record_refusal(status, code, param)
        return error_response(status, message, code, param, headers)

    def record_refusal(self, status: int, code: str, param: str | None = None) -> None:
        self.metrics.requests.labels(str(status)).inc()
        self.metrics.errors.labels(code).inc()
        log.info("refused", extra={"status": status, "code": code, "param": param})

    def client_gone(self) -> Response:
        log.info("client went away; work for it stopped")
        self.metrics.requests.labels("499").inc()
        return Response(status_code=499)

    def _admit(self) -> _Slot:
        self._in_flight += 1
        self.metrics.in_flight.set(self._in_flight)
        return _Slot(self)

    def _release(self) -> None:
        self._in_flight -= 1
        self.metrics.in_flight.set(self._in_flight)


def _log_failure(status: int, message: str) -> None:
    """A 500 is a bug: its traceback is logged. Other server-side failures (no worker
    reachable, an upstream's error) are the deployment's state: one warning line."""
    if status == 500:
        log.exception("request failed")
    elif status > 500:
        log.warning("request failed: %s", message, extra={"status": status})


class _Slot:
    """One admitted request's place among the in-flight ones, given back exactly once."""

    def __init__(self, service: Service):
        self._service, self._held, self.handed_over = service, True, False

    def release(self) -> bool:
        """Give the place back; True if this call did it."""
        if not self._held:
            return False
        self._held = False
        self._service._release()
        return True


class _ClosingStream(StreamingResponse):
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
