"""Memory given back to the system once a burst of requests is over.

After thousands of streams, what they held is garbage, but not all of it is returned:
cancelled streams leave reference cycles (an exception's traceback holds the frames that
held the request) that only the cycle collector frees, and it runs when something
allocates, which an idle server does not; and glibc's malloc keeps freed pages in its
arenas. So when nothing has been in flight for IDLE_SECONDS, the collector runs and, on
glibc, malloc_trim returns the free pages; off the event loop, at most once per burst.

Freed is not returned, though, while a few live objects sit among the freed ones: CPython's
own allocator (pymalloc) gives a 1 MiB arena back only when every block in it is free, and
after 2048 streams the connections a client keeps open (about 6 KB each, made during the
burst) sit in every arena the burst filled, so none goes back (+76 MiB kept). CPython 3.13's
mimalloc (PYTHONMALLOC=mimalloc) returns memory by 64 KiB pages (+31 MiB), but costs a
render request of new media about 36% more CPU, so it is the operator's choice, not the
default (docs/deployment.md).
"""

from __future__ import annotations

import asyncio
import contextvars
import ctypes
import ctypes.util
import gc
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("mmprep.memory")

IDLE_SECONDS = 2.0


def _malloc_trim():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to trim
        return None


MALLOC_TRIM = _malloc_trim()


def release_memory() -> None:
    gc.collect()
    if MALLOC_TRIM is not None:
        MALLOC_TRIM(0)


class ReleaseWhenIdle:
    """`busy()` when a request starts, `idle()` when the last one in flight ends."""

    def __init__(self, idle_seconds: float = IDLE_SECONDS):
        self._idle_seconds = idle_seconds
        self._timer: asyncio.TimerHandle | None = None
        self._since_release = 0  # requests finished since memory was last released
        self._before: list[Callable[[], Awaitable[object]]] = []
        self._releasing: asyncio.Task | None = None

    def before_release(self, step: Callable[[], Awaitable[object]]) -> None:
        """Run `step` on the event loop, awaited, before each release (the server's renewal
        of its idle connections)."""
        self._before.append(step)

    def busy(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def idle(self) -> None:
        self._since_release += 1
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # not in a server's loop (a test calling the Service directly)
        self.busy()
        self._timer = loop.call_later(self._idle_seconds, self._release, loop)

    def _release(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        if self._since_release and self._releasing is None:
            self._since_release = 0
            # In a context of its own: the timer was set in the last request's (its id, its
            # log fields), and what the steps make (renewed connections) would keep a copy.
            self._releasing = loop.create_task(self._release_now(loop), context=contextvars.Context())

    async def _release_now(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            for step in self._before:
                try:
                    await step()
                except Exception:  # a task nobody awaits: say so, and release all the same
                    log.exception("a step before the memory release failed")
            await loop.run_in_executor(None, release_memory)
        finally:
            self._releasing = None
