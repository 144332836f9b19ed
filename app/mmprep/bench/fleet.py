"""The processes that send a run's requests, and what they cost.

One asyncio loop sending requests and parsing their answers with httpx tops out at a few
hundred requests a second on one core; past that, the latencies measure the client's own
queue, not the target. So a run is dealt out (load.LoadPlan.split) to several client
processes (--client-processes; by default one per 256 of the largest concurrency, at most
one per core). With one, bench's own process sends the requests, as it always did.

Every process reports the CPU time it spent during a run (getrusage), bench's own process
too (it serves the media files), so the report can say when the client was the limit.
"""

from __future__ import annotations

import asyncio
import math
import multiprocessing
import os
import resource
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait

import httpx

from .client import ChatClient, RequestRecord, RequestTemplate
from .errors import BenchError
from .inputs import MediaSender
from .load import LoadPlan, Share, drive

REQUESTS_IN_FLIGHT_PER_PROCESS = 256
START_DELAY_SECONDS = 0.05  # every process is told the run starts this long after the order goes out
PROGRESS_EVERY_SECONDS = 0.2
SATURATED = 0.9  # a process busy this share of the run's wall time or more limits the client


def default_processes(largest_concurrency: int) -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(cores, math.ceil(largest_concurrency / REQUESTS_IN_FLIGHT_PER_PROCESS)))


@dataclass(frozen=True)
class ClientSpec:
    """All a client process needs to send requests (picklable: it goes to each process)."""

    url: str
    headers: dict[str, str]
    timeout: float
    connections: int  # the most requests in flight one process will have
    template: RequestTemplate
    sender: MediaSender
    keep_alive: float = 300.0  # seconds an idle connection is kept for reuse


@dataclass
class RunResult:
    records: list[RequestRecord]  # in start order
    wall_s: float  # the run's start to its last answer
    cpu_s: list[float]  # per process: bench's own first, then each client process (if any)

    def client_figures(self, processes: int) -> dict:
        busiest = max(self.cpu_s) / self.wall_s if self.wall_s > 0 else 0.0
        return {
            "processes": processes,
            "cpu_s": round(sum(self.cpu_s), 3),
            "busiest_process_cpu": round(busiest, 3),  # share of one core
            "saturated": busiest >= SATURATED,
        }


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Client:
    """One process's sender: its HTTP connections and the request template."""

    def __init__(self, spec: ClientSpec):
        self._spec = spec
        limits = httpx.Limits(
            max_connections=spec.connections,
            max_keepalive_connections=spec.connections,
            keepalive_expiry=spec.keep_alive,
        )
        self._http = httpx.AsyncClient(
            headers=spec.headers, limits=limits, timeout=httpx.Timeout(spec.timeout)
        )
        self._chat = ChatClient(self._http, spec.url, spec.template.stream)

    async def run(
        self, share: Share, first_number: int, start_at: float, on_done: Callable[[RequestRecord], None]
    ) -> tuple[list[RequestRecord], float]:
        """This process's share of a run; request numbers count from `first_number`."""

        async def send(index: int) -> RequestRecord:
            number = first_number + index
            parts, media = self._spec.sender.parts(number)
            return await self._chat.send(number, self._spec.template.body(parts, number), media)

        return await drive(share, send, start_at, on_done)

    async def aclose(self) -> None:
        await self._http.aclose()


Progress = Callable[[int, int], None]  # (completed, failed so far)


class Tally:
    """A run's completed and failed requests, passed on at most every `every` seconds."""

    def __init__(self, report: Progress, every: float = 0.0):
        self._report, self._every = report, every
        self.completed = self.failed = 0
        self._reported = 0.0

    def __call__(self, record: RequestRecord) -> None:
        self.completed += 1
        self.failed += not record.ok
        if time.monotonic() - self._reported >= self._every:
            self.flush()

    def flush(self) -> None:
        self._reported = time.monotonic()
        self._report(self.completed, self.failed)


