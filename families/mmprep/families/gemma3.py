"""Gemma 3 (config.json model_type `gemma3`: gemma-3-4b-it, 12b-it, 27b-it; transformers'
Gemma3Processor over Gemma3ImageProcessor; vLLM 0.33's gemma3_mm.py). Images only: Gemma 3
takes no video, and a video part is refused (Side.taken).

- Sizing: every image is resized to the config's size (896 x 896 published; the class's is
  224), its aspect not kept, bilinear (resample 2): SigLIP's input, 256 soft tokens
  (image_seq_length: 64 x 64 patches of 14, pooled 4 x 4).
- Pan and scan, off unless asked for (Gemma3Processor's defaults, which it passes over the
  image processor's config: a config file's pan-and-scan keys change nothing, so they are
  only per call here too, a request's mm_processor_kwargs): an image whose longer side is at
  least `pan_and_scan_min_ratio_to_activate` (1.2) times its shorter one is also cut along
  the longer side into about as many crops as that ratio (rounded half up), at most one per
  `pan_and_scan_min_crop_size` (256) pixels, 2 to `pan_and_scan_max_num_crops` (4), each
  ceil(side / crops) long (the last one what is left) and none shorter than the minimum
  (else no crops at all); each crop resized as the whole image is, after it.
- Tensors: `pixel_values` (1 + crops, 3, 896, 896) float32, rescaled and normalized (mean
  and std 0.5), and `num_crops` (1,) int64, as Gemma3ImageProcessor returns them
  (Gemma3Processor leaves num_crops out of its own output: the model does not take it).
- The prompt: the template writes `<start_of_image>` once per image; the processor writes
  in its place "\\n\\n", `<start_of_image>`, image_seq_length x `<image_soft_token>`,
  `<end_of_image>`, "\\n\\n" (with crops: "Here is the original image {that} and here are
  some crops to help you see better {that} {that} ...", one per crop). That text is
  tokenized on its own, as vLLM's prompt update does, and the line breaks it then meets are
  joined as the tokenizer joins them in the whole text ("\\n" and "\\n\\n", either way round,
  one "\\n\\n\\n" token; "\\n\\n" twice "\\n\\n\\n\\n": vLLM's _apply_token_matches), which
  gives transformers' ids wherever the template's text meets an image (after a turn's
  "\\n", after a system prompt's "\\n\\n", between two images). vLLM's rule, not the
  tokenizer's, wins where they part: three line breaks in the text before an image stay
  "\\n\\n\\n" then "\\n\\n" (transformers: one token of five).
- vLLM (gemma3_mm.py): `pixel_values` flat, each item its crops and the whole image, and
  `num_patches` (crops + 1, transformers' num_crops + 1) batched on the CPU; no
  mm_device_do_normalize; the request's mm_processor_kwargs in the item's hash. On vLLM
  0.33's generate wire (no is_embed) an image with crops goes as one image item per view
  (vllm_image_runs).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np

from .base import Encode, Family, ImageSide, NoVideoSide, Side, SideConfig, View
from .sizing import SizeError
from .video import SampledVideo

# Gemma3ImageProcessor's class attributes (the published config sets size 896 and
# resample 2, as here). Images have no patches of their own: patch, merge and temporal
# sizes of 1 say so to the code that reads them.
DEFAULTS = {
    "size": {"height": 224, "width": 224},
    "image_mean": (0.5, 0.5, 0.5),
    "image_std": (0.5, 0.5, 0.5),
    "rescale_factor": 1 / 255,
    "do_resize": True,
    "do_rescale": True,
    "do_normalize": True,
    "resample": 2,
    "patch_size": 1,
    "merge_size": 1,
    "temporal_patch_size": 1,
}
# Gemma3Processor's images_kwargs: what it passes to the image processor on every call,
# over the image processor's own config (its null keys, and any value a file gives)
PAN_AND_SCAN = {
    "do_pan_and_scan": False,
    "pan_and_scan_min_crop_size": 256,
    "pan_and_scan_max_num_crops": 4,
    "pan_and_scan_min_ratio_to_activate": 1.2,
}
# image_seq_length: Gemma3Processor's soft tokens per image (its published configs give it
# in preprocessor_config.json too, which is what is read)
EXTRA = {"image_seq_length": 256, **PAN_AND_SCAN}
FULL_IMAGE = "\n\n{boi}{soft}{eoi}\n\n"  # Gemma3Processor.full_image_sequence
WITH_CROPS = "Here is the original image {image} and here are some crops to help you see better {crops}"


def pan_and_scan(
    height: int, width: int, min_crop_size: int, max_num_crops: int, min_ratio: float
) -> list[tuple[int, int, int, int]]:
    """The (top, left, height, width) crops Gemma3ImageProcessor.pan_and_scan_batched cuts
    from an image of this size, row by row; [] where it cuts none."""
    if min_crop_size <= 0 or max_num_crops <= 0:
        raise SizeError(
            "pan_and_scan_min_crop_size and pan_and_scan_max_num_crops must be positive, "
            f"got {min_crop_size} and {max_num_crops}"
        )
    if width >= height:  # square or landscape
        if width / height < min_ratio:
            return []
        across = min(math.floor(width / min_crop_size), math.floor(width / height + 0.5))
        across, down = min(max_num_crops, max(2, across)), 1
    else:
        if height / width < min_ratio:
            return []
        down = min(math.floor(height / min_crop_size), math.floor(height / width + 0.5))
        across, down = 1, min(max_num_crops, max(2, down))
    crop_width, crop_height = math.ceil(width / across), math.ceil(height / down)
    if min(crop_width, crop_height) < min_crop_size:
        return []
    crops = [
        (top, left, min(crop_height, height - top), min(crop_width, width - left))
        for top in range(0, crop_height * down, crop_height)
        for left in range(0, crop_width * across, crop_width)
    ]
    if any(crop_h <= 0 or crop_w <= 0 for _, _, crop_h, crop_w in crops):
        raise SizeError(f"pan and scan would cut an empty crop from a {width}x{height} image")
    return crops


def _crops(config: SideConfig, height: int, width: int) -> list[tuple[int, int, int, int]]:
    """The pan-and-scan crops of an image of this size under the side's options (none
    unless do_pan_and_scan)."""
    if not config.option("do_pan_and_scan"):
        return []
    return pan_and_scan(
        height,
        width,
        config.option("pan_and_scan_min_crop_size"),
        config.option("pan_and_scan_max_num_crops"),
        config.option("pan_and_scan_min_ratio_to_activate"),
    )


class Gemma3Image(ImageSide):
    """Gemma3ImageProcessor, with Gemma3Processor's pan-and-scan options per call."""

    tensor_names = ("pixel_values", "num_crops")
    unused_input_names = ("num_crops",)  # Gemma3Processor's: its model counts crops by the prompt
    placeholder = "<start_of_image>"  # gemma3_mm.py's get_placeholder_str
    pad_key = "boi_token_id"  # the template writes <start_of_image>; the model embeds soft tokens
    defaults = DEFAULTS | EXTRA
    request_keys = frozenset(PAN_AND_SCAN)
    takes_pixel_aliases = False
    vllm_names = {"num_crops": "num_patches"}

    def tile_tokens(self, config: SideConfig, num_frames: int, height: int, width: int) -> int:
        """image_seq_length soft tokens for the whole image and for each crop."""
        return int(config.option("image_seq_length")) * (1 + len(_crops(config, height, width)))

    def tile_tensors(
        self, config: SideConfig, tiles: np.ndarray, height: int, width: int
    ) -> dict[str, np.ndarray]:
        """The whole image then its crops (N, 3, H, W), and num_crops."""
        return {"pixel_values": tiles, "num_crops": np.array([len(tiles) - 1], np.int64)}

    def item_tokens(
        self,
        grid: Sequence[int],
        config: SideConfig,
        token_ids: Mapping[str, int],
        video: SampledVideo | None,
        encode: Encode,
    ) -> list[int]:
        """Gemma3Processor's text for the image, tokenized as vLLM tokenizes it: whole."""
        (crops,) = grid
        return list(_encode(encode, image_text(int(config.option("image_seq_length")), crops)))

    def vllm_grid(self, grid: np.ndarray) -> np.ndarray:
        """gemma3_mm.py's num_patches: the crops and the whole image (an array, 0-d as given)."""
        return np.asarray(grid + 1, dtype=np.int64)


