"""The decode plan: which frames to decode, how to reach them and the size they come out
at, decided once from the survey before any frame is decoded."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .errors import InvalidArgumentError, MediaTooLargeError
from .frames import scaled_size
from .metadata import VideoMetadata
from .sampling import VideoSampling, pick_frames, pick_nearest, target_ticks
from .survey import Survey


@dataclass(frozen=True)
class DecodePlan:
    wanted: np.ndarray  # positions in the survey's frames (presentation order), ascending
    keyframes_only: bool  # decode keyframes alone (seek_mode="keyframe")
    # (width, height) of every returned frame as stored, scaled to max_pixels: the stream
    # header's size, so a mid-stream size change is scaled back to it. The first decoded
    # frame's rotation may still turn it.
    rgb_size: tuple[int, int]
    # The size returned: rgb_size, or what the caller's frame_size rule says, to which
    # swscale scales the RGB frame in a second pass (see plan_decode).
    size: tuple[int, int]
    # `wanted` counts the frames as the decoder hands them out from the start, one by one,
    # as OpenCV's grab loop counts them (a frame_picks rule's positions), not by timestamp:
    # only where the two orders may part (Survey.order_apart_from_times: packed B-frames in an
    # AVI, an MP4 whose decoder reorders frames its timestamps keep in decode order), as that
    # means decoding every frame up to the last one wanted. Elsewhere they are the same
    # frames, reached by seeking.
    in_output_order: bool = False

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


# (frames, height, width) -> (height, width): the size a caller wants every frame scaled to.
FrameSizeRule = Callable[[int, int, int], tuple[int, int]]
# The video's metadata -> the positions of the frames to take (the i-th frame the decoder
# hands out from the start, as OpenCV's grab loop counts), instead of what the sampling's
# fps / num_frames / max_frames name; None: those, as asked. A model's
# own sampling rule (a family's vLLM loader, families/mmprep/families/video.py), given the
# survey's metadata: the true count and duration, and what the header claims (its rotation
# is not known yet: 0).
FramePickRule = Callable[[VideoMetadata], Sequence[int] | None]


def plan_decode(
    survey: Survey,
    sampling: VideoSampling,
    frame_size: FrameSizeRule | None = None,
    frame_picks: FramePickRule | None = None,
) -> DecodePlan:
    """The frames `sampling` names (sampling.py), in the survey's integer ticks, and their size.

    `frame_size`, if given, is called once with the planned frame count and the size after
    max_pixels, before anything is decoded, and its answer is the output size. Frames are
    converted to RGB at the max_pixels size as without it, then scaled by swscale's bicubic,
    RGB to RGB: scaling the YUV frame straight to the size resamples the subsampled chroma
    differently, which lands up to 135 levels from a resize of the RGB frame (docs/deployment.md,
    "Into the service"). The rule sees the size as stored: the rotation is known only once
    a frame is decoded, so it must treat height and width alike (give (w', h') for (w, h)
    when it gives (h', w') for (h, w), as the vision processors' sizes do). It may raise,
    to refuse the video before any decoding.

    `frame_picks`, if given, is called once with the survey's metadata; positions it names
    (clipped to the frames there are) are the frames taken instead of the sampling's,
    counted in the decoder's output order (the same as by time unless the survey says the
    two may part: DecodePlan.in_output_order), except with seek_mode="keyframe": the
    keyframes nearest those frames' times.
    """
    ticks = survey.frame_ticks()
    picked = frame_picks(survey.metadata(rotation=0)) if frame_picks is not None and len(ticks) else None
    keyframes_only = (
        sampling.seek_mode == "keyframe" and survey.decoded_times is None and survey.index.complete
    )
    positions = None if picked is None else np.clip(np.asarray(picked, dtype=np.int64), 0, len(ticks) - 1)
    if positions is not None:
        targets = ticks[positions]
    else:
        targets = target_ticks(
            ticks, survey.tick, survey.duration, sampling.fps, sampling.num_frames, sampling.max_frames
        )
    in_output_order = positions is not None and not keyframes_only and survey.order_apart_from_times
    if positions is not None and not keyframes_only:
        wanted = np.unique(positions)
    elif keyframes_only:
        key_positions = np.searchsorted(survey.index.pts, survey.index.keyframes)
        wanted = key_positions[pick_nearest(ticks[key_positions], targets)]
    else:
        wanted = pick_frames(ticks, targets)
    rgb_size = scaled_size(*survey.coded_size, sampling.max_pixels)
    size = rgb_size
    if frame_size is not None:
        height, width = _checked_size(frame_size(len(wanted), rgb_size[1], rgb_size[0]))
        size = (width, height)
    return DecodePlan(wanted, keyframes_only, rgb_size, size, in_output_order)


def _checked_size(size: tuple[int, int]) -> tuple[int, int]:
    height, width = size
    if not all(isinstance(side, int) and side >= 1 for side in (height, width)):
        raise InvalidArgumentError(
            f"frame_size must give (height, width) as whole numbers of at least 1, got {size!r}"
        )
    return height, width
