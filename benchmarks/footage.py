"""Camera-like test footage (see app/mmprep/bench/synthetic.py), encoded once and cached on disk."""

from __future__ import annotations

from pathlib import Path

from mmprep.bench.synthetic import write_clip

CACHE = Path(__file__).resolve().parent / ".cache"


def camera_clip(
    name: str, width: int, height: int, seconds: float, fps: int = 30, codec: str = "h264"
) -> Path:
    """The clip `name` in the cache, encoded first if it is not there yet."""
    path = CACHE / name
    if path.exists():
        return path
    CACHE.mkdir(exist_ok=True)
    return write_clip(path, width, height, seconds, fps, codec)
