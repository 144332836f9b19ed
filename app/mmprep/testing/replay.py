"""A token-out engine that replays what a request tells it to: the real engine interface
(an async generator of EngineOutputs with token ids and logprobs), for the derender
fixtures and the detokenize benchmark.

The request's extra field `replay` says what to produce:
`{"token_ids": [...], "chunk": 5, "finish_reason": "stop", "logprobs": [[id, logprob,
[[alt_id, alt_logprob], ...]], ...], "interval": 0.0}`: the ids `chunk` at a time, one
chunk every `interval` seconds, then a last output with the finish reason and counts.
With `"texts": [...]` instead of token_ids it is a text engine: one piece per output.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator

from mmprep.engines.base import EngineHTTPError, EngineOutput, NothingToStart, TokenLogprob
from mmprep.engines.prepared import PreparedRequest


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
            async for output in self._texts(replay["texts"], float(replay.get("interval", 0.0))):
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

    async def _texts(self, texts: list[str], interval: float) -> AsyncIterator[EngineOutput]:
        for text in texts:
            if interval:
                await asyncio.sleep(interval)
            yield EngineOutput(text=text)
        yield EngineOutput(
            finish_reason="stop", prompt_tokens=self.prompt_tokens, completion_tokens=len(texts)
        )