def image_text(soft_tokens: int, crops: int) -> str:
    """Gemma3Processor.replace_image_token's text for one image with `crops` crops."""
    full = FULL_IMAGE.format(
        boi="<start_of_image>", soft="<image_soft_token>" * soft_tokens, eoi="<end_of_image>"
    )
    if not crops:
        return full
    return WITH_CROPS.format(image=full, crops=" ".join([full] * crops))


class Gemma3Video(NoVideoSide):
    """No video: Gemma 3's processor has none."""

    defaults = DEFAULTS | EXTRA


class Gemma3(Family):
    name = "gemma3"
    model_types = ("gemma3",)
    processor_classes = ("Gemma3Processor",)
    image_processor_classes = ("Gemma3ImageProcessor",)
    # Gemma3Processor's tokens, which config.json gives as image_token_index and the rest
    token_names = {
        "image_token_id": "<image_soft_token>",
        "boi_token_id": "<start_of_image>",
        "eoi_token_id": "<end_of_image>",
    }
    config_aliases = {
        "image_token_id": "image_token_index",
        "boi_token_id": "boi_token_index",
        "eoi_token_id": "eoi_token_index",
    }
    image = Gemma3Image()
    video = Gemma3Video()
    layout = "tiles"
    extra_keys = frozenset(EXTRA)
    max_position_embeddings = 131072  # Gemma3TextConfig's default

    def vllm_image_runs(
        self, side: Side, tensors: Mapping[str, np.ndarray]
    ) -> list[dict[str, np.ndarray]] | None:
        """An image with pan-and-scan crops as one image without crops per run of soft
        tokens, the whole image first, as the prompt has them (no crops: the image whole).
        gemma3_mm.py embeds each of an item's 896 x 896 views by itself (SigLIP and the
        projector take them as a batch and split the result by num_patches), and its
        prefix-LM attention spans each run of an item's embeddings (extract_embeds_range),
        so a crop sent as an image of its own is embedded and attended to as in the whole."""
        pixels = tensors.get("pixel_values")
        if side is not self.image or pixels is None or len(pixels) == 1:
            return None
        no_crops = np.zeros(1, np.int64)
        return [
            {"pixel_values": pixels[view : view + 1], "num_crops": no_crops} for view in range(len(pixels))
        ]

    def image_size(self, config: SideConfig, height: int, width: int) -> tuple[int, int]:
        """The config's size, whatever the image's (its crops checked here: a SizeError for
        options that cut none that transformers could resize)."""
        _crops(config, height, width)
        return config.fixed_size

    def video_size(self, config: SideConfig, num_frames: int, height: int, width: int) -> tuple[int, int]:
        raise SizeError("gemma3 models take no video")

    def image_views(self, config: SideConfig, height: int, width: int) -> list[View]:
        """The whole image, then each pan-and-scan crop, each resized to the config's size."""
        size = config.fixed_size
        return [View(size, size)] + [View(size, size, crop=crop) for crop in _crops(config, height, width)]

    def token_merges(self, encode: Encode) -> list[tuple[list[int], list[int]]]:
        """gemma3_mm.py's _apply_token_matches: "\\n" + "\\n\\n" and "\\n\\n" + "\\n" to
        "\\n\\n\\n", "\\n\\n" + "\\n\\n" to "\\n\\n\\n\\n", where the tokenizer has each as one
        token (Gemma's has every run of 1 to 31)."""
        runs = [encode("\n" * count) for count in range(1, 5)]
        if any(len(run) != 1 for run in runs):
            return []
        one, two, three, four = (run[0] for run in runs)
        return [([one, two], [three]), ([two, one], [three]), ([two, two], [four])]


@lru_cache(maxsize=64)
def _encode(encode: Encode, text: str) -> tuple[int, ...]:
    return tuple(encode(text))


FAMILY = Gemma3()
