"""A data: URL (RFC 2397) as a value: its media type, and its payload kept as the bytes the
client sent, so a payload of hundreds of MiB is measured and refused before anything decodes
it, and decoded in pieces that never hold the event loop for long."""

from __future__ import annotations

import binascii
import operator
import pickle
from dataclasses import dataclass
from typing import SupportsIndex
from urllib.parse import unquote_to_bytes

import pybase64

from .errors import FetchTooLargeError, InvalidMediaURLError

# Base64 is decoded this many characters at a time (a multiple of 4): each piece holds the
# GIL for a few milliseconds, so the event loop runs between pieces.
PIECE_CHARS = 4 * 1024 * 1024


@dataclass(frozen=True, eq=False)
class DataURL:
    media_type: str | None
    is_base64: bool
    payload: bytes | memoryview  # as sent: base64 or percent-encoded ASCII

    @classmethod
    def parse(cls, url: str | bytes | memoryview) -> DataURL:
        """`url` from "data:" on; a str, or the raw bytes of a long JSON string (no escapes)."""
        raw = memoryview(url.encode() if isinstance(url, str) else url)
        comma = bytes(raw[: min(len(raw), 1024)]).find(b",")
        if comma < 0:
            raise InvalidMediaURLError("malformed data URL: no ',' between its header and its data")
        fields = bytes(raw[5:comma]).decode("ascii", "replace").split(";")
        return cls(fields[0] or None, "base64" in fields[1:], raw[comma + 1 :])

    def size_bound(self) -> int:
        """The most bytes the payload can decode to, known from its length alone."""
        return len(self.payload) * 3 // 4 if self.is_base64 else len(self.payload)

    def decode(self, cap: int) -> bytes:
        """The payload's bytes; FetchTooLargeError past `cap`, before any decoding if the
        length alone shows it. Slow for big payloads: call it off the event loop."""
        if self.size_bound() > cap:
            raise FetchTooLargeError(
                f"the data URL holds about {self.size_bound()} bytes (judged by its length), "
                f"more than the {cap} allowed"
            )
        if not self.is_base64:
            return unquote_to_bytes(bytes(self.payload))
        try:  # pybase64's SIMD decoder, with vLLM's own check (validate=True): 5x binascii's speed
            return b"".join(
                pybase64.b64decode(self.payload[start : start + PIECE_CHARS], validate=True)
                for start in range(0, len(self.payload), PIECE_CHARS)
            )
        except binascii.Error as error:
            raise InvalidMediaURLError(f"the data URL's base64 is invalid: {error}") from error

    def __reduce_ex__(
        self, protocol: SupportsIndex
    ) -> tuple[type[DataURL], tuple[str | None, bool, pickle.PickleBuffer | bytes]]:
        """Pickled (to a Ray decode replica) with the payload as a buffer: with protocol 5,
        Ray puts it in its object store as it is, not a copy inside the pickle; a memoryview
        of the request body could not be pickled at all."""
        payload = pickle.PickleBuffer(self.payload) if operator.index(protocol) >= 5 else bytes(self.payload)
        return DataURL, (self.media_type, self.is_base64, payload)

    def __repr__(self) -> str:  # never the payload: it can be hundreds of MiB
        return f"DataURL({self.media_type!r}, {len(self.payload)} bytes)"

    def __eq__(self, other) -> bool:
        return isinstance(other, DataURL) and (self.media_type, self.is_base64, self.payload) == (
            other.media_type,
            other.is_base64,
            other.payload,
        )

    def __hash__(self) -> int:  # cheap: the length and both ends, not hundreds of MiB
        ends = bytes(self.payload[:64]) + bytes(self.payload[-64:])
        return hash((self.media_type, self.is_base64, len(self.payload), ends))
