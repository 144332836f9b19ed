"""The file name endings of the media each decoder is for, for a caller that picks media
files out of a folder (`mmprep bench`, `mmprep preview`). The decoders themselves go by the
bytes, never by the name."""

from __future__ import annotations

VIDEO_SUFFIXES = frozenset(
    {".mp4", ".m4v", ".mov", ".webm", ".mkv", ".avi", ".ts", ".mpg", ".mpeg", ".flv", ".3gp"}
)
IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp", ".tif", ".tiff"})
