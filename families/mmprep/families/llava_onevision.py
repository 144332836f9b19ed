"""LLaVA-OneVision in its Hugging Face form (transformers' LlavaOnevisionProcessor,
LlavaOnevisionImageProcessor and LlavaOnevisionVideoProcessor; vLLM's llava_onevision.py).
Its language model is Qwen2, with `<image>` and `<video>` added to the vocabulary.

- Images ("anyres"): the image resized whole to the tile size (384 x 384), then the image
  resized, aspect kept, into the grid resolution (`image_grid_pinpoints`) that keeps most of
  it and wastes least, padded with zeros to it (centred) and cut into tiles, row by row:
  `pixel_values` (1 + tiles, 3, 384, 384), and `image_sizes` (height, width) as given.
- Videos: each frame resized to 384 x 384: `pixel_values_videos` (frames, 3, 384, 384).
- The prompt: an image's `<image>` stands for the base tile's features (num_image_tokens,
  729 for SigLIP's 27 x 27 patches), plus the grid's features with the padding taken off
  (`unpadded`, pooled down where more than about 9 tiles' worth) and one newline per row; a
  video's `<video>` for each frame's 27 x 27 patches pooled 2 x 2 (14 x 14), plus one newline.
- vLLM: every field batched (an image's patches are its own item's, not a flat run);
  `image_sizes` kept on the CPU; no supports_mm_device_do_normalize, so the pixels it sends
  are normalized floats; a video's metadata is not parsed with it.

transformers' processor counts every image of a flat list as a single image (anyres);
only a nested list of several images for one text uses the "multi-image" form (the image
padded square, 730 tokens), which vLLM never passes, so neither does mmprep.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from .base import Encode, Family, ImageSide, SideConfig, VideoSide, View
from .video import SampledVideo

TILE = 384
# transformers' LlavaOnevisionImageProcessor.image_grid_pinpoints (the published configs' too):
# every (h, w) of 1 to 6 tiles a side
PINPOINTS = tuple((TILE * rows, TILE * columns) for rows in range(1, 7) for columns in range(1, 7))
COMMON = {
    "size": {"height": TILE, "width": TILE},
    "rescale_factor": 1 / 255,
    "do_resize": True,
    "do_rescale": True,
    "do_normalize": True,
    "resample": 3,
    # OPENAI_CLIP_MEAN / STD are the classes' defaults; the published models say 0.5
    "image_mean": (0.48145466, 0.4578275, 0.40821073),
    "image_std": (0.26862954, 0.26130258, 0.27577711),
    # what the Qwen-style keys mean here: one 384 x 384 tile is one "patch" of one frame
    "patch_size": TILE,
    "temporal_patch_size": 1,
    "merge_size": 1,
}
IMAGE = COMMON | {"image_grid_pinpoints": [list(pair) for pair in PINPOINTS]}
VIDEO = COMMON | {"max_video_tokens": 1}  # a Qwen-VL cap, read by no rule of this family
# The processor's own settings (processor_config.json of the published models): SigLIP's
# 27 x 27 patches of a 384 tile, all of them kept ("full"), at most 9 tiles' worth unpooled.
NUM_IMAGE_TOKENS = 729
MAX_TILES = 9  # vision_aspect_ratio "anyres_max_9"
POOL_STRIDE = 2  # the model's spatial_pool_stride for video frames


class LlavaOnevisionImage(ImageSide):
    """LlavaOnevisionImageProcessor ("anyres")."""

    tensor_names = ("pixel_values", "image_sizes")
    placeholder = "<image>"
    defaults = IMAGE
    own_keys = frozenset({"image_grid_pinpoints"})
    takes_pixel_aliases = False
    vllm_pixels_field = "batched"

    def tile_tokens(self, config: SideConfig, num_frames: int, height: int, width: int) -> int:
        return image_tokens(height, width, config)

    def tile_tensors(
        self, config: SideConfig, tiles: np.ndarray, height: int, width: int
    ) -> dict[str, np.ndarray]:
        """A batch of one: (1, tiles, 3, H, W), and the image's (height, width) as given."""
        pixels_key, sizes_key = self.tensor_names
        assert sizes_key is not None
        return {pixels_key: tiles[None], sizes_key: np.array([[height, width]], np.int64)}

    def item_grid(self, tensors: Mapping[str, np.ndarray]) -> list[int]:
        """The image's (height, width) as given."""
        return [int(size) for size in tensors["image_sizes"][0]]

    def batch_pixels(self, pixels: Sequence[np.ndarray]) -> list[np.ndarray]:
        """do_pad pads each image's tiles to the most of any in the batch (vLLM's batched
        field keeps the padding in each item)."""
        return pad_batch(pixels) if pixels else []

    def item_tokens(
        self,
        grid: Sequence[int],
        config: SideConfig,
        token_ids: Mapping[str, int],
        video: SampledVideo | None,
        encode: Encode,
    ) -> list[int]:
        """`grid` is the image's (height, width)."""
        height, width = grid
        return [token_ids[self.token_key]] * image_tokens(height, width, config)


