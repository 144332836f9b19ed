"""The echo engine: the embedded default, for a machine with no GPU and no model.

Its answer is one JSON object, a faithful account of what it received (the text, and
for each media item its kind, tensor shape, a fingerprint (xxh3) of its bytes, sampled
timestamps and indices, and source metadata; with a vision processor, each processed
tensor's name, shape, dtype and xxh3, and the item's placeholder tokens, which
prompt_tokens counts; with --model, the rendered prompt's token count, fingerprint and
placeholders, which prompt_tokens is), streamed in pieces of a few characters, each piece
one token. max_tokens and stop apply to it as to a model's answer.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncGenerator

import xxhash

from mmprep.processors import torch_name

from ..core.config import Settings
from ..interface.engine import EngineOutput, FinishReason, NothingToStart
from ..interface.prepared import MediaItem, PreparedRequest
from ..modalities import modality_of

# Pieces between trips to the event loop: often enough for a disconnect to stop us, rarely
# enough that a long answer does not cost a loop iteration per token.
YIELD_EVERY = 16


class EchoEngine(NothingToStart):
    gives_logprobs = False  # its answer is an account of the request, not a model's tokens

    def __init__(self, chars_per_token: int = 8):
        self._chars = chars_per_token

    async def generate(self, request: PreparedRequest) -> AsyncGenerator[EngineOutput, None]:
        answer, finish = _apply_stop(account(request), request.sampling.stop)
        pieces = [answer[i : i + self._chars] for i in range(0, len(answer), self._chars)]
        limit = request.sampling.max_tokens
        if limit is not None and len(pieces) > limit:
            pieces, finish = pieces[:limit], "length"
        for i, piece in enumerate(pieces, 1):
            yield EngineOutput(text=piece)
            if i % YIELD_EVERY == 0:
                await asyncio.sleep(0)  # let others run, and a disconnect cancel us
        yield EngineOutput(
            finish_reason=finish, prompt_tokens=self.prompt_tokens(request), completion_tokens=len(pieces)
        )

    def prompt_tokens(self, request: PreparedRequest) -> int:
        """With --model, the rendered prompt's token ids. Else a piece of text per
        `chars_per_token` characters, plus each item's placeholder tokens when a processor
        made them, else one per frame or image."""
        if request.prompt is not None:
            return len(request.prompt.token_ids)
        media = sum(_media_tokens(item) for item in request.media)
        return math.ceil(len(request.text()) / self._chars) + media


def account(request: PreparedRequest) -> str:
    return json.dumps(
        {
            **({"prompt": _prompt(request.prompt)} if request.prompt is not None else {}),
            "model": request.model,
            "text": request.text(),
            "media": [_describe(item) for item in request.media],
            "sampling": {
                "max_tokens": request.sampling.max_tokens,
                "temperature": request.sampling.temperature,
                "top_p": request.sampling.top_p,
                "seed": request.sampling.seed,
                "stop": list(request.sampling.stop),
            },
            "mm_processor_kwargs": request.processor_kwargs(),
            "extra": request.extra,
        },
        separators=(",", ":"),
    )


def _media_tokens(item: MediaItem) -> int:
    if item.processed is not None:
        return item.processed.num_tokens
    return modality_of(item).units(item.tensor)


def _describe(item: MediaItem) -> dict:
    described = {
        "kind": item.kind,
        "param": item.param,
        **_tensor_account(item.tensor),
        "metadata": item.metadata,
    }
    described.update(modality_of(item).account(item))
    if item.processed is not None:
        described["processed"] = {
            "num_tokens": item.processed.num_tokens,
            "tensors": {name: _tensor_account(tensor) for name, tensor in item.processed.tensors.items()},
        }
    return described


def _tensor_account(tensor) -> dict:
    return {
        "shape": list(tensor.shape),
        "dtype": torch_name(tensor),  # bfloat16 by its name (mmprep.processors.dtypes)
        "xxh3": xxhash.xxh3_64_hexdigest(tensor.data),  # a fingerprint: 10x cheaper than crc32
    }


def _apply_stop(text: str, stops: tuple[str, ...]) -> tuple[str, FinishReason]:
    """Cut the text before the first stop sequence, as a model's answer would end."""
    cut = min((i for i in (text.find(s) for s in stops if s) if i >= 0), default=-1)
    return (text[:cut], "stop") if cut >= 0 else (text, "stop")


def _prompt(prompt) -> dict:
    """With --model: the prompt's length, its ids' fingerprint and where each item sits."""
    ids = prompt.token_ids.astype("<i8").tobytes()  # the bytes of the ids as int64s
    return {
        "tokens": len(prompt.token_ids),
        "xxh3": xxhash.xxh3_64_hexdigest(ids),
        "placeholders": [
            {"modality": p.modality, "media_index": p.media_index, "offset": p.offset, "length": p.length}
            for p in prompt.placeholders
        ],
    }


def from_settings(settings: Settings) -> EchoEngine:
    """`--engine echo` (registry.py)."""
    return EchoEngine(settings.echo_chars_per_token)
