"""The media fixtures, as tests across the suite use them: where they are (tests/data/media),
the index each fixture frame painted into its pixels, and an independent reference decode with
the frames the sampling contract names, to check sampled frames against."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from tests.data.media.make_fixtures import read_painted_index

MEDIA = Path(__file__).parents[1] / "data" / "media"


def painted(frames: np.ndarray) -> list[int]:
    """The index each returned frame painted into its pixels (see make_fixtures.paint)."""
    return [read_painted_index(frame) for frame in frames]


@dataclass(frozen=True)
class Reference:
    """Every frame the plain PyAV loop yields from FFmpeg's best video stream."""

    pts: list[int]  # presentation times from the first frame's, in `time_base`
    time_base: Fraction
    indices: list[int]  # the index each frame painted into its pixels

    @property
    def times(self) -> np.ndarray:
        """Seconds from the first frame."""
        return np.array([float(p * self.time_base) for p in self.pts])

    def seconds(self, position: int) -> Fraction:
        return self.pts[position] * self.time_base


def reference_decode(path) -> Reference:
    """The oracle the sampler must agree with, written without any of its code."""
    pts, indices = [], []
    with av.open(str(path)) as container:
        stream = container.streams.best("video")
        if not isinstance(stream, av.VideoStream):
            raise ValueError(f"{path} has no video stream")
        time_base = Fraction(stream.time_base.numerator, stream.time_base.denominator)
        for frame in container.decode(stream):
            if frame.pts is None:
                raise ValueError(f"{path}: a frame without a pts")
            pts.append(frame.pts)
            rgb = frame.to_ndarray(format="rgb24")
            turns = round(frame.rotation / 90) % 4
            indices.append(read_painted_index(np.rot90(rgb, turns)))
    return Reference([p - pts[0] for p in pts], time_base, indices)


def reference_targets(
    ref: Reference,
    duration: float,
    fps: float | None = None,
    num_frames: int | None = None,
    max_frames: int | None = None,
):
    """The moments the contract names for a request, as exact seconds (Fractions)."""
    cap = max_frames or math.inf
    if num_frames is not None and num_frames != -1:  # never above max_frames: refused before this
        count = num_frames
        if count == 1:
            return [Fraction(0)]
        return [ref.seconds(-1) * j / (count - 1) for j in range(count)]
    if fps is not None:
        count = max(1, math.floor(round(duration * fps, 9)))
        if count <= cap:
            # k / r, allowed 0.1 microsecond for the float rounding of k / r
            return [Fraction(k) / Fraction(fps) + Fraction(1, 10**7) for k in range(count)]
    elif len(ref.pts) <= cap:
        return [ref.seconds(i) for i in range(len(ref.pts))]
    assert max_frames  # cap is finite here: it was below the frames asked for
    return [Fraction(k) * Fraction(duration) / max_frames + Fraction(1, 10**7) for k in range(max_frames)]


def on_screen(ref: Reference, targets) -> list[int]:
    """Positions of the frames on screen at `targets` (seconds), by the contract's words:
    the last frame starting at or before t, the first if none; each once."""
    chosen: list[int] = []
    for t in targets:
        started = [i for i in range(len(ref.pts)) if ref.seconds(i) <= t]
        position = started[-1] if started else 0
        if position not in chosen:
            chosen.append(position)
    return chosen
