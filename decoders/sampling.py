"""Which moments of a video a model should see: the sampling contract, as pure functions.

Times are seconds from the video's first frame. `target_times` turns a request into
the moments to show; `pick_frames` says which frame is on screen at each of them.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np

from .errors import InvalidSamplingError

# A frame counts as on screen at t if it starts no later than t + 1 ms: this absorbs
# rounding in container time bases (WebM counts milliseconds, MP4 often 1/90000 s).
ON_SCREEN_TOLERANCE = 1e-3


SEEK_MODES = ("exact", "keyframe")


def check_sampling(fps=None, num_frames=None, max_frames=None, max_pixels=None, seek_mode="exact") -> None:
    """Raise InvalidSamplingError, naming the parameter, unless the request makes sense."""
    if seek_mode not in SEEK_MODES:
        raise InvalidSamplingError(f"seek_mode must be one of {', '.join(SEEK_MODES)}, got {seek_mode!r}")
    if fps is not None and num_frames is not None:
        raise InvalidSamplingError("give fps or num_frames, not both")
    if fps is not None and (
        isinstance(fps, bool) or not isinstance(fps, Real) or not math.isfinite(fps) or fps <= 0
    ):
        raise InvalidSamplingError(f"fps must be a finite number above 0, got {fps!r}")
    for name, value in (("num_frames", num_frames), ("max_frames", max_frames), ("max_pixels", max_pixels)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, Integral) or value < 1):
            raise InvalidSamplingError(f"{name} must be a whole number of at least 1, got {value!r}")


def target_times(
    duration: float,
    average_fps: float,
    frame_times: np.ndarray,
    fps: float | None = None,
    num_frames: int | None = None,
    max_frames: int | None = None,
) -> np.ndarray:
    """The moments to show, per the contract.

    duration: D, seconds of video; average_fps: f; frame_times: every frame's time,
    used when the request asks for every frame.
    """
    cap = max_frames if max_frames is not None else math.inf
    if num_frames is not None:
        count = int(min(num_frames, cap))
        if count == 1:
            return np.array([duration / 2])
        return np.linspace(0.0, max(0.0, duration - 1.0 / average_fps), count)
    if fps is not None:
        count = max(1, math.floor(duration * fps + 1e-9))
        if count <= cap:
            return np.arange(count) / fps
    else:
        count = len(frame_times)
        if count <= cap:
            return np.asarray(frame_times, dtype=np.float64)
    return np.arange(int(cap)) * (duration / cap)


def pick_frames(frame_times: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Positions in `frame_times` (sorted) of the frames on screen at `targets`.

    The frame on screen at t is the last one starting at or before t (+1 ms); the first
    frame if none has started yet. A frame picked twice is returned once, in order.
    """
    if len(frame_times) == 0:
        return np.zeros(0, dtype=np.int64)
    positions = np.searchsorted(frame_times, np.asarray(targets) + ON_SCREEN_TOLERANCE, side="right") - 1
    return np.unique(np.clip(positions, 0, None)).astype(np.int64)


def pick_nearest(candidate_times: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Positions in `candidate_times` (sorted) of the candidate nearest each target
    (the earlier on a tie), each once, in order. The keyframe seek mode uses it."""
    if len(candidate_times) == 0:
        return np.zeros(0, dtype=np.int64)
    targets = np.asarray(targets, dtype=np.float64)
    after = np.clip(np.searchsorted(candidate_times, targets, side="left"), 0, len(candidate_times) - 1)
    before = np.clip(after - 1, 0, None)
    closer_before = np.abs(targets - candidate_times[before]) <= np.abs(candidate_times[after] - targets)
    return np.unique(np.where(closer_before, before, after)).astype(np.int64)
