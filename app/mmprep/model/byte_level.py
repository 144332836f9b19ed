"""The byte-level alphabet of GPT-2-style vocabularies (Qwen's among them): each byte written
as one printable character, so every token of bytes is a string of the vocabulary."""

from __future__ import annotations

from functools import cache


@cache
def byte_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map of bytes to the characters byte-level vocabularies use."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    chars, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            chars[byte] = chr(byte)
        else:
            chars[byte] = chr(256 + extra)
            extra += 1
    return chars
