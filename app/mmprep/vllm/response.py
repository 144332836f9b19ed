"""vLLM's GenerateResponse, whole or streamed (vllm 0.33.0, output_mode "tokens"), read
into EngineOutputs.

A choice carries `token_ids`, `finish_reason` ("stop", "length"; "abort" when vLLM gave
up on the request) and, when asked, `logprobs.content`: per token its id and logprob, and
`top_logprobs`, the sampled token first and then the best candidates in rank order (k or
k + 1 entries), which mmprep cuts to the client's top_logprobs, best first. A whole answer
has `usage`; a stream's last chunk (stream_options.include_usage) has it with no choices.
"""

from __future__ import annotations

from typing import Any

from ..interface.engine import EngineHTTPError, EngineOutput, FinishReason, TokenLogprob


class BadAnswer(ValueError):
    """An answer that is not a GenerateResponse."""


def choice_outputs(
    choice: dict[str, Any], top_logprobs: int
) -> tuple[tuple[int, ...], tuple[TokenLogprob, ...]]:
    """A choice's (token ids, logprobs), checked."""
    if not isinstance(choice, dict):
        raise BadAnswer("a choice is not an object")
    token_ids = choice.get("token_ids") or []
    if not isinstance(token_ids, list) or not all(
        isinstance(t, int) and not isinstance(t, bool) for t in token_ids
    ):
        raise BadAnswer("token_ids is not a list of integers")
    content = (choice.get("logprobs") or {}).get("content") or []
    logprobs = tuple(_token_logprob(entry, top_logprobs) for entry in content)
    if logprobs and len(logprobs) != len(token_ids):
        raise BadAnswer(f"{len(logprobs)} logprobs for {len(token_ids)} tokens")
    return tuple(token_ids), logprobs


def finish_reason(choice: dict[str, Any]) -> FinishReason | None:
    """The choice's finish reason as mmprep names it; an abort is the upstream's failure."""
    reason = choice.get("finish_reason")
    if reason is None:
        return None
    if reason == "abort":
        raise EngineHTTPError("the upstream vLLM aborted the generation", 502, "upstream_aborted")
    return "length" if reason == "length" else "stop"


def usage_counts(answer: dict[str, Any]) -> tuple[int | None, int | None]:
    usage = answer.get("usage") or {}
    if not isinstance(usage, dict):
        raise BadAnswer("usage is not an object")
    return usage.get("prompt_tokens"), usage.get("completion_tokens")


def whole_answer(answer: Any, top_logprobs: int) -> EngineOutput:
    """A GenerateResponse (stream false) as one EngineOutput."""
    if not isinstance(answer, dict) or not isinstance(answer.get("choices"), list) or not answer["choices"]:
        raise BadAnswer("no choices")
    choice = answer["choices"][0]
    token_ids, logprobs = choice_outputs(choice, top_logprobs)
    prompt_tokens, completion_tokens = usage_counts(answer)
    return EngineOutput(
        token_ids=token_ids,
        logprobs=logprobs,
        finish_reason=finish_reason(choice) or "stop",
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
    )


def _token_logprob(entry: Any, top_logprobs: int) -> TokenLogprob:
    if not isinstance(entry, dict) or not isinstance(entry.get("token_id"), int):
        raise BadAnswer("a logprobs entry has no token_id")
    best: dict[int, float] = {}
    for candidate in sorted(entry.get("top_logprobs") or [], key=lambda c: -float(c["logprob"])):
        best.setdefault(int(candidate["token_id"]), float(candidate["logprob"]))
    top = tuple(best.items())[:top_logprobs]
    return TokenLogprob(int(entry["token_id"]), float(entry["logprob"]), top)
