"""RemoteWorkersEngine: each prepared request goes to one of several `mmprep worker`
processes over HTTP, as a safetensors body (app/mmprep/workers/wire.py, beside the worker's
server); the worker's delta lines come back as EngineOutputs.

Routing: the healthy worker with the fewest requests in flight; among equals, the one used
least recently, so that a quiet frontend still spreads its requests. Every worker's
/health is probed every `probe_interval` seconds: a worker that fails a probe or a request
gets no more requests until a probe finds it healthy again.

Failover: a request whose worker cannot be reached (refused, reset, timed out, not ready)
before it sent any output goes to the next worker. Once output has started it cannot
move, and a failure raises EngineHTTPError, which ends the client's stream with an error
event. Closing the generator (a client that left) closes the HTTP request to the worker,
which stops the work there.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from dataclasses import dataclass

import httpx

from ..core.config import Settings
from ..core.errors import read_error_body
from ..interface.engine import EngineHTTPError, EngineOutput
from ..interface.prepared import PreparedRequest
from ..workers.wire import REQUEST_CONTENT_TYPE, TensorRequestBody, WireError, decode_line, encode_request
from .probing import ProbedPool

log = logging.getLogger("mmprep.workers")


class WorkerUnreachable(Exception):
    """The worker could not take the request; another may."""


@dataclass(eq=False)
class Worker:
    url: str
    healthy: bool = False
    in_flight: int = 0
    last_picked: int = 0  # when it was last chosen (a counter), so that ties rotate

    def mark(self, healthy: bool, reason: str) -> None:
        if healthy != self.healthy:
            level = logging.INFO if healthy else logging.WARNING
            log.log(
                level,
                "worker %s",
                "healthy" if healthy else "unhealthy",
                extra={"worker": self.url, "reason": reason},
            )
        self.healthy = healthy


class RemoteWorkersEngine(ProbedPool):
    # Whether logprobs can be given is the workers' engines' to say: a worker refuses them
    # when its engine cannot (server.check_logprobs), so the frontend passes the field on.
    gives_logprobs = True
    accepted_fields = None  # a worker refuses the fields its own engine cannot honour

    def __init__(
        self,
        urls: list[str],
        connect_timeout: float = 2.0,
        read_timeout: float = 300.0,
        probe_interval: float = 2.0,
    ):
        if not urls:
            raise ValueError("RemoteWorkersEngine needs at least one worker URL")
        super().__init__(probe_interval, connect_timeout)
        self.workers = [Worker(url.rstrip("/")) for url in urls]
        self._timeout = httpx.Timeout(read_timeout, connect=connect_timeout)
        self._picks = 0

    async def start(self) -> None:
        # Workers are the operator's own machines: no proxy from the environment applies.
        # Connections are not capped (the service caps requests in flight); an idle one is
        # closed after 5 s, before the worker would close it (see cli.WORKER_KEEP_ALIVE_SECONDS).
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=32, keepalive_expiry=5.0)
        await self._start(httpx.AsyncClient(timeout=self._timeout, limits=limits, trust_env=False))

    def ready(self) -> bool:
        return any(worker.healthy for worker in self.workers)

    async def generate(self, request: PreparedRequest) -> AsyncGenerator[EngineOutput, None]:
        body = encode_request(request)
        tried: set[Worker] = set()
        while (worker := self._pick(tried)) is not None:
            tried.add(worker)
            outputs = self._ask(worker, body)
            try:
                async for output in outputs:
                    yield output
                return
            except WorkerUnreachable as reason:  # raised before any output only: try the next worker
                worker.mark(False, str(reason))
            finally:
                await outputs.aclose()  # closed with us (a client that left): the worker's request closes now
        raise EngineHTTPError(
            "no inference worker is reachable right now; retry shortly", 503, "no_worker_available"
        )

    def _pick(self, tried: set[Worker]) -> Worker | None:
        candidates = [worker for worker in self.workers if worker.healthy and worker not in tried]
        if not candidates:
            return None
        worker = min(candidates, key=lambda w: (w.in_flight, w.last_picked))
        self._picks += 1
        worker.last_picked = self._picks
        return worker

    async def _ask(self, worker: Worker, body: TensorRequestBody) -> AsyncGenerator[EngineOutput, None]:
        """The worker's outputs. Raises WorkerUnreachable if it fails before its first line,
        EngineHTTPError for its own errors and for a failure once lines have come."""
        started = False
        worker.in_flight += 1
        try:
            headers = {"Content-Type": REQUEST_CONTENT_TYPE, "Content-Length": str(body.length)}
            async with self._http.stream(
                "POST", f"{worker.url}/generate", content=body.chunks(), headers=headers
            ) as response:
                await _check_status(response)
                async for line in response.aiter_lines():
                    if not line:
                        continue
                    output = decode_line(line)
                    started = True
                    yield output
                    if output.finish_reason is not None:
                        return
            raise EngineHTTPError("the worker ended its answer without finishing it", 502, "worker_failed")
        except httpx.TransportError as error:
            reason = f"{type(error).__name__}: {error}"
            if not started:
                raise WorkerUnreachable(reason) from error
            worker.mark(False, reason)
            log.warning("worker failed mid-answer", extra={"worker": worker.url, "reason": reason})
            raise EngineHTTPError(
                "the worker answering this request failed mid-answer; the answer is incomplete",
                502,
                "worker_failed",
            ) from error
        except WireError as error:
            log.error("worker sent a malformed line", extra={"worker": worker.url, "reason": str(error)})
            raise EngineHTTPError("the worker sent a malformed answer", 502, "worker_failed") from error
        finally:
            worker.in_flight -= 1

    async def probe(self, first: bool = False) -> None:
        await asyncio.gather(*(self._probe(worker) for worker in self.workers))

    async def _probe(self, worker: Worker) -> None:
        try:
            response = await self._http.get(f"{worker.url}/health", timeout=self._probe_timeout)
        except httpx.HTTPError as error:
            worker.mark(False, f"health probe failed: {type(error).__name__}: {error}")
            return
        worker.mark(response.status_code == 200, f"/health answered {response.status_code}")


async def _check_status(response: httpx.Response) -> None:
    """Raise for a worker that did not accept the request: 503 (not ready, stopping) lets
    another worker try; any other error is the worker's answer to this request."""
    if response.status_code == 200:
        return
    if response.status_code == 503:
        raise WorkerUnreachable("the worker answered 503: not ready")
    message, code, param = read_error_body(await response.aread())
    message, code = message or f"HTTP {response.status_code}", code or "worker_failed"
    if response.status_code < 500:
        raise EngineHTTPError(message, response.status_code, code, param)
    raise EngineHTTPError(f"the worker failed: {message}", 502, code)


def from_settings(settings: Settings) -> RemoteWorkersEngine:
    """`--engine workers` (registry.py)."""
    return RemoteWorkersEngine(
        settings.worker_url,
        connect_timeout=settings.engine_connect_timeout,
        read_timeout=settings.engine_read_timeout,
        probe_interval=settings.worker_probe_interval,
    )
