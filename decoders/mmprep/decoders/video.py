"""decode_video and probe_video: the frames a model should see, exactly, and no more work
than that takes.

One call makes up to three passes over the input (source.py opens the containers they read):
1. demux only (survey.py): the frame index (every frame's time, every keyframe), the
   duration and the frame count; from these plan.py decides the exact frames to return
   and the size they come out at;
2. (only for streams without timestamps) decode everything once to count frames;
3. decode (decoding.py), in the surveyed container rewound: seek to the keyframe before each wanted
   frame when a keyframe lies between here and there (seeking.py), let the decoder drop
   non-reference frames nobody asked for, decode runs of keyframe intervals side by side
   when the thread budget allows, and convert to RGB only the frames returned.
The wanted frames are then checked against what the decoder really emits (picker.py: the
frame on screen at each wanted time), so a lying index costs speed, never correctness.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import gpu
from .decoding import OnFrame, decode_frames
from .errors import InvalidArgumentError
from .guard import DecodeGuard
from .metadata import VideoMetadata
from .plan import FramePickRule, FrameSizeRule, plan_decode
from .sampling import FLOAT_TOLERANCE, VideoSampling, check_limits
from .source import Source, VideoSource
from .survey import first_frame_rotation, read_survey


@dataclass(frozen=True)
class DecodedVideo:
    frames: np.ndarray  # uint8 (T, H, W, 3), RGB, C-contiguous
    timestamps: np.ndarray  # float64 (T,), seconds from the first frame
    indices: np.ndarray  # int64 (T,), each frame's 0-based position in presentation order
    metadata: VideoMetadata

    def to_hf_metadata(self) -> dict[str, Any]:
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
    frame_size: FrameSizeRule | None = None,
    frame_picks: FramePickRule | None = None,
    device: str = "cpu",
    on_frame: OnFrame | None = None,
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
    frame_size: a rule (frames, height, width) -> (height, width) for the output size, given
    the planned count and the size after max_pixels, called once before any frame is
    decoded (plan.py says what it must satisfy); what it raises is raised unchanged.
    frame_picks: a rule (VideoMetadata) -> the positions of the frames to take (presentation
    order), or None for what the sampling names: a model's own sampling rule (vLLM's Qwen-VL
    loaders take a count from the duration and spread it, whatever num_frames says;
    families/mmprep/families/video.py). Called once, with the survey's metadata (the true
    count and duration, and header_frames, what the header claims; rotation 0, not yet
    known); max_pixels, seek_mode and max_frames' check of an explicit num_frames still apply.
    device: "cpu", or "cuda" to decode on the GPU (NVDEC) where it can (gpu.py): the same
    frames; where it cannot, the CPU decodes and a log line says why.
    on_frame: called as on_frame(position, count, frame) from a decoding thread as soon as
    each frame is converted, so work on it can start before the decode ends (the vision
    processors' VideoStream does): frame `position` of the `count` planned, uint8 (H, W, 3),
    the row of the returned array it will be (read it; do not write it). When the decode
    returns `count` frames, every position was announced and `frames[position]` is the
    frame announced last for it (a retried pass announces again); a damaged video may
    return fewer. Side-by-side runs may announce from several threads at once. What it raises
    is raised unchanged.
    Raises a MediaError subclass, with a stable `.code`, for anything wrong with the input;
    InvalidArgumentError (also a ValueError) for arguments that make no sense.
    """
    if sampling is None:
        sampling = VideoSampling(fps, num_frames, max_frames, max_pixels, seek_mode)
    elif (fps, num_frames, max_frames, max_pixels, seek_mode) != (None, None, None, None, "exact"):
        raise InvalidArgumentError("give sampling or the sampling keywords, not both")
    check_limits(threads, timeout, max_bytes, max_source_pixels)
    gpu.check_device(device)
    guard = DecodeGuard.starting_now(timeout, cancel, threads)
    with VideoSource(source, device) as video:
        survey = read_survey(video, guard, max_source_pixels)
        plan = plan_decode(survey, sampling, frame_size, frame_picks)
        plan.check_fits(max_bytes)
        on_gpu = device == "cuda" and gpu.decodes(survey.decoder, survey.codec, survey.coded_size)
        if on_gpu:  # one decoder, one thread: NVDEC does the work; no runs side by side
            guard = dataclasses.replace(guard, threads=1)
        frames, timestamps, rotation = decode_frames(video, survey, plan, guard, on_frame)
        if device == "cuda" and not (on_gpu and video.decoded_on_gpu):
            gpu.note_software_decode(survey.codec, survey.coded_size)
    if plan.in_output_order:  # positions the decoder's order names, not the timestamps
        indices = plan.wanted[: len(frames)].astype(np.int64)
    else:
        indices = frame_positions(survey.frame_times(), timestamps)
    return DecodedVideo(np.ascontiguousarray(frames), timestamps, indices, survey.metadata(rotation))


def probe_video(
    source: Source, *, timeout: float | None = None, max_source_pixels: int | None = None
) -> VideoMetadata:
    """The video's metadata, from demuxing (and one decoded frame, for its rotation)."""
    check_limits(timeout=timeout, max_source_pixels=max_source_pixels)
    guard = DecodeGuard.starting_now(timeout, threads=1)
    with VideoSource(source) as video:
        survey = read_survey(video, guard, max_source_pixels)
        return survey.metadata(first_frame_rotation(video, survey, guard))


def frame_positions(frame_times: np.ndarray, timestamps: np.ndarray) -> np.ndarray:
    """Each returned frame's position among all frames in presentation order: the frame
    whose time it is (times are computed alike on both sides, so they match exactly)."""
    positions = np.searchsorted(frame_times, timestamps + FLOAT_TOLERANCE, side="right") - 1
    return np.clip(positions, 0, None).astype(np.int64)
