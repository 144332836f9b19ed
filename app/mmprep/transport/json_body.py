"""The request body as JSON, read and parsed without holding the event loop.

A chat request may carry hundreds of MiB of data URLs. Parsed the usual way, such a body is
joined, decoded and parsed on the event loop, which then answers nobody (not even /health)
for seconds, and its long strings are copied three times over. Here the body is gathered
into one buffer as it arrives; a body over SMALL_BODY bytes is then taken apart in a thread:
every string longer than CUT_STRING bytes is cut out (a view of the buffer, not a copy),
the small rest (the skeleton) is parsed, and the long strings go back where they were: a
data URL longer than LONG_STRING where a URL goes (`url`, `image_url`, `video_url`,
`audio_url`) as a DataURL, whose size is judged by its length before anything decodes it;
anything else as str.

The loop stays free because no single step holds the GIL for long (one json.loads call
holds it for its whole text): finding the strings is a series of short C searches, each
string cut out is parsed by itself (a huge text decoded TEXT_PIECE bytes at a time), and a
skeleton up to SMALL_SKELETON bytes is one short json.loads. A bigger skeleton (millions of
numbers or short strings) is parsed by the json module's own pure-Python scanner instead,
whose C steps are one short value each: slower, but the loop runs between them.
"""

from __future__ import annotations

import asyncio
import bisect
import codecs
import json
import re
import secrets
from dataclasses import dataclass
from json.scanner import py_make_scanner  # type: ignore[attr-defined]  # typeshed names only make_scanner
from typing import Any

from starlette.requests import Request

from ..core.errors import ServiceError
from ..media.data_url import DataURL

SMALL_BODY = 1 << 20  # parsed at once, on the loop: a few ms of json.loads at most
CUT_STRING = 4 << 10  # a longer string is taken out of the skeleton and parsed alone
LONG_STRING = 64 << 10  # a longer data URL where a URL goes stays the client's bytes
SMALL_SKELETON = 4 << 20  # parsed by json.loads in one call: tens of ms at most
TEXT_PIECE = 1 << 20  # a string's text is decoded this much at a time


async def read_json_body(request: Request) -> Any:
    """The body, parsed. ServiceError (400 or 415) saying what is wrong with it otherwise.
    Raises starlette's ClientDisconnect if the client leaves (or the body limit cut it off)."""
    _check_content_type(request.headers.get("content-type"))
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
    if not body or body.isspace():
        raise ServiceError(
            "the request has no body: send the chat request as a JSON object", "invalid_request"
        )
    if len(body) <= SMALL_BODY:
        return _loads(body, [])
    return await asyncio.to_thread(_parse_large, body)


def _check_content_type(declared: str | None) -> None:
    if declared is None:
        return  # no header at all: read the body as JSON, as most servers do
    media_type = declared.split(";")[0].strip().lower()
    if media_type != "application/json" and not media_type.endswith("+json"):
        raise ServiceError(
            f"the request body must be JSON sent with 'Content-Type: application/json', not {declared!r} "
            "(with curl, add -H 'Content-Type: application/json')",
            "unsupported_media_type",
            status=415,
        )


def _parse_large(body: bytearray) -> Any:
    skeleton, long_strings, shifts = _cut_long_strings(body)
    document = _loads(skeleton, shifts, bounded=len(skeleton) > SMALL_SKELETON)
    return _put_back(document, long_strings) if long_strings else document


def _loads(text: bytes | bytearray, shifts: list[tuple[int, int]], bounded: bool = False) -> Any:
    """`text` parsed; `bounded`: by the pure-Python scanner, which lets go of the GIL
    between values (json.loads holds it for the whole text)."""
    try:
        return _bounded_loads(text) if bounded else json.loads(text)
    except UnicodeDecodeError as error:
        raise ServiceError(
            f"the request body is not UTF-8 text (byte {error.start}): send JSON", "invalid_request"
        ) from None
    except json.JSONDecodeError as error:
        at = error.pos + _shift_before(shifts, error.pos)
        raise ServiceError(
            f"the request body is not valid JSON: {error.msg} at byte {at} "
            f"(line {error.lineno}); send the chat request as a JSON object",
            "invalid_request",
        ) from None


def _bounded_loads(text: bytes | bytearray) -> Any:
    """json.loads(text), value by value: the same values and errors, at the pure-Python
    scanner's pace (the C scanner is what json.loads uses when it can)."""
    decoder = json.JSONDecoder()
    # what JSONDecoder falls back to without its C part (typeshed leaves the attribute out)
    decoder.scan_once = py_make_scanner(decoder)  # type: ignore[attr-defined]
    return decoder.decode(text.decode(json.detect_encoding(text), "surrogatepass"))  # as json.loads


