"""Engines for the tests and benchmarks: real implementations of the Engine interface,
deliberately slow, strict or scripted, run in process or hosted by a real `mmprep serve` or
`mmprep worker` through `--engine-class tests.support.engines:<Name>` (the repository's root
on the process's PYTHONPATH: tests.support.servers.REPO).

TokenReplayEngine, a token-out engine that replays what a request tells it to (the derender
fixtures, the detokenize and streams benchmarks). The request's extra field `replay` says
what to produce:
`{"token_ids": [...], "chunk": 5, "finish_reason": "stop", "logprobs": [[id, logprob,
[[alt_id, alt_logprob], ...]], ...], "interval": 0.0}`: the ids `chunk` at a time, one
chunk every `interval` seconds, then a last output with the finish reason and counts.
With `"texts": [...]` instead of token_ids it is a text engine: one piece per output, each
piece one token, so max_tokens cuts it as a model's answer is cut (a text engine applies its
own limits: the pipeline counts no text). `"repeat": N` plays the texts N times: a
benchmark's long answer (`{"texts": ["word "], "repeat": 1024}`) then costs the server one
parsed string, not 1024, as a real engine's answer is not in the request at all.

SlowEngine, FrameBudgetEngine, NeverReadyEngine, FieldsEngine: the echo engine's behaviour
made slow, strict, never ready, or declaring a field.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
from collections.abc import AsyncGenerator, AsyncIterator

from mmprep.engines import EchoEngine
from mmprep.interface.engine import EngineHTTPError, EngineOutput, FinishReason, NothingToStart, TokenLogprob
from mmprep.interface.prepared import PreparedRequest


class TokenReplayEngine(NothingToStart):
    gives_logprobs = True

    def __init__(self, prompt_tokens: int = 7):
        self.prompt_tokens = prompt_tokens
        self.closed = 0  # generations closed before their end (a stop told the engine)

    async def generate(self, request: PreparedRequest) -> AsyncGenerator[EngineOutput, None]:
        replay = request.extra.get("replay")
        if not isinstance(replay, dict) or not isinstance(replay.get("token_ids", replay.get("texts")), list):
            raise EngineHTTPError(
                "this engine replays the request's replay.token_ids", 400, "invalid_request", "replay"
            )
        if "texts" in replay:
            texts = replay["texts"]
            answer = len(texts) * int(replay.get("repeat", 1))  # pieces, each one token
            limit = request.sampling.max_tokens
            pieces = answer if limit is None else min(answer, limit)
            finish: FinishReason = "length" if pieces < answer else "stop"
            async for output in self._texts(texts, pieces, finish, float(replay.get("interval", 0.0))):
                yield output
            return
        ids = replay["token_ids"]
        chunk = max(1, int(replay.get("chunk", 1)))
        interval = float(replay.get("interval", 0.0))
        logprobs = [
            TokenLogprob(i, lp, tuple((a, b) for a, b in top)) for i, lp, top in replay.get("logprobs") or []
        ]
        finished = False
        try:
            for start in range(0, len(ids), chunk):
                if interval:
                    await asyncio.sleep(interval)
                part = tuple(ids[start : start + chunk])
                yield EngineOutput(token_ids=part, logprobs=tuple(logprobs[start : start + chunk]))
            finished = True
            yield EngineOutput(
                finish_reason=replay.get("finish_reason", "stop"),
                prompt_tokens=len(request.prompt.token_ids)
                if request.prompt is not None
                else self.prompt_tokens,
                completion_tokens=len(ids),
            )
        finally:
            if not finished:
                self.closed += 1

    async def _texts(
        self, texts: list[str], pieces: int, finish: FinishReason, interval: float
    ) -> AsyncIterator[EngineOutput]:
        """The first `pieces` of the texts played round and round."""
        for text in itertools.islice(itertools.cycle(texts), pieces):
            if interval:
                await asyncio.sleep(interval)
            yield EngineOutput(text=text)
        yield EngineOutput(finish_reason=finish, prompt_tokens=self.prompt_tokens, completion_tokens=pieces)


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
