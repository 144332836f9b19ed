"""`mmprep worker`: one engine behind HTTP, for a frontend that runs `--engine workers`.

    POST /generate   a safetensors tensor request (wire.py) -> one JSON delta a line
    GET  /health     200 when the engine is ready, 503 until then
    GET  /metrics    Prometheus: requests by status, requests in flight

The engine's first output comes before the 200, so a request it refuses at once is an
HTTP error with the engine's status; a failure after that is an error line. A frontend
that disconnects (its client left) cancels the engine's generation.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.requests import ClientDisconnect

from ..core.disconnect import ClientGone, close_shielded, until_disconnect
from ..core.errors import ServiceError, error_reply
from ..core.lifespan import lifespan_of
from ..core.logging import request_id_var
from ..interface.engine import Engine, EngineError, EngineHTTPError, EngineOutput, check_fields, first_output
from ..interface.prepared import PreparedRequest
from .wire import DELTA_CONTENT_TYPE, WireError, decode_request, encode_error, encode_output

log = logging.getLogger("mmprep.worker")


class WorkerServer:
    def __init__(self, engine: Engine, max_request_bytes: int):
        self.engine = engine
        self.max_request_bytes = max_request_bytes
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "mmprep_worker_requests", "Generate requests answered", ["status"], registry=self.registry
        )
        self.in_flight = Gauge(
            "mmprep_worker_requests_in_flight", "Generate requests being worked on", registry=self.registry
        )

    async def generate(self, http: Request) -> Response:
        if not self.engine.ready():  # a 503 sends the frontend to another worker
            return self._answered(_reply(ServiceError("the engine is not ready", "not_ready", status=503)))
        self.in_flight.inc()
        streaming = False
        try:
            request = decode_request(await read_body(http, self.max_request_bytes))
            request_id_var.set(request.request_id)  # the frontend's id, on the worker's log lines too
            check_fields(self.engine, request.extra)
            check_logprobs(self.engine, request)
            outputs = self.engine.generate(request)
            first = await until_disconnect(http, first_output(outputs))
            streaming = True  # from here the stream counts itself out
            return StreamingResponse(self._lines(first, outputs), media_type=DELTA_CONTENT_TYPE)
        except (ClientGone, ClientDisconnect):
            return self._answered(Response(status_code=499))
        except WireError as error:
            return self._answered(
                _reply(ServiceError(f"not a tensor request: {error}", "invalid_tensor_request"))
            )
        except Exception as error:  # a user's engine may raise anything; _engine_failure logs it
            return self._answered(_reply(_engine_failure(error)))
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
            output: EngineOutput | None = first
            while output is not None:
                yield encode_output(output)
                output = await anext(outputs, None)
        except Exception as error:  # as above: the client gets an error line, the log the trace
            status = "500"
            yield encode_error(_engine_failure(error))
        except BaseException:  # cancelled: the frontend went away
            status = "499"
            log.info("the frontend went away; generation stopped")
            raise
        finally:
            await close_shielded(outputs)
            self.requests.labels(status).inc()
            self.in_flight.dec()


def check_logprobs(engine: Engine, request: PreparedRequest) -> None:
    """logprobs need an engine that says it gives them (`gives_logprobs = True`): one that
    says it cannot, or a token engine (the request has a prompt) that does not say, gets a
    400 naming the field rather than an answer without them. The frontend's engine for
    workers leaves this to the worker, whose engine it is."""
    if not request.sampling.logprobs:
        return
    gives = engine.gives_logprobs
    if gives is False or (gives is None and request.prompt is not None):
        raise EngineHTTPError(
            "this model's engine does not give log-probabilities: ask without logprobs",
            400,
            "unsupported_field",
            "logprobs",
        )


def _engine_failure(error: Exception) -> ServiceError:
    """The engine's error as the frontend should see it: its own, if it is meant for a
    client; anything else a user's engine raised is its bug: logged with the traceback."""
    if isinstance(error, ServiceError):
        return error
    log.error("the engine failed", exc_info=error)
    return EngineError(f"{type(error).__name__}: {error}")


def _reply(error: ServiceError) -> JSONResponse:
    status, body = error_reply(error)
    return JSONResponse(body, status_code=status)


async def read_body(http: Request, limit: int) -> bytearray:
    """The body, read once into one buffer of the declared size: the only copy the worker
    makes of the tensors (decode_request takes views of it)."""
    declared = http.headers.get("content-length")
    if declared is None or not declared.isdigit():
        raise ServiceError("send the tensor request with a Content-Length", "length_required", status=411)
    size = int(declared)
    if size > limit:
        raise ServiceError(
            f"the request has {size} bytes, more than the {limit} this worker takes",
            "request_too_large",
            status=413,
        )
    body = bytearray(size)
    filled = 0
    with memoryview(body) as view:
        async for chunk in http.stream():
            if filled + len(chunk) > size:
                raise ServiceError(
                    f"the body is longer than its Content-Length of {size}", "invalid_tensor_request"
                )
            view[filled : filled + len(chunk)] = chunk
            filled += len(chunk)
    if filled != size:
        raise ServiceError(f"the body has {filled} of the {size} bytes it declared", "invalid_tensor_request")
    return body


def create_worker_app(engine: Engine, max_request_bytes: int = 4 * 1024**3) -> FastAPI:
    server = WorkerServer(engine, max_request_bytes)

    app = FastAPI(title="mmprep worker", lifespan=lifespan_of(engine))
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