# -- long strings out, and back in -------------------------------------------------------


def _cut_long_strings(body: bytearray) -> tuple[bytearray, dict[str, LongString], list[tuple[int, int]]]:
    """The body with every long string replaced by a short token; the strings by token;
    and where tokens shift positions (skeleton position after a token, bytes removed up to
    there), so an error message can name the byte in the body."""
    view = memoryview(body)
    nonce = secrets.token_hex(8)  # a client cannot guess it, so no string of theirs is a token
    skeleton = bytearray()
    cut: dict[str, LongString] = {}
    shifts: list[tuple[int, int]] = []
    copied = start = 0
    while (opening := body.find(b'"', start)) >= 0:
        closing = _string_end(body, opening + 1)
        if closing < 0:
            break  # unterminated: json.loads says so
        if closing - opening - 1 > CUT_STRING:
            token = f"\0mmprep-long-string:{nonce}:{len(cut)}"
            skeleton += view[copied:opening]
            skeleton += json.dumps(token).encode()
            escaped = body.find(b"\\", opening + 1, closing) >= 0
            cut[token] = LongString(view[opening + 1 : closing], escaped)
            copied = closing + 1
            shifts.append((len(skeleton), copied - len(skeleton)))
        start = closing + 1
    if not cut:
        return body, {}, []
    skeleton += view[copied:]
    return skeleton, cut, shifts


def _string_end(body: bytearray, start: int) -> int:
    """The position of the quote that closes the JSON string starting at `start`, or -1."""
    quote = body.find(b'"', start)
    while quote >= 0:
        backslash = body.find(b"\\", start, quote)
        if backslash < 0:
            return quote
        start = backslash + 2  # past the escaped character, which may be a quote
        if start > quote:
            quote = body.find(b'"', start)
    return -1


def _shift_before(shifts: list[tuple[int, int]], position: int) -> int:
    index = bisect.bisect_right(shifts, (position, float("inf"))) - 1
    return shifts[index][1] if index >= 0 else 0


URL_KEYS = (
    "url",
    "image_url",
    "video_url",
    "audio_url",
)  # where a data URL may stay bytes; anywhere else it is text


def _put_back(value: Any, long_strings: dict[str, LongString], key: str | None = None) -> Any:
    if isinstance(value, str):
        long = long_strings.get(value)
        return value if long is None else long.value(as_url=key in URL_KEYS)
    if isinstance(value, list):
        return [_put_back(item, long_strings) for item in value]
    if isinstance(value, dict):
        return {
            (long_strings[name].value(as_url=False) if name in long_strings else name): _put_back(
                item, long_strings, name
            )
            for name, item in value.items()
        }
    return value


@dataclass(frozen=True)
class LongString:
    raw: memoryview  # the JSON string's text between its quotes, escapes and all
    escaped: bool

    def value(self, as_url: bool) -> str | DataURL:
        """A long data URL where a URL goes, with nothing escaped, stays the client's bytes;
        anything else becomes text."""
        long_url = as_url and len(self.raw) > LONG_STRING and not self.escaped
        if long_url and bytes(self.raw[:5]).lower() == b"data:":
            return DataURL.parse(self.raw)
        huge = len(self.raw) > TEXT_PIECE and not self.escaped
        text = _plain_text(self.raw) if huge else None
        return text if text is not None else _loads(b'"' + bytes(self.raw) + b'"', [])


# what JSON forbids unescaped in a string (json.loads's strict mode refuses it too)
CONTROL_CHARACTER = re.compile(rb"[\x00-\x1f]")


def _plain_text(raw: memoryview) -> str | None:
    """The text of a JSON string without escapes, as json.loads would give it, decoded a
    piece at a time (one decode of hundreds of MiB would hold the GIL throughout); None if
    it holds a control character or bytes that are not UTF-8, for json.loads to name."""
    decoder = codecs.getincrementaldecoder("utf-8")("surrogatepass")  # json.loads's errors=
    pieces = []
    for start in range(0, len(raw), TEXT_PIECE):
        piece = raw[start : start + TEXT_PIECE]
        if CONTROL_CHARACTER.search(piece):
            return None
        try:
            pieces.append(decoder.decode(piece, final=start + TEXT_PIECE >= len(raw)))
        except UnicodeDecodeError:
            return None
    return "".join(pieces)
