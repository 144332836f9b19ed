"""The load: when each request of a run starts, and how a run is shared among client processes.

Closed loop (no rate): a new request starts as soon as one of `concurrency` slots frees.
With a rate: requests arrive as a Poisson process (exponential gaps, seeded) and each
waits for a free slot; arrival times are kept on schedule, so requests delayed by the cap
start back to back once slots free, as a queue would send them. A run stops starting
requests at its request limit or its duration, whichever comes first, and waits for the
ones in flight. Latency is counted from the moment a request is sent, not from its
arrival.

Shared among P client processes, process i takes the run's requests i, i + P, i + 2P, ...
and an even part of the concurrency. With a rate, the arrival times are drawn once for
the whole run and dealt out the same way, so together the processes send exactly the
Poisson arrivals one process would; only the cap is per process (its part of it).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from .client import RequestRecord


@dataclass(frozen=True)
class LoadPlan:
    concurrency: int
    request_rate: float | None  # requests per second; None: closed loop
    limit: int | None  # requests; None: until the duration passes
    duration: float | None  # seconds
    seed: int = 0

    def arrival_times(self) -> list[float] | None:
        """Seconds from the run's start at which its requests arrive; None: closed loop."""
        if self.request_rate is None:
            return None
        gaps, at = random.Random(self.seed), 0.0
        times: list[float] = []
        while (self.limit is None or len(times) < self.limit) and (
            self.duration is None or at < self.duration
        ):
            times.append(at)
            at += gaps.expovariate(self.request_rate)
        return times

    def split(self, parts: int) -> list[Share]:
        """The plan dealt out to `parts` processes (fewer if the concurrency is smaller)."""
        parts = min(parts, self.concurrency)
        arrivals = self.arrival_times()
        limit = len(arrivals) if arrivals is not None else self.limit
        return [
            Share(
                part=i,
                parts=parts,
                concurrency=self.concurrency // parts + (i < self.concurrency % parts),
                arrivals=arrivals[i::parts] if arrivals is not None else None,
                limit=len(range(i, limit, parts)) if limit is not None else None,
                duration=self.duration,
            )
            for i in range(parts)
        ]


@dataclass(frozen=True)
class Share:
    """One client process's part of a run."""

    part: int
    parts: int
    concurrency: int
    arrivals: list[float] | None  # seconds from the run's start; None: closed loop
    limit: int | None
    duration: float | None

    def index(self, k: int) -> int:
        """The run-wide index of this share's k-th request."""
        return self.part + k * self.parts


async def drive(
    share: Share,
    send: Callable[[int], Awaitable[RequestRecord]],
    start_at: float,
    on_done: Callable[[RequestRecord], None] = lambda record: None,
) -> tuple[list[RequestRecord], float]:
    """Run `send(index)` for this share's run-wide indexes as the plan says, from `start_at`
    (time.monotonic(), the same clock in every process). Returns the records in start order
    and when the last one finished."""
    await asyncio.sleep(max(0.0, start_at - time.monotonic()))
    slots = asyncio.Semaphore(share.concurrency)
    deadline = start_at + share.duration if share.duration is not None else None
    tasks: list[asyncio.Task] = []

    async def one(index: int, sent: float) -> RequestRecord:
        try:
            record = await send(index)
        finally:
            slots.release()
        record.start_ms = (sent - start_at) * 1000
        on_done(record)
        return record

    while share.limit is None or len(tasks) < share.limit:
        if share.arrivals is not None:
            await asyncio.sleep(max(0.0, start_at + share.arrivals[len(tasks)] - time.monotonic()))
        await slots.acquire()
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            slots.release()
            break
        tasks.append(asyncio.create_task(one(share.index(len(tasks)), now)))
    records = await asyncio.gather(*tasks)
    return list(records), time.monotonic()
