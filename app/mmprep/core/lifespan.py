"""A server's lifespan around one component with `start` and `stop` (a Service, an engine):
started before the first request, stopped after the last."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

log = logging.getLogger("mmprep")


class StartupError(Exception):
    """A component cannot start as it is configured; the message says what to change. The
    server logs it on one line and does not start."""


def lifespan_of(component: Any) -> Callable[[Any], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        try:
            await component.start()
        except StartupError as error:
            log.error("cannot start: %s", error)
            raise
        try:
            yield
        finally:
            await component.stop()

    return lifespan
