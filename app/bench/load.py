"""The load: when each request of a run starts.

Closed loop (no rate): a new request starts as soon as one of `concurrency` slots frees.
With a rate: requests arrive as a Poisson process (exponential gaps, seeded) and each
waits for a free slot; arrival times are kept on schedule, so requests delayed by the cap
start back to back once slots free, as a queue would send them. A run stops starting
requests at its request limit or its duration, whichever comes first, and waits for the
ones in flight. Latency is counted from the moment a request is sent, not from its
arrival.
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


async def drive(plan: LoadPlan, send: Callable[[int], Awaitable[RequestRecord]],
                on_done: Callable[[RequestRecord], None] = lambda record: None) -> tuple[list[RequestRecord], float]:
    """Run `send(i)` for i = 0, 1, ... as the plan says. Returns the records in start
    order and the run's wall time in seconds (first start to last finish)."""
    arrivals = random.Random(plan.seed)
    slots = asyncio.Semaphore(plan.concurrency)
    started = time.perf_counter()
    deadline = started + plan.duration if plan.duration is not None else None
    next_arrival = started
    tasks: list[asyncio.Task] = []

    async def one(index: int, sent: float) -> RequestRecord:
        try:
            record = await send(index)
        finally:
            slots.release()
        record.start_ms = (sent - started) * 1000
        on_done(record)
        return record

    while plan.limit is None or len(tasks) < plan.limit:
        if plan.request_rate is not None:
            if deadline is not None and next_arrival >= deadline:
                break
            await asyncio.sleep(max(0.0, next_arrival - time.perf_counter()))
            next_arrival += arrivals.expovariate(plan.request_rate)
        await slots.acquire()
        now = time.perf_counter()
        if deadline is not None and now >= deadline:
            slots.release()
            break
        tasks.append(asyncio.create_task(one(len(tasks), now)))
    records = await asyncio.gather(*tasks)
    return list(records), time.perf_counter() - started
