"""Engine outputs to OpenAI objects: chat.completion, chat.completion.chunk, SSE lines."""

from __future__ import annotations

import json
import time


def sse(payload: dict | str) -> str:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n"


SSE_DONE = sse("[DONE]")


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


class CompletionBuilder:
    """Builds the response objects of one request: same id, model and creation time."""

    def __init__(self, request_id: str, model: str, include_usage: bool = False):
        # The completion's id, as vLLM makes it from a client's X-Request-Id.
        self.request_id = request_id if request_id.startswith("chatcmpl-") else f"chatcmpl-{request_id}"
        self.model, self.created = model, int(time.time())
        self.include_usage = include_usage

    def completion(self, text: str, finish_reason: str, usage_: dict) -> dict:
        return {
            "id": self.request_id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "logprobs": None,
                    "finish_reason": finish_reason,
                }
            ],
            "usage": usage_,
        }

    def chunk(self, delta: dict, finish_reason: str | None = None) -> dict:
        chunk = self._chunk([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}])
        if self.include_usage:
            chunk["usage"] = None  # as OpenAI: null on every chunk but the last
        return chunk

    def usage_chunk(self, usage_: dict) -> dict:
        return {**self._chunk([]), "usage": usage_}

    def _chunk(self, choices: list) -> dict:
        return {
            "id": self.request_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }
