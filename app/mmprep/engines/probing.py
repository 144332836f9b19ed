"""`ProbedPool`: the part of an HTTP engine that is the same whoever it reaches: one
connection pool, made at start and closed at stop, and a task that probes the servers every
`probe_interval` seconds in the background, so that readiness reads a cached answer and
never makes a request of its own. What a probe asks and what it changes is the engine's
(`probe`): the workers' engine probes each worker, the upstream engines their one server."""

from __future__ import annotations

import asyncio
import logging

import httpx

log = logging.getLogger("mmprep.engines")


class ProbedPool:
    def __init__(self, probe_interval: float, connect_timeout: float):
        self._probe_interval = probe_interval
        self._probe_timeout = httpx.Timeout(connect_timeout)
        self._client: httpx.AsyncClient | None = None
        self._prober: asyncio.Task | None = None

    async def probe(self, first: bool = False) -> None:
        """One round of probes (`first`: the one start() makes, whose errors stop the start;
        later rounds' are logged, and the next round runs)."""
        raise NotImplementedError

    async def _start(self, client: httpx.AsyncClient) -> None:
        """`client` is the pool: probe once, then every probe_interval in the background."""
        self._client = client
        await self.probe(first=True)
        self._prober = asyncio.create_task(self._probe_forever())

    async def stop(self) -> None:
        if self._prober is not None:
            self._prober.cancel()
            await asyncio.gather(self._prober, return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()

    async def _probe_forever(self) -> None:
        while True:
            await asyncio.sleep(self._probe_interval)
            try:
                await self.probe()
            except Exception:  # keep probing: a dead prober would never see a server come back
                log.exception("health probe round failed")

    @property
    def _http(self) -> httpx.AsyncClient:
        """The connection pool, which start() makes."""
        if self._client is None:
            raise RuntimeError(f"{type(self).__name__} was not started: start() makes its connection pool")
        return self._client
