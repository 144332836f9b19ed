"""Camera-like test footage, generated with PyAV's encoders and cached on disk.

Flat colours and static gradients decode many times faster than real video, so a
benchmark on them flatters any decoder. These clips pan over a textured landscape,
move objects across it and add sensor grain to every frame, which gives the encoder
real motion and residual to code, and the decoder real work.
"""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
from PIL import Image

CACHE = Path(__file__).resolve().parent / ".cache"


def _texture(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """Smooth colour blobs with finer detail on top, like out-of-focus scenery."""
    layers = np.zeros((height, width, 3), np.float32)
    for scale, weight in ((96, 150.0), (24, 45.0), (4, 14.0)):
        small = rng.random((max(2, height // scale), max(2, width // scale), 3), dtype=np.float32)
        image = Image.fromarray((small * 255).astype(np.uint8)).resize((width, height), Image.BICUBIC)
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


def camera_clip(name: str, width: int, height: int, seconds: float, fps: int = 30,
                codec: str = "libx264", container: str = "mp4", options: dict | None = None) -> Path:
    """The clip `name` in the cache, encoded first if it is not there yet."""
    path = CACHE / name
    if path.exists():
        return path
    CACHE.mkdir(exist_ok=True)
    partial = path.with_suffix(".partial" + path.suffix)
    with av.open(str(partial), "w", format=container) as out:
        stream = out.add_stream(codec, rate=fps, options=options or {"preset": "veryfast", "crf": "23"})
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for i, rgb in enumerate(camera_frames(width, height, int(seconds * fps), fps)):
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
            frame.pts = i
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    partial.rename(path)
    return path