class InProcessFleet:
    """Requests sent from bench's own process: one client, one event loop for every run."""

    processes = 1

    def __init__(self, spec: ClientSpec):
        self._loop = asyncio.Runner()
        self._client = self._loop.run(_make_client(spec))

    def run(
        self, plan: LoadPlan, first_number: int, on_progress: Progress = lambda done, failed: None
    ) -> RunResult:
        (share,) = plan.split(1)
        cpu = cpu_seconds()
        start_at = time.monotonic()
        records, end = self._loop.run(self._client.run(share, first_number, start_at, Tally(on_progress)))
        return RunResult(records, end - start_at, [cpu_seconds() - cpu])

    def close(self) -> None:
        self._loop.run(self._client.aclose())
        self._loop.close()


class ProcessFleet:
    """Requests sent from `processes` client processes, started once for every run."""

    def __init__(self, spec: ClientSpec, processes: int):
        self.processes = processes
        context = multiprocessing.get_context("spawn")  # bench's file server threads must not be forked
        self._conns: list[Connection] = []
        self._workers = []
        for _ in range(processes):
            ours, theirs = context.Pipe()
            worker = context.Process(
                target=_serve_orders, args=(theirs, spec), daemon=True, name="mmprep-bench-client"
            )
            worker.start()
            theirs.close()
            self._conns.append(ours)
            self._workers.append(worker)
        for conn in self._conns:
            self._receive(conn)  # ("ready",)

    def run(
        self, plan: LoadPlan, first_number: int, on_progress: Progress = lambda done, failed: None
    ) -> RunResult:
        shares = plan.split(self.processes)
        busy = self._conns[: len(shares)]
        cpu = cpu_seconds()
        start_at = time.monotonic() + START_DELAY_SECONDS
        for conn, share in zip(busy, shares, strict=True):
            conn.send(("run", share, first_number, start_at))
        progress = {conn: (0, 0) for conn in busy}
        records, ends, cpus = [], [], []
        pending = set(busy)
        while pending:
            for ready in wait(list(pending)):
                assert isinstance(ready, Connection)  # wait returns some of the connections it is given
                conn = ready
                message = self._receive(conn)
                if message[0] == "progress":
                    progress[conn] = message[1:]
                    on_progress(*map(sum, zip(*progress.values(), strict=True)))
                else:  # ("done", records, end, cpu)
                    records += message[1]
                    ends.append(message[2])
                    cpus.append(message[3])
                    pending.discard(conn)
        records.sort(key=lambda record: record.start_ms)
        return RunResult(records, max(ends) - start_at, [cpu_seconds() - cpu, *cpus])

    def _receive(self, conn: Connection) -> tuple:
        try:
            message = conn.recv()
        except EOFError:
            raise BenchError("a client process died; see its output above") from None
        if message[0] == "error":
            raise BenchError(f"a client process failed: {message[1]}")
        return message

    def close(self) -> None:
        for conn in self._conns:
            try:
                conn.send(("stop",))
            except OSError:
                pass  # already gone
        for worker in self._workers:
            worker.join(timeout=10)
            if worker.is_alive():
                worker.kill()


def open_fleet(spec: ClientSpec, processes: int) -> InProcessFleet | ProcessFleet:
    return InProcessFleet(spec) if processes == 1 else ProcessFleet(spec, processes)


async def _make_client(spec: ClientSpec) -> Client:
    return Client(spec)  # made in the loop that will use it


def _serve_orders(conn: Connection, spec: ClientSpec) -> None:
    """A client process: run each share it is sent, send back its records and CPU time."""
    try:
        with asyncio.Runner() as loop:
            client = loop.run(_make_client(spec))
            conn.send(("ready",))
            while (order := conn.recv())[0] == "run":
                _, share, first_number, start_at = order
                tally = Tally(
                    lambda completed, failed: conn.send(("progress", completed, failed)),
                    PROGRESS_EVERY_SECONDS,
                )
                cpu = cpu_seconds()
                records, end = loop.run(client.run(share, first_number, start_at, tally))
                tally.flush()
                conn.send(("done", records, end, cpu_seconds() - cpu))
            loop.run(client.aclose())
    except KeyboardInterrupt:
        pass  # bench itself reports the interruption
    except Exception:  # whatever it was, bench reports it as one line, not a hung pipe
        conn.send(("error", traceback.format_exc(limit=-3).strip().replace("\n", " | ")))
