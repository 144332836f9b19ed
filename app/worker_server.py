"""`mmprep worker`: one engine behind HTTP, for a frontend that runs `--engine workers`.

    POST /generate   a safetensors tensor request (app/workers/wire.py) -> one JSON delta a line
    GET  /health     200 when the engine is ready, 503 until then
    GET  /metrics    Prometheus: requests by status, requests in flight

The engine's first output comes before the 200, so a request it refuses at once is an
HTTP error with the engine's status; a failure after that is an error line. A frontend
that disconnects (its client left) cancels the engine's generation.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.requests import ClientDisconnect

from .api.errors import error_response
from .core.logging import request_id_var
from .disconnect import ClientGone, close_shielded, until_disconnect
from .workers.base import Engine, EngineHTTPError, EngineOutput, first_output
from .workers.wire import DELTA_CONTENT_TYPE, WireError, decode_request, encode_error, encode_output

log = logging.getLogger("mmprep.worker")


class BodyError(Exception):
    def __init__(self, status: int, message: str, code: str):
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


class WorkerServer:
    def __init__(self, engine: Engine, max_request_bytes: int):
        self.engine = engine
        self.max_request_bytes = max_request_bytes
        self.registry = CollectorRegistry()
        self.requests = Counter("mmprep_worker_requests", "Generate requests answered", ["status"], registry=self.registry)
        self.in_flight = Gauge("mmprep_worker_requests_in_flight", "Generate requests being worked on", registry=self.registry)

    async def generate(self, http: Request) -> Response:
        if not self.engine.ready():  # a 503 sends the frontend to another worker
            return self._answered(error_response(503, "the engine is not ready", "not_ready"))
        self.in_flight.inc()
        streaming = False
        try:
            request = decode_request(await read_body(http, self.max_request_bytes))
            request_id_var.set(request.request_id)  # the frontend's id, on the worker's log lines too
            outputs = self.engine.generate(request)
            first = await until_disconnect(http, first_output(outputs))
            streaming = True  # from here the stream counts itself out
            return StreamingResponse(self._lines(first, outputs), media_type=DELTA_CONTENT_TYPE)
        except (ClientGone, ClientDisconnect):
            return self._answered(Response(status_code=499))
        except BodyError as error:
            return self._answered(error_response(error.status, error.message, error.code))
        except WireError as error:
            return self._answered(error_response(400, f"not a tensor request: {error}", "invalid_tensor_request"))
        except Exception as error:  # noqa: BLE001 - a user's engine may raise anything; _engine_error logs it
            return self._answered(error_response(*_engine_error(error)))
        finally:
            if not streaming:
                self.in_flight.dec()

    def _answered(self, response: Response) -> Response:
        self.requests.labels(str(response.status_code)).inc()
        return response

    async def _lines(self, first: EngineOutput, outputs):
        """The outputs as JSON lines; an error after the first becomes an error line."""
        status = "200"
        try:
            output = first
            while output is not None:
                yield encode_output(output)
                output = await anext(outputs, None)
        except Exception as error:  # noqa: BLE001 - as above: the client gets an error line, the log the trace
            status = "500"
            yield encode_error(*_engine_error(error))
        except BaseException:  # cancelled: the frontend went away
            status = "499"
            log.info("the frontend went away; generation stopped")
            raise
        finally:
            await close_shielded(outputs)
            self.requests.labels(status).inc()
            self.in_flight.dec()


def _engine_error(error: Exception) -> tuple[int, str, str, str | None]:
    """(status, message, code, param) for the engine's error: its own, if it carries one."""
    if isinstance(error, EngineHTTPError):
        return error.status, error.message, error.code, error.param
    log.error("the engine failed", exc_info=error)
    return 500, f"the engine failed: {type(error).__name__}: {error}", "engine_error", None


async def read_body(http: Request, limit: int) -> bytearray:
    """The body, read once into one buffer of the declared size: the only copy the worker
    makes of the tensors (decode_request takes views of it)."""
    declared = http.headers.get("content-length")
    if declared is None or not declared.isdigit():
        raise BodyError(411, "send the tensor request with a Content-Length", "length_required")
    size = int(declared)
    if size > limit:
        raise BodyError(413, f"the request has {size} bytes, more than the {limit} this worker takes", "request_too_large")
    body = bytearray(size)
    filled = 0
    with memoryview(body) as view:
        async for chunk in http.stream():
            if filled + len(chunk) > size:
                raise BodyError(400, f"the body is longer than its Content-Length of {size}", "invalid_tensor_request")
            view[filled : filled + len(chunk)] = chunk
            filled += len(chunk)
    if filled != size:
        raise BodyError(400, f"the body has {filled} of the {size} bytes it declared", "invalid_tensor_request")
    return body


def create_worker_app(engine: Engine, max_request_bytes: int = 4 * 1024**3) -> FastAPI:
    server = WorkerServer(engine, max_request_bytes)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await engine.start()
        try:
            yield
        finally:
            await engine.stop()

    app = FastAPI(title="mmprep worker", lifespan=lifespan)
    app.state.server = server

    @app.post("/generate")
    async def generate(request: Request) -> Response:
        return await server.generate(request)

    @app.get("/health")
    async def health() -> Response:
        if engine.ready():
            return JSONResponse({"status": "ok"})
        return JSONResponse({"status": "not ready"}, status_code=503)

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(generate_latest(server.registry), media_type=CONTENT_TYPE_LATEST)

    return app
