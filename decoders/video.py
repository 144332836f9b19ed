"""decode_video and probe_video: the frames a model should see, exactly, and no more work
than that takes.

One call makes up to three passes over the input (reader.py):
1. demux only: the frame index (every frame's time, every keyframe), from which the
   duration, frame count and the exact frames to return are worked out;
2. (only for streams without timestamps) decode everything once to count frames;
3. decode, in the surveyed container rewound: seek to the keyframe before each wanted
   frame when a keyframe lies between here and there (seeking.py), let the decoder drop
   non-reference frames nobody asked for, decode runs of keyframe intervals side by side
   when the thread budget allows, and convert to RGB only the frames returned.
The wanted frames are then checked against what the decoder really emits (picker.py: the
frame on screen at each wanted time), so a lying index costs speed, never correctness.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from .errors import InvalidArgumentError, MediaTooLargeError
from .frames import scaled_size
from .metadata import VideoMetadata
from .reader import VideoReader
from .sampling import FLOAT_TOLERANCE, VideoSampling, check_limits, pick_frames, pick_nearest, target_ticks
from .source import ReopenableSource, Source


@dataclass(frozen=True)
class DecodedVideo:
    frames: np.ndarray  # uint8 (T, H, W, 3), RGB, C-contiguous
    timestamps: np.ndarray  # float64 (T,), seconds from the first frame
    indices: np.ndarray  # int64 (T,), each frame's 0-based position in presentation order
    metadata: VideoMetadata

    def to_hf_metadata(self) -> dict:
        """Exactly the fields of transformers' VideoMetadata(**md). The frames are already
        sampled: call the HF processor with do_sample_frames=False, so it samples no more."""
        meta = self.metadata
        return {
            "total_num_frames": meta.num_frames,
            "fps": meta.fps,
            "width": meta.width,
            "height": meta.height,
            "duration": meta.duration,
            "video_backend": "pyav",
            "frames_indices": self.indices.tolist(),
        }


def decode_video(
    source: Source,
    fps: float | None = None,
    num_frames: int | None = None,
    max_frames: int | None = None,
    max_pixels: int | None = None,
    *,
    threads: int = 0,
    timeout: float | None = None,
    max_bytes: int | None = None,
    max_source_pixels: int | None = None,
    seek_mode: str = "exact",
    cancel: threading.Event | None = None,
    sampling: VideoSampling | None = None,
) -> DecodedVideo:
    """Decode the frames a model should see from `source` (bytes, a path or a binary file).

    fps: frames per second of video to sample; num_frames: that many frames evenly
    spread; neither: every frame. max_frames caps the count, max_pixels the frame size.
    threads: FFmpeg threads, 0 for one per core. timeout: seconds before DecodeTimeoutError.
    max_bytes: refuse (MediaTooLargeError) before decoding if the frames would need more.
    max_source_pixels: refuse a video whose stored frames are larger, before decoding any.
    seek_mode: "exact" (the frame on screen at each time) or "keyframe" (the keyframe
    nearest each time: much faster on long GOPs; timestamps are the keyframes' own).
    cancel: set it from another thread to stop the decode (DecodeCancelledError).
    sampling: the same five sampling keywords as one checked VideoSampling value, instead of them.
    Raises a MediaError subclass, with a stable `.code`, for anything wrong with the input;
    InvalidArgumentError (also a ValueError) for arguments that make no sense.
    """
    if sampling is None:
        sampling = VideoSampling(fps, num_frames, max_frames, max_pixels, seek_mode)
    elif (fps, num_frames, max_frames, max_pixels, seek_mode) != (None, None, None, None, "exact"):
        raise InvalidArgumentError("give sampling or the sampling keywords, not both")
    fps, num_frames, max_frames, max_pixels, seek_mode = (
        sampling.fps, sampling.num_frames, sampling.max_frames, sampling.max_pixels, sampling.seek_mode
    )
    check_limits(threads, timeout, max_bytes, max_source_pixels)
    deadline = None if timeout is None else time.monotonic() + timeout
    with VideoReader(ReopenableSource(source), threads, deadline, cancel) as reader:
        survey = reader.survey(max_source_pixels)
        ticks = survey.frame_ticks()
        targets = target_ticks(ticks, survey.tick, survey.duration, fps, num_frames, max_frames)
        keyframes_only = seek_mode == "keyframe" and survey.decoded_times is None and survey.index.complete
        if keyframes_only:
            key_positions = np.searchsorted(survey.index.pts, survey.index.keyframes)
            wanted = key_positions[pick_nearest(ticks[key_positions], targets)]
        else:
            wanted = pick_frames(ticks, targets)
        _check_output_size(len(wanted), survey.coded_size, max_pixels, max_bytes)
        frames, timestamps, rotation = reader.decode(survey, wanted, max_pixels, keyframes_only)
    indices = frame_positions(survey.frame_times(), timestamps)
    return DecodedVideo(np.ascontiguousarray(frames), timestamps, indices, survey.metadata(rotation))


def probe_video(
    source: Source, *, timeout: float | None = None, max_source_pixels: int | None = None
) -> VideoMetadata:
    """The video's metadata, from demuxing (and one decoded frame, for its rotation)."""
    check_limits(timeout=timeout, max_source_pixels=max_source_pixels)
    deadline = None if timeout is None else time.monotonic() + timeout
    with VideoReader(ReopenableSource(source), threads=1, deadline=deadline, cancel=None) as reader:
        survey = reader.survey(max_source_pixels)
        return survey.metadata(reader.first_frame_rotation(survey))


def frame_positions(frame_times: np.ndarray, timestamps: np.ndarray) -> np.ndarray:
    """Each returned frame's position among all frames in presentation order: the frame
    whose time it is (times are computed alike on both sides, so they match exactly)."""
    positions = np.searchsorted(frame_times, timestamps + FLOAT_TOLERANCE, side="right") - 1
    return np.clip(positions, 0, None).astype(np.int64)


def _check_output_size(count: int, coded_size, max_pixels: int | None, max_bytes: int | None) -> None:
    """Refuse before decoding when the frames asked for cannot fit in max_bytes."""
    if max_bytes is None:
        return
    width, height = scaled_size(*coded_size, max_pixels)
    needed = count * width * height * 3
    if needed > max_bytes:
        raise MediaTooLargeError(
            f"{count} frames of {width}x{height} need {needed} bytes, more than the {max_bytes} allowed; "
            "ask for fewer frames or smaller ones"
        )