class LlavaOnevisionVideo(VideoSide):
    """LlavaOnevisionVideoProcessor: each frame one tile. vLLM processes the videos one at
    a time, so each keeps its own frames (no batch padding)."""

    tensor_names = ("pixel_values_videos", None)
    placeholder = "<video>"
    defaults = VIDEO
    takes_pixel_aliases = False
    vllm_pixels_field = "batched"

    def tile_tokens(self, config: SideConfig, num_frames: int, height: int, width: int) -> int:
        return video_tokens(num_frames)

    def tile_tensors(
        self, config: SideConfig, tiles: np.ndarray, height: int, width: int
    ) -> dict[str, np.ndarray]:
        """A batch of one: (1, frames, 3, H, W)."""
        return {self.tensor_names[0]: tiles[None]}

    def item_grid(self, tensors: Mapping[str, np.ndarray]) -> list[int]:
        """The video's frame count."""
        return [len(tensors[self.tensor_names[0]][0])]

    def item_tokens(
        self,
        grid: Sequence[int],
        config: SideConfig,
        token_ids: Mapping[str, int],
        video: SampledVideo | None,
        encode: Encode,
    ) -> list[int]:
        """`grid` is the video's frame count first."""
        return [token_ids[self.token_key]] * video_tokens(grid[0])


class LlavaOnevision(Family):
    name = "llava_onevision"
    model_types = ("llava_onevision",)
    processor_classes = ("LlavaOnevisionProcessor",)
    video_processor_classes = ("LlavaOnevisionVideoProcessor",)
    image_processor_classes = ("LlavaOnevisionImageProcessor",)
    token_names = {"image_token_id": "<image>", "video_token_id": "<video>"}
    config_aliases = {"image_token_id": "image_token_index", "video_token_id": "video_token_index"}
    image = LlavaOnevisionImage()
    video = LlavaOnevisionVideo()
    max_position_embeddings = 32768  # Qwen2Config's default
    layout = "tiles"
    extra_keys = frozenset({"image_grid_pinpoints"})
    item_switches = frozenset({"do_pad"})  # the images of a batch padded to one tile count

    def image_size(self, config: SideConfig, height: int, width: int) -> tuple[int, int]:
        return config.fixed_size

    def video_size(self, config: SideConfig, num_frames: int, height: int, width: int) -> tuple[int, int]:
        return config.fixed_size

    def image_views(self, config: SideConfig, height: int, width: int) -> list[View]:
        """The base tile, then the grid: resized with the aspect kept, padded, cut in tiles."""
        tile_h, tile_w = config.fixed_size
        best = best_resolution(height, width, config.grid_pinpoints)
        inner = patch_output_size(height, width, best)
        top, left = (best[0] - inner[0]) // 2, (best[1] - inner[1]) // 2
        return [View((tile_h, tile_w), (tile_h, tile_w)), View(inner, best, (top, left), (tile_h, tile_w))]


def best_resolution(height: int, width: int, pinpoints: Sequence[Sequence[int]]) -> tuple[int, int]:
    """transformers' select_best_resolution: the (h, w) that shows most of the image, then
    wastes least; the first such in the list."""
    best, most, least = (0, 0), 0, math.inf
    for target_h, target_w in pinpoints:
        scale = min(target_w / width, target_h / height)
        shown = min(int(width * scale) * int(height * scale), width * height)
        wasted = target_w * target_h - shown
        if shown > most or (shown == most and wasted < least):
            best, most, least = (target_h, target_w), shown, wasted
    return best


def patch_output_size(height: int, width: int, target: tuple[int, int]) -> tuple[int, int]:
    """transformers' get_patch_output_size: the image scaled, aspect kept, to fit `target`."""
    target_h, target_w = target
    scale_w, scale_h = target_w / width, target_h / height
    if scale_w < scale_h:
        return min(math.ceil(height * scale_w), target_h), target_w
    return target_h, min(math.ceil(width * scale_h), target_w)


def image_tokens(height: int, width: int, config: SideConfig) -> int:
    """LlavaOnevisionProcessor._get_number_of_features (vLLM's get_num_image_tokens)."""
    tile_h, tile_w = config.fixed_size
    best_h, best_w = best_resolution(height, width, config.grid_pinpoints)
    patches = int(math.sqrt(NUM_IMAGE_TOKENS))
    current_h, current_w = patches * (best_h // tile_h), patches * (best_w // tile_w)
    if width / height > current_w / current_h:
        new_h = int(round(height * (current_w / width), 7))
        current_h -= (current_h - new_h) // 2 * 2
    else:
        new_w = int(round(width * (current_h / height), 7))
        current_w -= (current_w - new_w) // 2 * 2
    unpadded, newlines = current_h * current_w, current_h
    ratio = math.sqrt(current_h * current_w / (MAX_TILES * patches**2))
    if ratio > 1.1:  # pooled down to about MAX_TILES tiles' worth
        unpadded = int(current_h // ratio) * int(current_w // ratio)
        newlines = int(current_h // ratio)
    return unpadded + newlines + NUM_IMAGE_TOKENS


def video_tokens(num_frames: int) -> int:
    """LlavaOnevisionProcessor.replace_video_token: each frame's patches pooled, one newline."""
    pooled = math.ceil(int(math.sqrt(NUM_IMAGE_TOKENS)) / POOL_STRIDE)
    return num_frames * pooled * pooled + 1


def pad_batch(pixels: Sequence[np.ndarray]) -> list[np.ndarray]:
    """transformers' _pad_for_batching (do_pad): each image's tiles, (1, tiles, 3, H, W),
    padded with zeros (after normalizing) to the most any image of the batch has. Written
    into zeros of the tiles' own dtype, which np.concatenate would lose (a bfloat16's)."""
    most = max(tiles.shape[1] for tiles in pixels)
    padded = []
    for tiles in pixels:
        if tiles.shape[1] == most:
            padded.append(tiles)
            continue
        out = np.zeros((1, most, *tiles.shape[2:]), tiles.dtype)
        out[:, : tiles.shape[1]] = tiles
        padded.append(out)
    return padded


FAMILY = LlavaOnevision()
