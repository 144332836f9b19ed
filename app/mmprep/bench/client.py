"""One chat request to an OpenAI-compatible server, timed, and the record of how it went.

Streaming answers are read as server-sent events ("data: {...}" lines, "data: [DONE]"
last). TTFT is the time to the first chunk carrying content (or reasoning content); the
inter-token latencies are the gaps between such chunks. The target's Server-Timing header
(fetch, decode, preprocess; mmprep sends it) is kept when present; nothing here depends on
which server answers.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx


@dataclass
class RequestRecord:
    number: int  # the request's place in the whole bench (warm-ups included)
    media: list[dict] = field(default_factory=list)  # what was sent: kind, name, bytes, crc32, url
    start_ms: float = 0.0  # when it was sent, from the start of its run
    ok: bool = False
    status: int | None = None  # HTTP status
    error: str | None = None  # why it failed: "<status> <code>", "stream <code>", "transport <exception>"...
    message: str | None = None
    headers_ms: float | None = None  # time to the response headers
    ttft_ms: float | None = None  # time to the first content token (streaming only)
    latency_ms: float | None = None  # time to the end of the answer
    itl_ms: list[float] = field(default_factory=list)  # gaps between content chunks
    output_tokens: int | None = None
    prompt_tokens: int | None = None
    tokens_from: str | None = None  # "usage" (the server's count) or "chunks" (content chunks counted)
    server_timing: dict[str, float] = field(default_factory=dict)  # milliseconds, as the target reported them
    text: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    def fail(self, error: str, message: str | None = None) -> None:
        self.ok, self.error, self.message = False, error, message


@dataclass(frozen=True)
class RequestTemplate:
    """What every request of a bench asks for; only the media parts differ."""

    model: str
    prompt: str
    stream: bool
    max_tokens: int | None
    video_sampling: dict[str, Any]
    extra: dict[str, Any]
    prompt_words: int = 0

    def body(self, parts: list[dict], number: int = 0) -> dict:
        """An OpenAI chat-completions body: one user message, the text then the media parts."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "user", "content": [{"type": "text", "text": self.text(number)}, *parts]}],
            "stream": self.stream,
        }
        if self.stream:
            body["stream_options"] = {"include_usage": True}  # the server's token count, when it gives one
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if self.video_sampling:
            body["media_io_kwargs"] = {"video": self.video_sampling}  # as vLLM and mmprep take it
        body.update(self.extra)
        return body

    def text(self, number: int) -> str:
        """The prompt, then `prompt_words` words that start differently for every request
        (no prefix cache can answer for them)."""
        if not self.prompt_words:
            return self.prompt
        words = (FILLER[(number + i) % len(FILLER)] for i in range(self.prompt_words))
        return f"{self.prompt} {number} " + " ".join(words)


FILLER = (
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "lazy",
    "dog",
    "while",
    "seven",
    "tired",
    "owls",
    "watch",
    "from",
    "an",
    "old",
    "oak",
    "tree",
    "near",
    "river",
    "bank",
    "at",
    "night",
    "under",
    "stars",
)


def parse_server_timing(header: str | None) -> dict[str, float]:
    """`fetch;dur=1.5, decode;dur=20` -> {"fetch": 1.5, "decode": 20.0}; entries without
    a duration are left out."""
    timings = {}
    for entry in (header or "").split(","):
        name, *params = (piece.strip() for piece in entry.split(";"))
        for param in params:
            key, _, value = param.partition("=")
            if name and key.strip().lower() == "dur":
                try:
                    timings[name] = float(value.strip().strip('"'))
                except ValueError:
                    pass
    return timings


def error_code(body: bytes) -> tuple[str | None, str | None]:
    """(code, message) from an error body: OpenAI's {"error": {...}} or vLLM's older
    {"object": "error", ...}; a numeric code (vLLM repeats the status) gives way to the type."""
    try:
        payload = json.loads(body)
    except ValueError:
        return None, body[:200].decode(errors="replace") or None
    if not isinstance(payload, dict):
        return None, None
    inner = payload.get("error")
    error = inner if isinstance(inner, dict) else payload
    code = error.get("code")
    if not isinstance(code, str):
        code = error.get("type")
    message = error.get("message")
    return code, str(message)[:300] if message is not None else None


