"""Gemma 4 (config.json model_type `gemma4`: gemma-4-31B-it, 26B-A4B-it, E4B-it, E2B-it;
transformers' Gemma4Processor over Gemma4ImageProcessor and Gemma4VideoProcessor; vLLM 0.33's
gemma4_mm.py). Images, video, and audio where the model has an audio tower (E4B, E2B:
config.json's audio_config; the 31B and 26B-A4B have none).

- Sizing: each image or frame is resized, keeping its aspect, to the largest size whose
  sides are multiples of patch_size x pooling_kernel_size (48) and whose 16-pixel patches
  number at most max_soft_tokens x pooling_kernel_size**2 (transformers'
  get_aspect_ratio_preserving_size). The budget `max_soft_tokens` is one of 70, 140, 280,
  560, 1120: the image processor's 280 and the video processor's 70 in the published config.
- Tensors: the resized pixels, rescaled to [0, 1] (mean 0, std 1: normalizing changes
  nothing), cut into patches of 16 x 16 x 3 (row by row, each patch's pixels row-major with
  the channels last), padded with zero patches to the budget; beside them each patch's
  (column, row), -1 for padding. An image: `pixel_values` (1, budget, 768) and
  `image_position_ids` (1, budget, 2); a video: `pixel_values_videos` (frames, budget, 768),
  `video_position_ids` and `num_frames_per_video`.
- The prompt: an image is `<|image>`, `<|image|>` x its soft tokens (its patches / 9),
  `<image|>`; a video, per frame, "mm:ss " (the frame's index / the video's rate, minutes
  and whole seconds), `<|image>`, `<|video|>` x the frame's soft tokens, `<image|>`, frames
  joined by a space (Gemma4Processor.replace_video_token). Each stamp is tokenized on its
  own, as vLLM's prompt update does; transformers tokenizes the first with the text before
  it, which gives the same ids unless the vocabulary merges across that edge.
- vLLM (gemma4_mm.py): an image's `pixel_values` and `pixel_position_ids` (transformers'
  image_position_ids) batched; a video's frames as its images would be (vLLM runs them
  through the image processor at the video budget), `pixel_values_videos` and
  `pixel_position_ids_videos` flat by frame, `video_frame_counts`, and, kept on the CPU,
  `video_num_soft_tokens` and `video_timestamps` (index / rate, the prompt's stamps).
  vLLM has no Gemma 4 video loader: its plain one takes the frames (docs/sampling.md). On
  vLLM 0.33's generate endpoint (no is_embed) a video goes as one image item per frame
  (vllm_image_runs).
- Audio: a 16 kHz mono waveform's log-mel frames (Gemma4AudioFeatureExtractor,
  processors' audio_features.py), `input_features` (1, frames, 128) and
  `input_features_mask`; in the prompt `<|audio>`, `<|audio|>` x the frames through the
  encoder's two stride-2 convolutions (at most audio_seq_length, 750: 30 s), `<audio|>`.
  vLLM: each item's unpadded frames as `input_features_padded` and its all-true
  `input_features_mask`, batched.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from .base import AudioSide, Encode, Family, ImageSide, Side, SideConfig, VideoSide, View
from .sizing import SizeError
from .video import SampledVideo

SOFT_TOKEN_BUDGETS = (70, 140, 280, 560, 1120)  # the max_soft_tokens the classes accept
PATCH_PIXELS = 16 * 16 * 3

# Gemma4ImageProcessor's and Gemma4VideoProcessor's class attributes. Its patches are not the
# Qwen-VL ones: no merge or temporal blocks (1), its pooling is pooling_kernel_size.
_SHARED = {
    "size": None,  # sized by max_soft_tokens, not by a size
    "image_mean": (0.0, 0.0, 0.0),
    "image_std": (1.0, 1.0, 1.0),
    "rescale_factor": 1 / 255,
    "do_resize": True,
    "do_rescale": True,
    "resample": 3,
    "patch_size": 16,
    "merge_size": 1,
    "temporal_patch_size": 1,
    "pooling_kernel_size": 3,
}
IMAGE = _SHARED | {"do_normalize": False, "max_soft_tokens": 280, "image_seq_length": 280}
VIDEO = _SHARED | {"do_normalize": True, "max_soft_tokens": 70, "image_seq_length": 280}
EXTRA = frozenset({"max_soft_tokens", "pooling_kernel_size", "image_seq_length"})


def soft_token_size(height: int, width: int, patch_size: int, budget: int, pooling: int) -> tuple[int, int]:
    """(h, w) transformers' get_aspect_ratio_preserving_size resizes a frame to: the largest
    with sides multiples of patch_size * pooling and at most budget * pooling**2 patches."""
    if budget not in SOFT_TOKEN_BUDGETS:
        raise SizeError(f"max_soft_tokens must be one of {SOFT_TOKEN_BUDGETS}, got {budget}")
    target_pixels = budget * pooling**2 * patch_size**2
    factor = math.sqrt(target_pixels / (height * width))
    unit = pooling * patch_size
    target_height = int(math.floor(factor * height / unit)) * unit
    target_width = int(math.floor(factor * width / unit)) * unit
    longest = budget * unit  # (max_patches // pooling**2) * unit
    if target_height == 0 and target_width == 0:
        raise SizeError(f"a {width}x{height} frame resizes to 0x0")
    if target_height == 0:
        target_height, target_width = unit, min(width // height * unit, longest)
    elif target_width == 0:
        target_height, target_width = min(height // width * unit, longest), unit
    return target_height, target_width


def patches(frames: np.ndarray, patch_size: int, budget: int) -> tuple[np.ndarray, np.ndarray]:
    """(N, 3, H, W) frames as transformers' convert_image_to_patches cuts them, padded with
    zero patches to `budget` each: (N, budget, patch_size**2 * 3); and each patch's (column,
    row), (N, budget, 2) int64, -1 for padding."""
    count, channels, height, width = frames.shape
    rows, columns = height // patch_size, width // patch_size
    cut = frames.reshape(count, channels, rows, patch_size, columns, patch_size)
    cut = cut.transpose(0, 2, 4, 3, 5, 1).reshape(count, rows * columns, -1)
    if rows * columns > budget:
        raise ValueError(f"{rows * columns} patches exceed the budget of {budget}")
    pixels = np.zeros((count, budget, cut.shape[2]), frames.dtype)
    pixels[:, : rows * columns] = cut
    column, row = np.meshgrid(np.arange(columns), np.arange(rows), indexing="xy")
    positions = np.full((count, budget, 2), -1, np.int64)
    positions[:, : rows * columns] = np.stack([column, row], axis=-1).reshape(-1, 2)
    return pixels, positions


def _budget(config: SideConfig) -> int:
    return int(config.option("max_soft_tokens")) * int(config.option("pooling_kernel_size")) ** 2


def _resized(config: SideConfig, height: int, width: int) -> tuple[int, int]:
    return soft_token_size(
        height,
        width,
        config.patch_size,
        config.option("max_soft_tokens"),
        config.option("pooling_kernel_size"),
    )


def _frame_tokens(config: SideConfig, height: int, width: int) -> int:
    """Soft tokens of one resized image or frame: its patches over pooling_kernel_size**2."""
    resized_height, resized_width = _resized(config, height, width)
    patch_count = (resized_height // config.patch_size) * (resized_width // config.patch_size)
    return patch_count // int(config.option("pooling_kernel_size")) ** 2


def _real_patches(positions: np.ndarray) -> int:
    """Patches of one image or frame that are not padding (its (column, row) is not -1)."""
    return int(np.count_nonzero(positions[:, 0] >= 0))


class Gemma4Image(ImageSide):
    """Gemma4ImageProcessor."""

    tensor_names = ("pixel_values", None)  # no grid: item_grid counts the positions
    placeholder = "<|image|>"
    defaults = IMAGE
    takes_pixel_aliases = False
    vllm_names = {"image_position_ids": "pixel_position_ids"}
    vllm_pixels_field = "batched"

    def tile_tokens(self, config: SideConfig, num_frames: int, height: int, width: int) -> int:
        return _frame_tokens(config, height, width)

    def tile_tensors(
        self, config: SideConfig, tiles: np.ndarray, height: int, width: int
    ) -> dict[str, np.ndarray]:
        """The one resized image's patches and positions, a batch of one."""
        pixels, positions = patches(tiles, config.patch_size, _budget(config))
        return {"pixel_values": pixels, "image_position_ids": positions}

    def item_grid(self, tensors: Mapping[str, np.ndarray]) -> list[int]:
        """The image's patches (not the padding)."""
        return [_real_patches(tensors["image_position_ids"][0])]

    def item_tokens(
        self,
        grid: Sequence[int],
        config: SideConfig,
        token_ids: Mapping[str, int],
        video: SampledVideo | None,
        encode: Encode,
    ) -> list[int]:
        (patch_count,) = grid
        soft_tokens = patch_count // int(config.option("pooling_kernel_size")) ** 2
        return (
            [token_ids["boi_token_id"]]
            + [token_ids[self.token_key]] * soft_tokens
            + [token_ids["eoi_token_id"]]
        )


