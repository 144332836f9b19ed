"""Open what a caller hands us (bytes, a path or a file object) as an FFmpeg container."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO

import av

from .errors import CorruptMediaError, MediaNotFoundError
from .sniff import HEAD_BYTES, describe_bytes

Source = bytes | bytearray | memoryview | str | os.PathLike | BinaryIO

# What PyAV raises on input FFmpeg cannot make sense of. Anything else is our bug.
FFMPEG_ERRORS = (av.FFmpegError, EOFError, UnicodeDecodeError)

# PyAV before 19 decodes every metadata tag when it opens a container, and a tag that is not
# UTF-8 fails the open unless told to replace what it cannot decode; PyAV 19 decodes tags only
# when read (we never read them) and no longer takes the option.
_OPEN_OPTIONS = {"metadata_errors": "replace"} if int(av.__version__.split(".")[0]) < 19 else {}


class ReopenableSource:
    """A source that can be opened more than once (the decoder may need a second pass)."""

    def __init__(self, source: Source):
        if isinstance(source, (bytes, bytearray, memoryview)):
            self._data, self._path, self._file = bytes(source), None, None
            if not self._data:
                raise CorruptMediaError("the input is empty (0 bytes)")
        elif isinstance(source, (str, os.PathLike)):
            self._data, self._path, self._file = None, os.fspath(source), None
            self._check_path()
        elif hasattr(source, "read"):
            self._data, self._path, self._file = None, None, source
            if not _seekable(source):
                self._data, self._file = source.read(), None
                if not self._data:
                    raise CorruptMediaError("the input is empty (0 bytes)")
            else:
                self._start = source.tell()
        else:
            raise TypeError(f"source must be bytes, a path or a binary file, not {type(source).__name__}")

    def _check_path(self) -> None:
        try:
            size = os.path.getsize(self._path)
        except OSError as error:
            raise MediaNotFoundError(f"cannot read {self._path!r}: {error.strerror}") from error
        if size == 0:
            raise CorruptMediaError(f"{self._path!r} is empty (0 bytes)")

    @contextmanager
    def open(self) -> Iterator[av.container.InputContainer]:
        if self._path is not None:
            target = self._path
        elif self._file is not None:
            self._file.seek(self._start)
            target = self._file
        else:
            target = io.BytesIO(self._data)
        try:
            container = av.open(target, mode="r", **_OPEN_OPTIONS)
        except FFMPEG_ERRORS as error:
            raise CorruptMediaError(self._unreadable(error)) from error
        try:
            yield container
        finally:
            container.close()

    def _unreadable(self, error: Exception) -> str:
        """Why FFmpeg found no media here, in words a person can act on."""
        kind = describe_bytes(self._head())
        if kind is not None and not kind.endswith(("video", "file")):  # text, a document, an image...
            return f"this is {kind}, not a video"
        reason = getattr(error, "strerror", None) or str(error)  # without FFmpeg's "'<none>'"
        if kind is None:
            return f"FFmpeg cannot read this input as media ({reason})"
        return f"FFmpeg cannot read this input as media ({reason}); it starts like {kind}, so it may be damaged"

    def _head(self) -> bytes:
        if self._data is not None:
            return self._data[:HEAD_BYTES]
        if self._path is not None:
            try:
                with open(self._path, "rb") as file:
                    return file.read(HEAD_BYTES)
            except OSError:  # a directory, say: nothing to sniff
                return b""
        self._file.seek(self._start)
        return self._file.read(HEAD_BYTES)


def _seekable(file) -> bool:
    try:
        return bool(file.seekable())
    except (AttributeError, OSError, ValueError):
        return False
