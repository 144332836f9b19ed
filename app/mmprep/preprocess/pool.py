"""Where decoding runs: a bounded thread pool off the event loop, with a thread budget.

PyAV releases the GIL while FFmpeg works, so threads decode in parallel. FFmpeg's own
threads are shared out so their sum stays near the core count: one decode alone gets
every core, many decodes at once get one each, and nothing oversubscribes the machine.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

from ..core.config import usable_cores


class DecodePool:
    """`fixed_threads`: give every decode that many FFmpeg threads instead of a share."""

    def __init__(self, workers: int, cores: int | None = None, fixed_threads: int = 0):
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mmprep-decode")
        self._cores = cores or usable_cores()  # a taskset server shares out only its own cores
        self._fixed = fixed_threads
        self._active = 0
        self._lock = threading.Lock()

    @property
    def active(self) -> int:
        """Decodes running right now."""
        return self._active

    async def run(self, work, /, *args, **kwargs):
        """Run work(*args, **kwargs) in the pool (work with no threads of its own: Pillow)."""
        return await self._submit(work, args, kwargs, False)

    async def run_with_threads(self, work, /, *args, **kwargs):
        """Run work(*args, threads=N, **kwargs) in the pool; N is this decode's share of the cores."""
        return await self._submit(work, args, kwargs, True)

    async def _submit(self, work, args, kwargs, give_threads: bool):
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._executor, self._run_with_budget, work, args, kwargs, give_threads
        )

    def _run_with_budget(self, work, args, kwargs, give_threads: bool):
        with self._lock:
            self._active += 1
            threads = self._fixed or max(1, self._cores // self._active)
        try:
            return work(*args, **kwargs, **({"threads": threads} if give_threads else {}))
        finally:
            with self._lock:
                self._active -= 1

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
