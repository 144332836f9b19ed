"""What the first bytes of an input that FFmpeg or Pillow cannot read look like, so the
error can say "this is an HTML page, not a video" instead of an FFmpeg errno."""

from __future__ import annotations

from collections.abc import Callable

HEAD_BYTES = 512  # enough to see past a byte-order mark, a doctype and some whitespace

_SIGNATURES = (
    (0, b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (0, b"\xff\xd8\xff", "a JPEG image"),
    (0, b"GIF8", "a GIF image"),
    (0, b"BM", "a BMP image"),
    (8, b"WEBP", "a WebP image"),
    (8, b"AVI ", "an AVI video"),
    (8, b"WAVE", "a WAV audio file"),
    (4, b"ftyp", "an MP4/MOV file"),
    (0, b"\x1a\x45\xdf\xa3", "a Matroska/WebM file"),
    (0, b"OggS", "an Ogg file"),
    (0, b"ID3", "an MP3 audio file"),
    (0, b"%PDF-", "a PDF document"),
    (0, b"PK\x03\x04", "a ZIP archive (or an Office document)"),
    (0, b"\x1f\x8b", "a gzip archive"),
)


# The top-level boxes a cut can end in, by what they hold.
_MP4_BOXES = {b"moov": "its index (the moov box)", b"mdat": "its media data (the mdat box)"}


def mp4_cut_short(read_at: Callable[[int, int], bytes], size: int) -> str | None:
    """How an MP4/MOV file of `size` bytes ends early, as a download or a recording cut off
    before the end leaves it: "before its index (the moov box)" (the index is written last),
    "inside its media data (the mdat box)" (written first, for streaming), ...; None when
    every top-level box is whole and the index is there. `read_at(offset, count)` reads the
    file; only box headers are read."""
    offset, indexed = 0, False
    while offset + 8 <= size:
        header = read_at(offset, 16)
        box_size, box_type = int.from_bytes(header[:4], "big"), header[4:8]
        if box_size == 1 and len(header) >= 16:  # a 64-bit size follows the type
            box_size = int.from_bytes(header[8:16], "big")
        if box_size == 0:  # the box runs to the end of the file, whatever its length
            return None if indexed or box_type == b"moov" else "before its index (the moov box)"
        if box_size < 8:  # not a box at all: not ours to judge
            return None
        if offset + box_size > size:  # an index not yet reached is what the reader misses most
            if not indexed and box_type != b"moov":
                return "before its index (the moov box)"
            return "inside " + _MP4_BOXES.get(box_type, f"its {box_type.decode('latin-1')} box")
        indexed = indexed or box_type == b"moov"
        offset += box_size
    return None if indexed else "before its index (the moov box)"


def describe_bytes(head: bytes) -> str | None:
    """'an HTML page', 'a PDF document', 'plain text'..., or None when nothing is recognised."""
    for offset, signature, name in _SIGNATURES:
        if head[offset : offset + len(signature)] == signature:
            return name
    text = _as_text(head)
    if text is None:
        return None
    start = text.lstrip().lower()
    if start.startswith(("<!doctype html", "<html")) or "<html" in start[:200]:
        return "an HTML page"
    if start.startswith(("<?xml", "<svg")):
        return "XML text"
    if start.startswith(("{", "[")):
        return "JSON text"
    return "plain text"


def _as_text(head: bytes) -> str | None:
    """`head` as text if it reads as UTF-8 with no control characters but whitespace."""
    try:
        text = head.removeprefix(b"\xef\xbb\xbf").decode("utf-8")
    except UnicodeDecodeError as error:
        if error.start < len(head) - 3:  # not just a character cut off at the end
            return None
        text = head[: error.start].decode("utf-8")
    if not text.strip() or any(ord(c) < 32 and c not in "\t\n\r\f" for c in text):
        return None
    return text
