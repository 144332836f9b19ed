"""The on-screen rule applied to what the decoder really emits, and the clock that
times decoded frames."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, SupportsFloat

import numpy as np

from .sampling import FLOAT_TOLERANCE
from .seeking import SeekMissed

if TYPE_CHECKING:
    from av.video.frame import VideoFrame

# (frame, time): told of each frame the picker chooses.
Take = Callable[["VideoFrame", float], None]


class Clock:
    """Seconds from the first frame for each decoded frame; frames with no timestamp
    (raw elementary streams) are spaced at the average frame rate."""

    def __init__(self, origin: int | None, time_base: SupportsFloat | None, fps: float):
        self._origin = origin
        self._tb = float(time_base) if time_base else 0.0
        self._step = 1.0 / fps if fps else 0.04
        self._last: float | None = None

    def __call__(self, frame: VideoFrame) -> float:
        ts = frame.pts if frame.pts is not None else frame.dts
        if ts is None or self._tb == 0.0:
            t = 0.0 if self._last is None else self._last + self._step
        else:
            if self._origin is None:
                self._origin = ts
            t = (ts - self._origin) * self._tb
        self._last = t
        return t


class FramePicker:
    """The on-screen rule, applied to frames as the decoder emits them (in presentation
    order): for each wanted time, the last frame shown at or before it.

    Wanted times are normally exact frame times from the index (chosen there in integer
    ticks), computed as Clock computes a decoded frame's, so the frame arriving at a wanted
    time matches it (within float rounding only) and is taken at once, which lets the
    decoder seek away right after.
    """

    def __init__(self, wanted: np.ndarray, take: Take):
        self._wanted = wanted
        self._take = take
        self.pending = 0
        self._previous: tuple[VideoFrame, float] | None = None  # (frame, time): the last since a seek
        self._taken_time: float | None = None
        self._seeked = False

    @property
    def done(self) -> bool:
        return self.pending >= len(self._wanted)

    def after_seek(self) -> None:
        self._previous, self._seeked = None, True

    def offer(self, frame: VideoFrame, t: float) -> None:
        wanted, tolerance = self._wanted, FLOAT_TOLERANCE
        while self.pending < len(wanted) and t > wanted[self.pending] + tolerance:
            if self._previous is None:
                if self._seeked:
                    raise SeekMissed()  # the wanted frame never came out after the seek
                self._choose(frame, t)  # the very first frame stands in for earlier times
            else:
                self._choose(*self._previous)
            self.pending += 1
        if self.pending < len(wanted) and t >= wanted[self.pending] - tolerance:
            self._choose(frame, t)
            while self.pending < len(wanted) and wanted[self.pending] <= t + tolerance:
                self.pending += 1
        self._previous = (frame, t)

    def finish(self) -> None:
        """End of stream: the last frame is on screen for every later time."""
        if self._previous is not None:
            while not self.done:
                self._choose(*self._previous)
                self.pending += 1

    def _choose(self, frame: VideoFrame, t: float) -> None:
        if self._taken_time is not None and t <= self._taken_time:
            return  # already returned (a frame wanted twice) or earlier than one returned
        self._take(frame, t)
        self._taken_time = t
