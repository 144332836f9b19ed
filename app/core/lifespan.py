"""A server's lifespan around one component with `start` and `stop` (a Service, an engine):
started before the first request, stopped after the last."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any


def lifespan_of(component: Any) -> Callable[[Any], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        await component.start()
        try:
            yield
        finally:
            await component.stop()

    return lifespan
