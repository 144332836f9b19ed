"""`SampledVideo`: what a family's rules read of a video whose frames were sampled
beforehand (transformers' VideoMetadata, as the decoder fills it), the frame-time
arithmetic the Qwen-VL processors share, what vLLM 0.33's video loader reads of a video
(`vllm_source`) and the frames its loaders take (`plain_picks`, and the Qwen-VL line's
`qwen2_vl_picks`, `qwen3_vl_picks`: they sample by fps whatever num_frames says)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_FPS = 24.0  # transformers' fallback where a video's rate is unknown
# vLLM 0.33's Qwen-VL loaders (vllm/multimodal/video.py): at most 768 frames, at most 30 a
# second, at least 4 (the processors' min_frames)
VLLM_MAX_FRAMES = 768
VLLM_MAX_FPS = 30.0
VLLM_MIN_FRAMES = 4
# vLLM's VideoMediaIO: the frames its plain loader takes where a request asks for none
VLLM_PLAIN_FRAMES = 32


@dataclass(frozen=True)
class SampledVideo:
    """`indices`: each sampled frame's index in the source; `fps`: the source's frame rate
    (None: unknown); `frames_indices` and `total_num_frames`: the metadata's own fields (None
    where it has none), which the sampled rate is computed from."""

    indices: tuple[int, ...]
    fps: float | None = None
    frames_indices: tuple[int, ...] | None = None
    total_num_frames: int | None = None

    @property
    def source_fps(self) -> float:
        """The source's rate, 24 where it is unknown (as transformers assumes)."""
        return self.fps or DEFAULT_FPS

    @property
    def sampled_fps(self) -> float:
        """transformers' VideoMetadata.sampled_fps: the rate of the frames sent."""
        if not self.frames_indices or not self.total_num_frames or not self.fps:
            return self.source_fps
        return len(self.frames_indices) / self.total_num_frames * self.fps


def block_times(indices: Sequence[int], fps: float, temporal_patch_size: int) -> list[float]:
    """Each temporal block's time: the frames' index / fps, the last index repeated up to a
    whole number of blocks, then the mean of each block's first and last (transformers'
    Qwen3VLProcessor._calculate_timestamps, vLLM's too)."""
    padded = list(indices)
    if len(padded) % temporal_patch_size:
        padded += [padded[-1]] * (temporal_patch_size - len(padded) % temporal_patch_size)
    seconds = [index / fps for index in padded]
    return [
        (seconds[i] + seconds[i + temporal_patch_size - 1]) / 2
        for i in range(0, len(seconds), temporal_patch_size)
    ]


@dataclass(frozen=True)
class LoaderSource:
    """What vLLM 0.33's OpenCV video loader reads of a video (video_decoders/opencv.py,
    get_video_metadata) and samples by: its frame count, its rate and its duration."""

    total: int
    fps: float
    duration: float


def vllm_source(frames: int, header_frames: int, end_seek_frames: int, fps: float) -> LoaderSource:
    """vLLM's view of a video whose `frames` play (or demux), whose header claims
    `header_frames` (0: none) at `fps` (its average rate), where OpenCV says it stands after
    seeking to the end (`end_seek_frames`, VideoMetadata's; 0: not known): the claimed
    count, else the demuxed one; the end seek's where it is lower by more than one (vLLM's
    end-of-stream cross-check, which sees edit lists and stale AVI headers, and counts a
    sparse timeline by time). The duration is that count over the rate, as vLLM computes
    it, not the timestamps' span: a variable-rate clip's differs."""
    total = header_frames if header_frames > 0 else frames
    if 0 < end_seek_frames < total - 1:
        total = end_seek_frames
    return LoaderSource(total, fps, total / fps if fps > 0 else 0.0)


@dataclass(frozen=True)
class FramesAsked:
    """What a request asks of a video's frames, for a vLLM loader's rule: `fps`,
    `num_frames` and `max_frames` (None: not asked); `default_fps`, the rate a loader that
    samples by fps takes where none is asked (mmprep's --default-fps, 2 as vLLM's)."""

    fps: float | None
    num_frames: int | None
    max_frames: int | None
    default_fps: float

    @property
    def rate(self) -> float:
        return self.fps if self.fps is not None else self.default_fps

    @property
    def cap(self) -> int:
        """The most frames a Qwen-VL loader takes: the request's max_frames, else its own 768."""
        return self.max_frames if self.max_frames is not None else VLLM_MAX_FRAMES


def plain_picks(total: int, duration: float, num_frames: int, fps: float) -> list[int]:
    """The frames vLLM 0.33's plain loader (VideoBackend, for a model with no loader of its
    own) takes of `total` frames lasting `duration` seconds, asked for `num_frames` and `fps`
    (each <= 0: not asked): num_frames of them, at most duration * fps (floored) and the
    video's, at least 1, at np.linspace(0, total - 1, n) truncated; all of them where n is
    the video's count."""
    count = min(num_frames, total) if num_frames > 0 else total
    if fps > 0:
        count = min(count, math.floor(duration * fps))
    count = max(1, count)
    if count == total:
        return list(range(total))
    return [int(index) for index in np.linspace(0, total - 1, count).astype(np.int64)]


def qwen2_vl_picks(
    total: int, duration: float, fps: float, max_frames: int, temporal_patch_size: int = 2
) -> list[int]:
    """The frames vLLM 0.33's `qwen2_vl` loader (Qwen2VLVideoBackend, for Qwen2-VL and
    Qwen2.5-VL) takes of `total` frames lasting `duration` seconds, asked for `fps`: duration
    * fps of them, at least 4, at most max_frames (and 768) and the video's, rounded down to
    whole temporal blocks, at torch.arange(0, total, total / n) truncated (its float32
    values, computed in double as torch does; the last one clamped, and kept twice where
    the step's rounding makes n + 1). Fewer frames than one block: all of them (vLLM
    divides by zero there)."""
    block = temporal_patch_size
    most = math.floor(min(max_frames, VLLM_MAX_FRAMES, total) / block) * block
    count = min(max(duration * min(fps, VLLM_MAX_FPS), VLLM_MIN_FRAMES), most, total)
    count = math.floor(count / block) * block
    if count < 1:
        return list(range(total))
    step = total / count
    size = math.ceil(total / step)
    values = (np.arange(size, dtype=np.float64) * step).astype(np.float32)
    return [int(index) for index in np.minimum(values.astype(np.int64), total - 1)]


def qwen3_vl_picks(total: int, duration: float, fps: float, max_frames: int) -> list[int]:
    """The frames vLLM 0.33's `qwen3_vl` loader (Qwen3VLVideoBackend) takes: int(total /
    source fps * fps) of them (fps at most 30), at least 4, at most max_frames (and 768) and
    the video's, at np.linspace(0, total - 1, n) rounded. The source's rate is total /
    duration (24 where the duration is unknown, as vLLM and transformers assume)."""
    source_fps = total / duration if duration > 0 else DEFAULT_FPS
    count = int(total / source_fps * min(fps, VLLM_MAX_FPS))
    count = min(max(count, VLLM_MIN_FRAMES), min(max_frames, VLLM_MAX_FRAMES), total)
    return [int(index) for index in np.linspace(0, total - 1, count).round()]