FAILURE_KINDS = ("connection", "refused", "http", "timeout", "stream")


def failure_kind(error: str) -> str:
    """What a failed request's `error` says went wrong: `connection` (the connection was
    refused, reset or closed under the request: a client sees no answer at all), `refused`
    (the server answered 503 or 429: too busy, retry), `http` (any other error status),
    `timeout` (bench's own --timeout), `stream` (a broken or erroneous stream)."""
    if error.startswith("transport "):
        return "connection"
    if error == "timeout":
        return "timeout"
    status = error.split(" ", 1)[0]
    if status.isdigit():
        return "refused" if status in ("503", "429") else "http"
    return "stream"


class ChatClient:
    def __init__(self, http: httpx.AsyncClient, base_url: str, stream: bool):
        self._http, self._url, self._stream = http, f"{base_url}/v1/chat/completions", stream

    async def send(self, number: int, body: dict, media: list[dict]) -> RequestRecord:
        record = RequestRecord(number, media)
        start = time.perf_counter()
        try:
            async with self._http.stream("POST", self._url, json=body) as response:
                record.headers_ms = _ms_since(start)
                record.status = response.status_code
                record.server_timing = parse_server_timing(response.headers.get("server-timing"))
                if response.status_code != 200:
                    code, message = error_code(await response.aread())
                    record.fail(
                        f"{response.status_code} {code}" if code else str(response.status_code), message
                    )
                elif self._stream:
                    await _read_events(response, record, start)
                else:
                    _read_completion(await response.aread(), record)
        except httpx.TimeoutException as error:
            record.fail("timeout", f"{type(error).__name__}: {error}")
        except httpx.HTTPError as error:
            record.fail(f"transport {type(error).__name__}", str(error) or None)
        record.latency_ms = _ms_since(start)
        return record


async def _read_events(response: httpx.Response, record: RequestRecord, start: float) -> None:
    text, chunks, last, usage = [], 0, None, None
    async for line in response.aiter_lines():
        arrived = time.perf_counter()
        if not line.startswith("data:"):
            continue  # blank separators, comments, event names
        data = line[5:].strip()
        if data == "[DONE]":
            break
        try:
            event = json.loads(data)
        except ValueError:
            record.fail("stream invalid_json", data[:200])
            return
        if not isinstance(event, dict):
            record.fail("stream invalid_event", data[:200])
            return
        if "error" in event:
            code, message = error_code(data.encode())
            record.fail(f"stream {code}", message)
            return
        content = "".join(_delta_text(choice) for choice in event.get("choices") or [])
        if content:
            if last is None:
                record.ttft_ms = (arrived - start) * 1000
            else:
                record.itl_ms.append((arrived - last) * 1000)
            last, chunks = arrived, chunks + 1
            text.append(content)
        usage = event.get("usage") or usage
    else:
        record.fail("incomplete_stream", "the stream ended without data: [DONE]")
        return
    record.ok, record.text = True, "".join(text)
    _count_tokens(record, usage, chunks)


def _delta_text(choice: dict) -> str:
    delta = choice.get("delta") or {}
    return (delta.get("reasoning_content") or "") + (delta.get("content") or "")


def _read_completion(body: bytes, record: RequestRecord) -> None:
    try:
        answer = json.loads(body)
        record.text = "".join((c.get("message") or {}).get("content") or "" for c in answer["choices"])
    except (ValueError, KeyError, TypeError, AttributeError):
        record.fail("invalid_response", body[:200].decode(errors="replace"))
        return
    record.ok = True
    _count_tokens(record, answer.get("usage"), None)


def _count_tokens(record: RequestRecord, usage: dict | None, chunks: int | None) -> None:
    if usage and usage.get("completion_tokens") is not None:
        record.output_tokens, record.prompt_tokens = usage["completion_tokens"], usage.get("prompt_tokens")
        record.tokens_from = "usage"
    elif chunks is not None:
        record.output_tokens, record.tokens_from = chunks, "chunks"


def _ms_since(start: float) -> float:
    return (time.perf_counter() - start) * 1000
