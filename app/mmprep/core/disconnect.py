"""Noticing a client that went away, so that the work done for it stops."""

from __future__ import annotations

import asyncio
import threading
from typing import Protocol

import anyio

POLL_SECONDS = 0.1


class Connection(Protocol):
    """What a server's request object offers: Starlette's Request is one."""

    async def is_disconnected(self) -> bool: ...


class ClientGone(Exception):
    """The client closed the connection; whatever was being done for it stops."""


async def until_disconnect(http: Connection, work, cancel: threading.Event | None = None):
    """Await `work`, but stop it if the client disconnects: the task is cancelled, and
    `cancel` (if given) is set for work running in threads, such as decodes."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            await asyncio.wait({task}, timeout=POLL_SECONDS)
            if task.done():
                return task.result()
            if await http.is_disconnected():
                raise ClientGone()
    except BaseException:
        if cancel is not None:
            cancel.set()
        task.cancel()
        raise
    finally:
        # The task holds its error, whose traceback holds this frame: without the task here,
        # no cycle keeps the request (and its media) alive until the garbage collector runs.
        task = None


async def close_shielded(outputs) -> None:
    """Close an engine's output generator now, so that its cleanup (closing a connection
    to a worker, stopping a model) runs even when the stream ended because the client left.
    Shielded: Starlette cancels a departed client's stream, and the cleanup must not be
    cancelled in turn."""
    aclose = getattr(outputs, "aclose", None)  # an engine may return any async iterator
    if aclose is not None:
        with anyio.CancelScope(shield=True):
            await aclose()
