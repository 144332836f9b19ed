"""Camera-like synthetic video, encoded with the encoders PyAV's wheel bundles.

Flat colours and static gradients decode many times faster than real video, so a
benchmark on them flatters any decoder. These clips pan over a textured landscape, move
objects across it and add sensor grain to every frame, which gives the encoder real
motion and residual to code, and the decoder real work.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np
from PIL import Image

CLIP_VERSION = 1  # part of the cache key: raise it when the footage or the encoder options change


def synthetic_cache() -> Path:
    """Where generated clips are kept between runs: $XDG_CACHE_HOME/mmprep/synthetic, or
    ~/.cache/mmprep/synthetic."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mmprep" / "synthetic"


@dataclass(frozen=True)
class Codec:
    encoder: str  # FFmpeg encoder name
    container: str  # FFmpeg muxer name
    suffix: str
    options: dict[str, str]  # fast presets: a benchmark's setup should not take longer than its run


CODECS = {
    "h264": Codec("libx264", "mp4", ".mp4", {"preset": "veryfast", "crf": "23"}),
    "hevc": Codec(
        "libx265", "mp4", ".mp4", {"preset": "veryfast", "crf": "28", "x265-params": "log-level=error"}
    ),
    "vp9": Codec(
        "libvpx-vp9", "webm", ".webm", {"crf": "32", "b": "0", "deadline": "realtime", "cpu-used": "8"}
    ),
    "av1": Codec("libsvtav1", "webm", ".webm", {"preset": "11", "crf": "35"}),
}


def _texture(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """Smooth colour blobs with finer detail on top, like out-of-focus scenery."""
    layers = np.zeros((height, width, 3), np.float32)
    for scale, weight in ((96, 150.0), (24, 45.0), (4, 14.0)):
        small = rng.random((max(2, height // scale), max(2, width // scale), 3), dtype=np.float32)
        image = Image.fromarray((small * 255).astype(np.uint8)).resize(
            (width, height), Image.Resampling.BICUBIC
        )
        layers += (np.asarray(image, np.float32) / 255 - 0.5) * weight
    return np.clip(layers + 128, 0, 255).astype(np.uint8)


def camera_frames(width: int, height: int, count: int, fps: float, seed: int = 0):
    """Yield `count` RGB frames: a slow pan, two moving objects, fresh grain on each."""
    rng = np.random.default_rng(seed)
    scene = _texture(rng, height * 2, width * 2)
    box = max(8, min(width, height) // 6)
    for i in range(count):
        t = i / fps
        x = int((np.sin(t / 7) + 1) / 2 * width)
        y = int((np.cos(t / 11) + 1) / 2 * height)
        grain = rng.integers(-6, 7, (height, width, 1), dtype=np.int16)  # fresh noise: not predictable
        frame = scene[y : y + height, x : x + width].astype(np.int16) + grain
        for k, colour in enumerate(((230, 60, 40), (40, 90, 220))):
            bx = int((np.sin(t * (0.9 + k) + k) + 1) / 2 * (width - box))
            by = int((np.cos(t * (0.6 + k)) + 1) / 2 * (height - box))
            frame[by : by + box, bx : bx + box] = colour
        yield np.clip(frame, 0, 255).astype(np.uint8)


def write_clip(
    path: Path, width: int, height: int, seconds: float, fps: int = 30, codec: str = "h264", seed: int = 0
) -> Path:
    """Encode `seconds` of camera-like footage to `path`, written whole or not at all: it is
    encoded into a file of its own name and renamed over `path` when complete, so two
    processes making the same clip at once each leave a whole file, and no reader sees half."""
    spec = CODECS[codec]
    if codec == "av1":
        os.environ.setdefault("SVT_LOG", "1")  # else SVT-AV1 prints a page of banner to stderr per clip
    partial = path.with_name(f".{path.name}.{uuid.uuid4().hex}.partial")
    try:
        with av.open(str(partial), "w", format=spec.container) as out:
            stream = out.add_stream(spec.encoder, rate=fps, options=dict(spec.options))
            if not isinstance(stream, av.VideoStream):
                raise ValueError(f"{spec.encoder} is not a video encoder")
            stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
            for i, rgb in enumerate(camera_frames(width, height, max(1, round(seconds * fps)), fps, seed)):
                frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
                frame.pts = i
                out.mux(stream.encode(frame))
            out.mux(stream.encode(None))
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    return path
