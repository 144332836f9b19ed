"""Qwen2.5-VL (transformers' Qwen2_5_VLProcessor over Qwen2-VL's image and video processors;
vLLM's qwen2_5_vl.py): Qwen2-VL's processing, with each video's seconds per temporal block
(`second_per_grid_ts`: temporal_patch_size / the sampled fps) beside its tensors, which its
M-RoPE spaces the video's positions by. It does not change the prompt."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .qwen_vl import QwenVL
from .video import SampledVideo


class Qwen2_5VL(QwenVL):
    name = "qwen2_5_vl"
    model_types = ("qwen2_5_vl",)
    processor_classes = ("Qwen2_5_VLProcessor",)
    max_position_embeddings = 32768
    video_metadata_in_hash = True  # vLLM's video_needs_metadata

    def vllm_video_fields(
        self, video: SampledVideo, temporal_patch_size: int, num_tokens: int
    ) -> dict[str, np.ndarray | list[float] | list[int]]:
        """second_per_grid_ts: a 0-d float32, which vLLM's wire carries in the model's dtype
        (app/mmprep/vllm/items.py casts it, as vLLM's processor does: its engine reads the
        value into the video's M-RoPE time positions; issue 45)."""
        return {"second_per_grid_ts": np.array(temporal_patch_size / video.sampled_fps, np.float32)}

    def transformers_video_inputs(
        self, videos: Sequence[SampledVideo], temporal_patch_size: int
    ) -> dict[str, np.ndarray]:
        """second_per_grid_ts: one float32 per video of the batch."""
        seconds = [temporal_patch_size / video.sampled_fps for video in videos]
        return {"second_per_grid_ts": np.array(seconds, np.float32)}


FAMILY = Qwen2_5VL()
