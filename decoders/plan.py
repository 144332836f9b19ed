"""The decode plan: which frames to decode, how to reach them and the size they come out
at, decided once from the survey before any frame is decoded."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from .errors import MediaTooLargeError
from .frames import scaled_size
from .sampling import VideoSampling, pick_frames, pick_nearest, target_ticks
from .survey import Survey


@dataclass(frozen=True)
class DecodePlan:
    wanted: np.ndarray  # positions in the survey's frames (presentation order), ascending
    keyframes_only: bool  # decode keyframes alone (seek_mode="keyframe")
    # (width, height) of every returned frame as stored, scaled to max_pixels: the stream
    # header's size, so a mid-stream size change is scaled back to it. The first decoded
    # frame's rotation may still turn it.
    size: tuple[int, int]

    @property
    def frame_bytes(self) -> int:
        return self.size[0] * self.size[1] * 3

    def only(self, wanted: np.ndarray) -> DecodePlan:
        """The same plan for some of the wanted frames (one run of keyframe intervals)."""
        return dataclasses.replace(self, wanted=wanted)

    def check_fits(self, max_bytes: int | None) -> None:
        """Refuse before decoding when the frames asked for cannot fit in max_bytes."""
        needed = len(self.wanted) * self.frame_bytes
        if max_bytes is not None and needed > max_bytes:
            width, height = self.size
            raise MediaTooLargeError(
                f"{len(self.wanted)} frames of {width}x{height} need {needed} bytes, "
                f"more than the {max_bytes} allowed; ask for fewer frames or smaller ones"
            )


def plan_decode(survey: Survey, sampling: VideoSampling) -> DecodePlan:
    """The frames `sampling` names (sampling.py), in the survey's integer ticks, and their size."""
    ticks = survey.frame_ticks()
    targets = target_ticks(
        ticks, survey.tick, survey.duration, sampling.fps, sampling.num_frames, sampling.max_frames
    )
    keyframes_only = sampling.seek_mode == "keyframe" and survey.decoded_times is None and survey.index.complete
    if keyframes_only:
        key_positions = np.searchsorted(survey.index.pts, survey.index.keyframes)
        wanted = key_positions[pick_nearest(ticks[key_positions], targets)]
    else:
        wanted = pick_frames(ticks, targets)
    return DecodePlan(wanted, keyframes_only, scaled_size(*survey.coded_size, sampling.max_pixels))
