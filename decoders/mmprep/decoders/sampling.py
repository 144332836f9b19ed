"""Which moments of a video a model should see: the sampling contract, as pure functions.

Times are integer ticks of the stream's time base, counted from the video's first frame,
so "the frame on screen at t" is decided exactly, as FFmpeg orders frames. `target_ticks`
turns a request into the moments to show; `pick_frames` says which frame is on screen at
each of them. The caller's numbers are checked first (`check_sampling`, `check_limits`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from numbers import Integral, Real

import numpy as np

from .errors import InvalidArgumentError, InvalidSamplingError

# Seconds of float rounding allowed when a time in seconds (k / r) becomes ticks: k / r in
# floats is off by far less, and no two frames are this close (a 90 kHz tick is 11 us).
FLOAT_TOLERANCE = 1e-7


SEEK_MODES = ("exact", "keyframe")


ALL_FRAMES = -1  # num_frames=-1: every frame, as vLLM spells it


@dataclass(frozen=True)
class VideoSampling:
    """Which frames of a video to return, and how big: a request, checked once.

    fps: frames per second of video, at t = k / fps from the first frame; num_frames: that
    many, spread evenly from the first frame to the last (-1: every frame); neither: every
    frame. max_frames caps fps and every-frame sampling (more would be spread evenly over
    the whole video instead), and an explicit num_frames above it is an error naming it.
    max_pixels: frames scaled down to at most that many pixels, aspect kept. seek_mode:
    "exact" (the frame on screen at each time) or "keyframe" (the nearest keyframe).
    Frozen and hashable: the service uses it as a cache and de-duplication key.
    """

    fps: float | None = None
    num_frames: int | None = None
    max_frames: int | None = None
    max_pixels: int | None = None
    seek_mode: str = "exact"

    def __post_init__(self) -> None:
        check_sampling(self.fps, self.num_frames, self.max_frames, self.max_pixels, self.seek_mode)


def check_sampling(
    fps: float | None = None,
    num_frames: int | None = None,
    max_frames: int | None = None,
    max_pixels: int | None = None,
    seek_mode: str = "exact",
) -> None:
    """Raise InvalidSamplingError, naming the parameter, unless the request makes sense.
    The values are checked as they come: callers need not have checked their types."""
    if seek_mode not in SEEK_MODES:
        raise InvalidSamplingError(f"seek_mode must be one of {', '.join(SEEK_MODES)}, got {seek_mode!r}")
    if fps is not None and num_frames is not None:
        raise InvalidSamplingError("give fps or num_frames, not both")
    if fps is not None and not _positive_number(fps):
        raise InvalidSamplingError(f"fps must be a finite number above 0, got {fps!r}")
    if num_frames != ALL_FRAMES:
        _check_whole("num_frames", num_frames, 1, InvalidSamplingError, "(or -1 for every frame)")
    for name, value in (("max_frames", max_frames), ("max_pixels", max_pixels)):
        _check_whole(name, value, 1, InvalidSamplingError)
    if num_frames is not None and max_frames is not None and num_frames > max_frames:
        raise InvalidSamplingError(
            f"num_frames={num_frames} is more than the limit of max_frames={max_frames}; ask for fewer frames"
        )


def check_limits(
    threads: int = 0,
    timeout: float | None = None,
    max_bytes: int | None = None,
    max_source_pixels: int | None = None,
) -> None:
    """Raise InvalidArgumentError, naming the parameter, for a limit that makes no sense
    (FFmpeg would otherwise blame the video for a negative thread count)."""
    _check_whole("threads", threads, 0, InvalidArgumentError)
    if timeout is not None and not (_positive_number(timeout) or timeout == 0):
        raise InvalidArgumentError(f"timeout must be a finite number of seconds, at least 0, got {timeout!r}")
    for name, value in (("max_bytes", max_bytes), ("max_source_pixels", max_source_pixels)):
        _check_whole(name, value, 1, InvalidArgumentError)


def _positive_number(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        return False
    return value > 0  # type: ignore[operator]  # typeshed's numbers.Real declares __lt__ but not __gt__


def _check_whole(
    name: str, value: object, minimum: int, error: type[InvalidArgumentError], alternative: str = ""
) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, Integral) or value < minimum):
        also = f" {alternative}" if alternative else ""
        raise error(f"{name} must be a whole number of at least {minimum}{also}, got {value!r}")


def target_ticks(
    ticks: np.ndarray,
    tick: Fraction,
    duration: float,
    fps: float | None = None,
    num_frames: int | None = None,
    max_frames: int | None = None,
) -> np.ndarray:
    """The moments to show, per the contract, as int64 ticks from the first frame.

    ticks: every frame's presentation time from the first frame, sorted, in units of
    `tick` seconds (the stream's time base); duration: D, seconds of video.
    """
    cap = max_frames if max_frames is not None else math.inf
    if num_frames == ALL_FRAMES and len(ticks) > cap:
        raise InvalidSamplingError(
            f"num_frames=-1 asks for every frame, {len(ticks)} here, more than the limit of max_frames={cap}"
        )
    if num_frames not in (None, ALL_FRAMES):
        return spread(int(ticks[-1]), int(num_frames))
    if fps is not None:
        count = max(1, math.floor(duration * fps + 1e-9))
        if count <= cap:
            return seconds_to_ticks(np.arange(count) / fps, tick)
    elif len(ticks) <= cap:  # every frame (num_frames -1, or nothing asked)
        return np.asarray(ticks, dtype=np.int64)
    return seconds_to_ticks(np.arange(int(cap)) * (duration / cap), tick)


def spread(span: int, count: int) -> np.ndarray:
    """`count` ticks evenly from 0 to `span`, each rounded down: floor(j * span / (count - 1)).

    Exact integer arithmetic, so on constant-rate video (frame k at k * step) target j lands
    on frame floor(j * (total - 1) / (count - 1)), which is what np.linspace(0, total - 1,
    count, dtype=int) means. Split as j * q + j * r // d so no product overflows int64.
    """
    if count == 1:
        return np.zeros(1, dtype=np.int64)
    q, r = divmod(span, count - 1)
    j = np.arange(count, dtype=np.int64)
    return j * q + (j * r) // (count - 1)


def seconds_to_ticks(times: np.ndarray, tick: Fraction) -> np.ndarray:
    """The last tick at or before each time, allowing FLOAT_TOLERANCE for float rounding."""
    return np.floor((np.asarray(times, dtype=np.float64) + FLOAT_TOLERANCE) / float(tick)).astype(np.int64)


def pick_frames(ticks: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Positions in `ticks` (sorted) of the frames on screen at `targets` (ticks too).

    The frame on screen at t is the last one starting at or before t; the first frame if
    none has started yet. A frame picked twice is returned once, in order.
    """
    if len(ticks) == 0:
        return np.zeros(0, dtype=np.int64)
    positions = np.searchsorted(ticks, targets, side="right") - 1
    return np.unique(np.clip(positions, 0, None)).astype(np.int64)


def pick_nearest(candidates: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Positions in `candidates` (sorted ticks) of the candidate nearest each target
    (the earlier on a tie), each once, in order. The keyframe seek mode uses it."""
    if len(candidates) == 0:
        return np.zeros(0, dtype=np.int64)
    targets = np.asarray(targets, dtype=np.int64)
    after = np.clip(np.searchsorted(candidates, targets, side="left"), 0, len(candidates) - 1)
    before = np.clip(after - 1, 0, None)
    closer_before = np.abs(targets - candidates[before]) <= np.abs(candidates[after] - targets)
    return np.unique(np.where(closer_before, before, after)).astype(np.int64)
