"""`QwenVL`: what the Qwen-VL families share (Qwen2-VL's processor, which the later ones
build on): the vision tokens, transformers' tensor names, the image processor, per-frame
video sizing and one pad per merged patch in the prompt."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .base import Encode, Family, ImageSide, Side, SideConfig, VideoSide
from .sizing import image_size
from .video import FramesAsked, SampledVideo, qwen2_vl_picks

OPENAI_CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_CLIP_STD = (0.26862954, 0.26130258, 0.27577711)

# The class attributes of transformers' Qwen2VLImageProcessor and Qwen2VLVideoProcessor.
COMMON = {
    "temporal_patch_size": 2,
    "merge_size": 2,
    "rescale_factor": 1 / 255,
    "do_resize": True,
    "do_rescale": True,
    "do_normalize": True,
    "resample": 3,
}
QWEN2_IMAGE = COMMON | {
    "size": {"shortest_edge": 56 * 56, "longest_edge": 28 * 28 * 1280},
    "patch_size": 14,
    "image_mean": OPENAI_CLIP_MEAN,
    "image_std": OPENAI_CLIP_STD,
}
QWEN2_VIDEO = QWEN2_IMAGE | {
    "size": {"shortest_edge": 128 * 28 * 28, "longest_edge": 28 * 28 * 768},
    "cap_pixels_per_frame": False,
    "max_video_tokens": 128000,
}


class QwenVLSide(Side):
    """What the Qwen-VL sides share: one pad per merged patch of the item's (t, h, w) grid
    (replace_image_token / replace_video_token)."""

    def item_tokens(
        self,
        grid: Sequence[int],
        config: SideConfig,
        token_ids: Mapping[str, int],
        video: SampledVideo | None,
        encode: Encode,
    ) -> list[int]:
        """`grid_t * grid_h * grid_w // merge_size**2` pads."""
        grid_t, grid_h, grid_w = grid
        return [token_ids[self.token_key]] * (grid_t * grid_h * grid_w // config.merge_size**2)


class QwenVLImage(QwenVLSide, ImageSide):
    """Qwen2VLImageProcessor (every Qwen-VL family's images)."""

    tensor_names = ("pixel_values", "image_grid_thw")
    placeholder = "<|vision_start|><|image_pad|><|vision_end|>"
    defaults = QWEN2_IMAGE


class QwenVLVideo(QwenVLSide, VideoSide):
    """Qwen2VLVideoProcessor (Qwen2-VL's and Qwen2.5-VL's videos)."""

    tensor_names = ("pixel_values_videos", "video_grid_thw")
    placeholder = "<|vision_start|><|video_pad|><|vision_end|>"
    defaults = QWEN2_VIDEO


class QwenVL(Family):
    token_names = {
        "image_token_id": "<|image_pad|>",
        "video_token_id": "<|video_pad|>",
        "vision_start_token_id": "<|vision_start|>",
        "vision_end_token_id": "<|vision_end|>",
    }
    image: Side = QwenVLImage()
    video: Side = QwenVLVideo()
    # vllm 0.32/0.33's qwen2_vl.py, qwen2_5_vl.py and qwen3_vl.py: supports_mm_device_do_normalize
    device_normalizes = True
    vllm_video_loader = "qwen2_vl"

    def image_size(self, config: SideConfig, height: int, width: int) -> tuple[int, int]:
        return image_size(height, width, config.factor, config.min_pixels, config.max_pixels)

    def video_size(self, config: SideConfig, num_frames: int, height: int, width: int) -> tuple[int, int]:
        return image_size(height, width, config.factor, config.min_pixels, _frame_cap(config, num_frames))

    def vllm_frame_picks(self, total: int, duration: float, asked: FramesAsked) -> list[int]:
        """vLLM picks its loader by the video processor's class; Qwen2VLVideoProcessor's
        (Qwen2-VL's and Qwen2.5-VL's) samples by fps and ignores num_frames."""
        return qwen2_vl_picks(total, duration, asked.rate, asked.cap)


def _frame_cap(config: SideConfig, num_frames: int) -> int:
    """Qwen2VLVideoProcessor.resize's per-frame pixel cap."""
    if not config.cap_pixels_per_frame:
        return config.max_pixels
    total_pixels = int(config.max_video_tokens * config.factor * config.factor * 0.9)
    share = total_pixels * config.temporal_patch_size // num_frames
    return max(min(config.max_pixels, share), int(config.min_pixels * 1.05))
