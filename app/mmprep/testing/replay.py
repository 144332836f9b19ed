"""A token-out engine that replays what a request tells it to: the real engine interface
(an async generator of EngineOutputs with token ids and logprobs), for the derender
fixtures and the detokenize benchmark.

The request's extra field `replay` says what to produce:
`{"token_ids": [...], "chunk": 5, "finish_reason": "stop", "logprobs": [[id, logprob,
[[alt_id, alt_logprob], ...]], ...], "interval": 0.0}`: the ids `chunk` at a time, one
chunk every `interval` seconds, then a last output with the finish reason and counts.
With `"texts": [...]` instead of token_ids it is a text engine: one piece per output, each
piece one token, so max_tokens cuts it as a model's answer is cut (a text engine applies its
own limits: the pipeline counts no text). `"repeat": N` plays the texts N times: a
benchmark's long answer (`{"texts": ["word "], "repeat": 1024}`) then costs the server one
parsed string, not 1024, as a real engine's answer is not in the request at all.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncGenerator, AsyncIterator

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
