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


def mp4_index_missing(read_at: Callable[[int, int], bytes], size: int) -> bool:
    """Whether an MP4/MOV file of `size` bytes ends before its index (the `moov` box): what a
    download or a recording cut off before the end leaves, when the index is written last.
    `read_at(offset, count)` reads the file; only box headers are read."""
    offset = 0
    while offset + 8 <= size:
        header = read_at(offset, 16)
        box_size, box_type = int.from_bytes(header[:4], "big"), header[4:8]
        if box_type == b"moov":
            return False
        if box_size == 1 and len(header) >= 16:  # a 64-bit size follows the type
            box_size = int.from_bytes(header[8:16], "big")
        if box_size == 0 or box_size < 8:  # to the end of the file, or not a box at all
            return box_size == 0
        offset += box_size
    return True


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