class Gemma4Video(VideoSide):
    """Gemma4VideoProcessor: each frame an image at the video budget."""

    tensor_names = ("pixel_values_videos", "num_frames_per_video")
    placeholder = "<|video|>"
    defaults = VIDEO
    own_keys = frozenset()
    takes_pixel_aliases = False
    vllm_names = {
        "video_position_ids": "pixel_position_ids_videos",
        "num_frames_per_video": "video_frame_counts",
    }

    def tile_tokens(self, config: SideConfig, num_frames: int, height: int, width: int) -> int:
        return num_frames * _frame_tokens(config, height, width)

    def tile_tensors(
        self, config: SideConfig, tiles: np.ndarray, height: int, width: int
    ) -> dict[str, np.ndarray]:
        """Every frame's patches and positions, and the video's frame count."""
        pixels, positions = patches(tiles, config.patch_size, _budget(config))
        return {
            "pixel_values_videos": pixels,
            "video_position_ids": positions,
            "num_frames_per_video": np.array([len(tiles)], np.int64),
        }

    def item_grid(self, tensors: Mapping[str, np.ndarray]) -> list[int]:
        """The frame count, and each frame's patches (not the padding)."""
        positions = tensors["video_position_ids"]
        return [len(positions), _real_patches(positions[0])]

    def item_tokens(
        self,
        grid: Sequence[int],
        config: SideConfig,
        token_ids: Mapping[str, int],
        video: SampledVideo | None,
        encode: Encode,
    ) -> list[int]:
        frame_count, patch_count = grid
        if video is None or len(video.indices) != frame_count:
            raise ValueError(
                f"{0 if video is None else len(video.indices)} frame times for {frame_count} frames"
            )
        soft_tokens = patch_count // int(config.option("pooling_kernel_size")) ** 2
        frame = (
            [token_ids["boi_token_id"]]
            + [token_ids[self.token_key]] * soft_tokens
            + [token_ids["eoi_token_id"]]
        )
        tokens: list[int] = []
        for position, stamp in enumerate(frame_stamps(video)):
            tokens += _encode(encode, f" {stamp} " if position else f"{stamp} ")
            tokens += frame
        return tokens


