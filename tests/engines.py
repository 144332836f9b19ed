"""Engines for the tests, hosted by real `mmprep worker` processes through
`--engine-class engines:<Name>` (tests/ on PYTHONPATH): real implementations of the
Engine interface, deliberately slow or strict, not mocks."""

from __future__ import annotations

import asyncio
import os
import threading

from mmprep.engines import EchoEngine, EngineHTTPError, EngineOutput
from mmprep.interface.engine import NothingToStart


class SlowEngine(NothingToStart):
    """A word every 50 ms for ten seconds. Sets `stopped_early` when stopped before the
    end, and notes "started", then "finished" or "stopped early" in the file
    $SLOW_ENGINE_LOG if there is one, so a test in another process sees it stop too."""

    def __init__(self):
        self.stopped_early = threading.Event()

    async def generate(self, request):
        _note(f"started {request.request_id}")
        try:
            for _ in range(200):
                yield EngineOutput(text="word ")
                await asyncio.sleep(0.05)  # the engine's pace: what makes it slow
        except BaseException:
            self.stopped_early.set()
            _note(f"stopped early {request.request_id}")
            raise
        _note(f"finished {request.request_id}")
        yield EngineOutput(finish_reason="stop", prompt_tokens=1, completion_tokens=200)


class FrameBudgetEngine(EchoEngine):
    """The echo engine with a small context: a request of more than four frames is
    refused before any output, as a model refuses a prompt longer than its context."""

    MAX_FRAMES = 4

    async def generate(self, request):
        frames = sum(len(item.tensor) if item.kind == "video" else 1 for item in request.media)
        if frames > self.MAX_FRAMES:
            raise EngineHTTPError(
                f"the request has {frames} frames; this model's context holds {self.MAX_FRAMES}",
                400,
                "context_length_exceeded",
                "messages",
            )
        async for output in super().generate(request):
            yield output


class NeverReadyEngine(EchoEngine):
    """An engine still loading its model: ready() says no."""

    def ready(self):
        return False


def _note(line: str) -> None:
    if "SLOW_ENGINE_LOG" in os.environ:
        with open(os.environ["SLOW_ENGINE_LOG"], "a") as log:
            log.write(line + "\n")


class FieldsEngine(EchoEngine):
    """The echo engine, declaring the one request field beyond mmprep's own it honours."""

    accepted_fields = frozenset({"top_k"})
