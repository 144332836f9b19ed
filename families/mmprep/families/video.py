"""`SampledVideo`: what a family's rules read of a video whose frames were sampled
beforehand (transformers' VideoMetadata, as the decoder fills it), and the frame-time
arithmetic the Qwen-VL processors share."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_FPS = 24.0  # transformers' fallback where a video's rate is unknown


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
