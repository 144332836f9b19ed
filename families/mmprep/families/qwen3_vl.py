"""Qwen3-VL (transformers' Qwen3VLProcessor and Qwen3VLVideoProcessor; vLLM's qwen3_vl.py).

- Images: Qwen2-VL's image processor (transformers has no Qwen3-VL image class: its models
  run Qwen2VLImageProcessor with their published config, the presets' qwen3_vl).
- Videos: 16-pixel patches, mean and std 0.5, pixel bounds for the whole clip (frames rounded
  to temporal blocks), `min_pixels` / `max_pixels` not read; a clip shorter than
  temporal_patch_size is sized as that clip padded with its last frame (transformers raises).
- The prompt, per temporal block of a video: the block's time as text, `<{t:.1f} seconds>`,
  then `<|vision_start|>`, the block's `grid_h * grid_w // merge_size**2` pads, `<|vision_end|>`;
  a block's time is the mean of its first and last frame's (frame index / the source's fps).
  All of it replaces the template's one pad, so the item's placeholder covers the times and
  wrappers too (transformers 5 keeps the template's own outer start and end tokens outside).
- vLLM: each video's block `timestamps` beside its tensors; on vLLM 0.33's generate endpoint
  (no is_embed) a video goes as one image item per temporal block (vllm_image_runs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np

from .base import Encode, Side, SideConfig
from .qwen_vl import COMMON, QwenVL, QwenVLVideo
from .sizing import qwen3_video_size
from .video import FramesAsked, SampledVideo, block_times, qwen3_vl_picks

# The class attributes of transformers' Qwen3VLVideoProcessor.
QWEN3_VIDEO = COMMON | {
    "size": {"shortest_edge": 128 * 32 * 32, "longest_edge": 32 * 32 * 768},
    "patch_size": 16,
    "image_mean": (0.5, 0.5, 0.5),
    "image_std": (0.5, 0.5, 0.5),
    "cap_pixels_per_frame": False,
    "max_video_tokens": 768,
}


class Qwen3VLVideo(QwenVLVideo):
    """Qwen3VLVideoProcessor: 16-pixel patches, no min_pixels / max_pixels, each temporal
    block's time in the prompt."""

    defaults = QWEN3_VIDEO
    takes_pixel_aliases = False  # Qwen3VLVideoProcessor has no min_pixels / max_pixels

    def item_tokens(
        self,
        grid: Sequence[int],
        config: SideConfig,
        token_ids: Mapping[str, int],
        video: SampledVideo | None,
        encode: Encode,
    ) -> list[int]:
        if video is None:
            return super().item_tokens(grid, config, token_ids, video, encode)
        grid_t, grid_h, grid_w = grid
        per_block = grid_h * grid_w // config.merge_size**2
        frame = (
            [token_ids["vision_start_token_id"]]
            + [token_ids[self.token_key]] * per_block
            + [token_ids["vision_end_token_id"]]
        )
        times = block_times(video.indices, video.source_fps, config.temporal_patch_size)
        if len(times) != grid_t:
            raise ValueError(f"{len(times)} frame times for {grid_t} temporal blocks")
        tokens: list[int] = []
        for time in times:
            # Between two special tokens the text is tokenized on its own, so alone is the same.
            tokens += _encode(encode, f"<{time:.1f} seconds>")
            tokens += frame
        return tokens


class Qwen3VL(QwenVL):
    name = "qwen3_vl"
    model_types = ("qwen3_vl", "qwen3_vl_moe")
    processor_classes: tuple[str, ...] = ("Qwen3VLProcessor",)
    video_processor_classes: tuple[str, ...] = ("Qwen3VLVideoProcessor",)
    image_preset = "qwen3_vl"
    video = Qwen3VLVideo()  # images: Qwen2-VL's side, as QwenVL's
    max_position_embeddings = 128000
    video_metadata_in_hash = True  # vLLM's video_needs_metadata
    vllm_video_loader = "qwen3_vl"

    def vllm_frame_picks(self, total: int, duration: float, asked: FramesAsked) -> list[int]:
        """Qwen3VLVideoProcessor's loader: by fps too, its own count and linspace."""
        return qwen3_vl_picks(total, duration, asked.rate, asked.cap)

    def video_size(self, config: SideConfig, num_frames: int, height: int, width: int) -> tuple[int, int]:
        # transformers refuses fewer frames than temporal_patch_size; we pad first (with the
        # last frame), so the clip is sized as the padded one.
        num_frames = max(num_frames, config.temporal_patch_size)
        return qwen3_video_size(
            num_frames,
            height,
            width,
            config.temporal_patch_size,
            config.factor,
            config.min_pixels,
            _clip_cap(config, num_frames),
        )

    def vllm_video_fields(
        self, video: SampledVideo, temporal_patch_size: int, num_tokens: int
    ) -> dict[str, np.ndarray | list[float] | list[int]]:
        """timestamps: a list of Python floats, one per temporal block (vLLM's
        Qwen3VLProcessingInfo._calculate_timestamps for frames sampled beforehand)."""
        return {"timestamps": block_times(video.indices, video.source_fps, temporal_patch_size)}

    def vllm_image_runs(
        self, side: Side, tensors: Mapping[str, np.ndarray]
    ) -> list[dict[str, np.ndarray]] | None:
        """A video as one image per temporal block: the block's rows of patches as
        pixel_values, image_grid_thw (1, h, w). vLLM's tower and M-RoPE read an image as one
        temporal block of patches (an image is its frame twice), and the text between
        (`<t seconds>`, the block's start and end) as text, so the engine computes what it
        computes for the video item (its own chat of the file: the same greedy ids and
        logprobs, to the bit; tests/vllm_real/README.md). Each block as a one-block video
        item instead kills vLLM's engine core (its M-RoPE looks for <|vision_start|> inside
        a video's range)."""
        if side is not self.video:
            return None
        pixels_key, grid_key = self.video.tensor_names
        image_pixels, image_grid = self.image.tensor_names
        assert grid_key is not None and image_grid is not None
        blocks, height, width = (int(size) for size in tensors[grid_key][0])
        rows = height * width  # patches per temporal block, before the merge
        pixels = tensors[pixels_key]
        return [
            {
                image_pixels: pixels[block * rows : (block + 1) * rows],
                image_grid: np.array([[1, height, width]], dtype=np.int64),
            }
            for block in range(blocks)
        ]


def _clip_cap(config: SideConfig, num_frames: int) -> int:
    """Qwen3VLVideoProcessor.resize's whole-clip pixel cap."""
    if not config.cap_pixels_per_frame:
        return config.max_pixels
    frame_cap = config.max_video_tokens * config.factor * config.factor
    per_frame = max(min(frame_cap, config.max_pixels // num_frames), int(config.min_pixels * 1.05))
    return per_frame * num_frames


@lru_cache(maxsize=4096)
def _encode(encode: Encode, text: str) -> tuple[int, ...]:
    return tuple(encode(text))


FAMILY = Qwen3VL()