class Gemma4Audio(AudioSide):
    """Gemma4AudioFeatureExtractor, and Gemma4Processor's audio_seq_length cap."""

    # no grid: the mask says the item's size (item_grid)
    tensor_names = ("input_features", None)
    placeholder = "<|audio|>"
    defaults = {"audio_seq_length": 750, "audio_ms_per_token": 40}
    vllm_names = {"input_features": "input_features_padded"}
    vllm_pixels_field = "batched"
    vllm_unpadded = True  # each item its own frames (vllm_tensors), never padded to a batch's

    def audio_tokens(self, num_samples: int, seq_length: int) -> int:
        """vLLM's _compute_audio_num_tokens: mel frames of 20 ms every 10 ms after half a
        frame of left padding (16 kHz), through two stride-2 convolutions (kernel 3, one
        sample of padding each side), at most seq_length."""
        frame_length, hop_length = 320, 160
        frames = (num_samples + frame_length // 2 - (frame_length + 1)) // hop_length + 1
        if frames <= 0:
            return 0
        for _ in range(2):
            frames = (frames + 2 - 3) // 2 + 1
        return min(frames, seq_length)

    def soft_tokens(self, frames: int, seq_length: int) -> int:
        """transformers' replace_audio_token: the mask through two stride-2 convolutions."""
        for _ in range(2):
            frames = (frames + 1) // 2
        return min(frames, seq_length)

    def item_grid(self, tensors: Mapping[str, np.ndarray]) -> list[int]:
        """The item's mel frames that are not padding."""
        return [int(np.count_nonzero(tensors["input_features_mask"][0]))]

    def placeholder_tokens(self, frames: int, seq_length: int, token_ids: Mapping[str, int]) -> list[int]:
        """`<|audio>`, `<|audio|>` x the soft tokens, `<audio|>`."""
        soft_tokens = self.soft_tokens(frames, seq_length)
        return (
            [token_ids["boa_token_id"]]
            + [token_ids[self.token_key]] * soft_tokens
            + [token_ids["eoa_token_id"]]
        )

    def item_tokens(
        self,
        grid: Sequence[int],
        config: SideConfig,
        token_ids: Mapping[str, int],
        video: SampledVideo | None,
        encode: Encode,
    ) -> list[int]:
        (frames,) = grid
        return self.placeholder_tokens(frames, int(config.option("audio_seq_length")), token_ids)

    def vllm_tensors(self, tensors: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """vLLM's Gemma4MultiModalProcessor keeps each item's unmasked frames and their
        (all-true) mask, so a cached item is the same whatever batch it came in."""
        mask = tensors["input_features_mask"][0]
        return {
            "input_features": tensors["input_features"][0][mask][None],
            "input_features_mask": mask[mask][None],
        }

    def refusal(self, config: Mapping[str, Any], model: str) -> str | None:
        """gemma4_mm.py's validate_num_items, for a model without config.json's audio_config
        (gemma-4-31B-it, 26B-A4B-it): its message, word for word."""
        if config.get("audio_config") is not None:
            return None
        return (
            f"Audio input was provided but the model '{model}' does not have an audio tower. "
            "Audio inference is only supported for Gemma4 models that include an audio_config "
            "(i.e., models that include an audio_config)."
        )


def frame_times(video: SampledVideo) -> list[float]:
    """Each sampled frame's index / the video's rate (24 where unknown): transformers'
    VideoMetadata.timestamps, vLLM's video_timestamps."""
    return [index / video.source_fps for index in video.indices]


def frame_stamps(video: SampledVideo) -> list[str]:
    """Each frame's "mm:ss": whole minutes, then whole seconds of the minute."""
    return [f"{int(seconds // 60):02d}:{int(seconds % 60):02d}" for seconds in frame_times(video)]


class Gemma4(Family):
    name = "gemma4"
    model_types = ("gemma4",)
    processor_classes = ("Gemma4Processor",)
    video_processor_classes = ("Gemma4VideoProcessor",)
    image_processor_classes = ("Gemma4ImageProcessor",)
    token_names = {
        "image_token_id": "<|image|>",
        "video_token_id": "<|video|>",
        "boi_token_id": "<|image>",
        "eoi_token_id": "<image|>",
        "audio_token_id": "<|audio|>",
        "boa_token_id": "<|audio>",
        "eoa_token_id": "<audio|>",
    }
    image = Gemma4Image()
    video = Gemma4Video()
    audio = Gemma4Audio()
    max_position_embeddings = 131072  # Gemma4TextConfig's default
    layout = "tiles"
    extra_keys = EXTRA
    video_metadata_in_hash = True  # vLLM's video_needs_metadata
    vllm_frames_as_images = True

    def image_size(self, config: SideConfig, height: int, width: int) -> tuple[int, int]:
        return _resized(config, height, width)

    def video_size(self, config: SideConfig, num_frames: int, height: int, width: int) -> tuple[int, int]:
        return _resized(config, height, width)

    def image_views(self, config: SideConfig, height: int, width: int) -> list[View]:
        """The whole image, resized: one tile."""
        size = _resized(config, height, width)
        return [View(size, size)]

    def vllm_image_runs(
        self, side: Side, tensors: Mapping[str, np.ndarray]
    ) -> list[dict[str, np.ndarray]] | None:
        """A video as one image per frame: the frame's patches and positions (at the video's
        budget, 70 soft tokens) as an image's. vLLM 0.33 makes a video's frames with its image
        processor and runs them through the same tower; the image path pools each to its rows
        // pooling_kernel_size**2 as the video path does; and its two-way attention spans each
        run of embeddings alike (extract_embeds_range, images and videos). The `mm:ss` stamps
        between are plain prompt tokens."""
        if side is not self.video:
            return None
        pixels, positions = (tensors[key] for key in ("pixel_values_videos", "video_position_ids"))
        return [
            {"pixel_values": pixels[frame : frame + 1], "image_position_ids": positions[frame : frame + 1]}
            for frame in range(len(pixels))
        ]

    def vllm_video_fields(
        self, video: SampledVideo, temporal_patch_size: int, num_tokens: int
    ) -> dict[str, np.ndarray | list[float] | list[int]]:
        """video_num_soft_tokens (each frame's) and video_timestamps (each frame's time)."""
        frames = len(video.indices)
        return {
            "video_num_soft_tokens": [num_tokens // frames] * frames,
            "video_timestamps": frame_times(video),
        }


@lru_cache(maxsize=4096)
def _encode(encode: Encode, text: str) -> tuple[int, ...]:
    return tuple(encode(text))


FAMILY = Gemma4()
