"""Mistral 3 (config.json model_type `mistral3`: Mistral-Small-3.1-24B-Instruct-2503 and
3.2-24B-Instruct-2506 in Hugging Face's format; transformers' PixtralProcessor over
PixtralImageProcessor(Fast); vLLM 0.33's mistral3.py). Images only: the processor has no
video side, and a video part is refused (Side.taken).

- Sizing: an image is scaled down (never up) to fit a square of the config's
  `size.longest_edge` (1540 published; the class's 1024), each side floored, then each side
  rounded up to a multiple of patch_size x spatial_merge_size (14 x 2 = 28: the processor
  passes that product to the image processor on every call, over its file's patch_size), aspect
  kept otherwise; bicubic (resample 3). patch_size and spatial_merge_size are
  processor_config.json's (Family.processor_keys).
- Tensors: `pixel_values` (1, 3, H, W) float32, rescaled and normalized (CLIP's mean and
  std), and `image_sizes` (1, 2) int64, the resized (H, W). A batch pads each image with
  zeros, after normalizing, to the largest height and width among them (do_pad).
- The prompt: the template writes `[IMG]` once per image; the processor writes in its place
  H/28 rows of W/28 `[IMG]` tokens, each row closed by `[IMG_BREAK]`, the last by `[IMG_END]`
  instead: all special tokens, so tokenizing them alone or in the whole text gives the same
  ids. The model embeds the image at the `[IMG]` tokens only (H/28 x W/28 of them, the
  item's num_tokens); the breaks and the end are text.
- vLLM (mistral3.py): `pixel_values` batched, each item its own (3, H, W) with the batch's
  padding cut off (its _postprocess_hf_mm_data) and no `image_sizes`;
  supports_mm_device_do_normalize (the renderer sends uint8 pixels by default); its range is
  the whole run, the `[IMG]` tokens selected in it (is_embed), which vLLM 0.33's generate
  cannot say (rows split by breaks).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from .base import Encode, Family, ImageSide, NoVideoSide, SideConfig, View
from .sizing import SizeError
from .video import SampledVideo

# PixtralImageProcessor's class attributes, and PixtralProcessor's patch_size and
# spatial_merge_size (16 and 1; the published processor_config.json gives 14 and 2)
DEFAULTS = {
    "size": {"longest_edge": 1024},
    "image_mean": (0.48145466, 0.4578275, 0.40821073),
    "image_std": (0.26862954, 0.26130258, 0.27577711),
    "rescale_factor": 1 / 255,
    "do_resize": True,
    "do_rescale": True,
    "do_normalize": True,
    "resample": 3,
    "patch_size": 16,
    "merge_size": 1,
    "temporal_patch_size": 1,
}


def resized_size(height: int, width: int, longest_edge: int, factor: int) -> tuple[int, int]:
    """PixtralImageProcessor's get_resize_output_image_size: (height, width) scaled down to fit
    longest_edge (floored), then each rounded up to a multiple of `factor`; a SizeError where
    a side would be 0 (an image too thin to scale down)."""
    ratio = max(height / longest_edge, width / longest_edge)
    if ratio > 1:
        height, width = math.floor(height / ratio), math.floor(width / ratio)
    if height < 1 or width < 1:
        raise SizeError(
            f"an image whose shorter side is under 1 pixel once its longer side fits {longest_edge} "
            "cannot be resized (transformers' PixtralImageProcessor fails on it)"
        )
    return ((height - 1) // factor + 1) * factor, ((width - 1) // factor + 1) * factor


class Mistral3Image(ImageSide):
    """PixtralImageProcessor, with PixtralProcessor's patch and merge sizes."""

    tensor_names = ("pixel_values", "image_sizes")
    placeholder = "[IMG]"  # mistral3.py's dummy text and the template's
    defaults = DEFAULTS
    takes_pixel_aliases = False
    vllm_pixels_field = "batched"
    vllm_unpadded = True
    vllm_left_out = ("image_sizes",)

    def tile_tokens(self, config: SideConfig, num_frames: int, height: int, width: int) -> int:
        """The image's embeddings: one per [IMG] token, (H / 28) x (W / 28) of the resized size."""
        resized = resized_size(height, width, config.max_pixels, config.factor)
        return (resized[0] // config.factor) * (resized[1] // config.factor)

    def tile_tensors(
        self, config: SideConfig, tiles: np.ndarray, height: int, width: int
    ) -> dict[str, np.ndarray]:
        """The resized image (1, 3, H, W), and image_sizes [[H, W]]."""
        return {"pixel_values": tiles, "image_sizes": np.array([tiles.shape[2:]], np.int64)}

    def item_tokens(
        self,
        grid: Sequence[int],
        config: SideConfig,
        token_ids: Mapping[str, int],
        video: SampledVideo | None,
        encode: Encode,
    ) -> list[int]:
        """`grid` is the resized (H, W): rows of [IMG] closed by [IMG_BREAK], the last by [IMG_END]."""
        height, width = grid
        rows, columns = height // config.factor, width // config.factor
        tokens = ([token_ids["image_token_id"]] * columns + [token_ids["image_break_token_id"]]) * rows
        tokens[-1] = token_ids["image_end_token_id"]
        return tokens

    def batch_pixels(self, pixels: Sequence[np.ndarray]) -> list[np.ndarray]:
        """do_pad: each image padded with zeros (after normalizing) to the batch's largest
        height and width, at the bottom and the right."""
        if not pixels:
            return []
        height = max(item.shape[-2] for item in pixels)
        width = max(item.shape[-1] for item in pixels)
        padded = []
        for item in pixels:
            out = np.zeros((*item.shape[:-2], height, width), item.dtype)
            out[..., : item.shape[-2], : item.shape[-1]] = item
            padded.append(out)
        return padded


class Mistral3Video(NoVideoSide):
    """No video: PixtralProcessor has none."""

    defaults = DEFAULTS


class Mistral3(Family):
    name = "mistral3"
    model_types = ("mistral3",)
    processor_classes = ("PixtralProcessor",)
    image_processor_classes = ("PixtralImageProcessor",)
    processor_keys = {"patch_size": "patch_size", "spatial_merge_size": "merge_size"}
    # PixtralProcessor's tokens; config.json gives the image token as image_token_index
    token_names = {
        "image_token_id": "[IMG]",
        "image_break_token_id": "[IMG_BREAK]",
        "image_end_token_id": "[IMG_END]",
    }
    config_aliases = {"image_token_id": "image_token_index"}
    image = Mistral3Image()
    video = Mistral3Video()
    layout = "tiles"
    item_switches = frozenset({"do_pad"})  # pads a batch only
    max_position_embeddings = 131072  # MistralConfig's default
    device_normalizes = True  # vllm 0.33's mistral3.py: supports_mm_device_do_normalize

    def image_size(self, config: SideConfig, height: int, width: int) -> tuple[int, int]:
        return resized_size(height, width, config.max_pixels, config.factor)

    def video_size(self, config: SideConfig, num_frames: int, height: int, width: int) -> tuple[int, int]:
        raise SizeError("mistral3 models take no video")

    def image_views(self, config: SideConfig, height: int, width: int) -> list[View]:
        """The whole image, resized as image_size says: one view, one tile."""
        size = self.image_size(config, height, width)
        return [View(size, size)]


FAMILY = Mistral3()
