"""Admission: how many requests are worked on at once, and who waits for a place.

Up to --max-concurrent-requests are in flight; the next ones wait in one queue, first come
first served (a place given back goes to the oldest waiter, never to a newcomer). A request
is refused only past a bound it can name: the queue already holds --max-queued-requests
(`queue_full`), or it waited --max-queue-wait seconds without a place (`queue_timeout`).
Each refusal is a 503 with Retry-After, its reason in the error's code and message and in
mmprep_admission_refused_total{reason}.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from .errors import ServiceError
from .metrics import Metrics


class Refused(ServiceError):
    status = 503
    headers: dict[str, str] | None = {"Retry-After": "1"}


class Admission:
    def __init__(
        self, limit: int, max_queued: int, max_wait: float, metrics: Metrics, on_idle: Callable[[], None]
    ):
        self.limit, self.max_queued, self.max_wait = limit, max_queued, max_wait
        self._metrics, self._on_idle = metrics, on_idle
        self.in_flight = 0
        self._waiting: deque[asyncio.Future[None]] = deque()

    @property
    def queued(self) -> int:
        return len(self._waiting)

    def try_enter(self) -> bool:
        """A place at once, if one is free and nobody is waiting for it."""
        if self.in_flight >= self.limit or self._waiting:
            return False
        self.in_flight += 1
        self._metrics.in_flight.set(self.in_flight)
        return True

    async def wait(self) -> None:
        """Queue for a place: returns holding one, or raises Refused (a cancelled wait
        leaves the queue, and passes on a place it was given as it was cancelled)."""
        if len(self._waiting) >= self.max_queued:
            raise self._refuse(
                "queue_full",
                f"the server has {self.in_flight} requests in flight (--max-concurrent-requests "
                f"{self.limit}) and {len(self._waiting)} queued (--max-queued-requests {self.max_queued}); "
                "retry shortly",
            )
        place: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(place)
        self._metrics.queued.set(len(self._waiting))
        try:
            async with asyncio.timeout(self.max_wait):
                await asyncio.shield(place)  # shielded: a place given as the wait ends is not lost
        except BaseException as error:
            if place.done():  # given a place it will not use: the next waiter takes it
                self.release()
            else:
                place.cancel()
                self._waiting.remove(place)
                self._metrics.queued.set(len(self._waiting))
            if isinstance(error, TimeoutError):
                raise self._refuse(
                    "queue_timeout",
                    f"no place among the {self.limit} requests in flight (--max-concurrent-requests) came "
                    f"within {self.max_wait:g} s (--max-queue-wait); retry shortly",
                ) from None
            raise

    def release(self) -> None:
        """A place given back: to the oldest waiter, else free."""
        while self._waiting:
            place = self._waiting.popleft()
            self._metrics.queued.set(len(self._waiting))
            if not place.done():
                place.set_result(None)  # the place changes hands: in flight stays as it is
                return
        self.in_flight -= 1
        self._metrics.in_flight.set(self.in_flight)
        if self.in_flight == 0:
            self._on_idle()

    def _refuse(self, reason: str, message: str) -> Refused:
        self._metrics.admission_refused.labels(reason).inc()
        return Refused(message, reason)
