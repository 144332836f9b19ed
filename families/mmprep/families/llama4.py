"""Llama 4 (config.json model_type `llama4`: Llama-4-Scout-17B-16E-Instruct,
Llama-4-Maverick-17B-128E-Instruct; Llama4ForConditionalGeneration; transformers'
Llama4Processor over Llama4ImageProcessor(Fast); vLLM 0.33's mllama4.py). Images only: Llama
4 takes no video, and a video part is refused (Side.taken).

- Sizing: tiles of `size` (336 x 336). Of the canvases of 1 to `max_patches` (16) tiles,
  transformers' get_best_fit takes the one that scales the image least down, else the one
  that scales it least up (in float32, as torch divides), the smaller on a tie; the image is
  resized into it without distortion (upscaled no further than to one tile a side, unless
  `resize_to_max_canvas`), bilinear, antialiased, pasted at the top left into zeros and cut
  into tiles row by row. With more than one tile the whole image, resized to one tile (its
  aspect not kept), follows: the global tile.
- Rescale and normalize in bfloat16, as Llama4ImageProcessor's rescale_and_normalize does
  ("as in the original implementation"): the uint8 pixels to bfloat16, times rescale_factor,
  minus the mean, over the std, each step rounded to bfloat16. The values are kept here as
  the float32 numbers they are (every bfloat16 is one): transformers' bfloat16 tensor holds
  the same values, and vLLM 0.33's render answers them as float32 too (the same bytes).
- Tensors: `pixel_values` (tiles, 3, 336, 336) and `aspect_ratios` (1, 2) int64, the canvas'
  (rows, columns) of tiles (Llama4Processor leaves it out of its own output: the model does
  not take it).
- The prompt: the template writes `<|image|>` once per image; the processor writes in its
  place `<|image_start|>`, with more than one tile each row's tiles (144 `<|patch|>` each,
  `<|tile_x_separator|>` between two, `<|tile_y_separator|>` after the row), then
  `<|image|>`, the global tile's (or the only tile's) 144 `<|patch|>`, `<|image_end|>`: 144 a
  tile is (336 / patch 14)^2 / 4, the vision model's pixel shuffle at ratio 0.5. Each is a
  special token, so the ids need no tokenizer. The model embeds the image at `<|patch|>`
  (config.json's image_token_index).
- vLLM (mllama4.py): `pixel_values` flat, sized by `patches_per_image` (the tiles, the global
  one included), which is batched on the CPU as a 0-d int64 beside `aspect_ratios` (2,);
  its embeddings only at the `<|patch|>` tokens (select_token_ids), so an image of more than
  one tile has them split by separators, which vLLM 0.33's generate (no is_embed) cannot
  take as one item: it goes as one image item per tile (vllm_image_runs). No
  mm_device_do_normalize.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np

from .base import Encode, Family, ImageSide, NoVideoSide, Side, SideConfig, View
from .sizing import SizeError
from .video import SampledVideo

# Llama4ImageProcessor's class attributes (the published config gives the same). Tiles have
# no patches of their own: patch, merge and temporal sizes of 1 say so to the code that
# reads them.
DEFAULTS = {
    "size": {"height": 336, "width": 336},
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
# The image processor's own keys, with its defaults: the most tiles a canvas has, and whether
# an image is blown up to the largest canvas it fits rather than the least it needs
EXTRA = {"max_patches": 16, "resize_to_max_canvas": False}
# Llama4Processor's: the vision patch and the pixel shuffle (vLLM reads the same numbers
# from config.json's vision_config); 144 tokens a tile of 336
VISION_PATCH = 14
DOWNSAMPLE = 4  # round(1 / pixel_shuffle_ratio ** 2) at the published ratio 0.5


@lru_cache(maxsize=16)
def supported_canvases(max_tiles: int, tile: int) -> tuple[tuple[int, int], ...]:
    """(height, width) of every canvas of 1 to `max_tiles` square tiles, in the order
    transformers' find_supported_resolutions lists them (by aspect, in the order each aspect
    is first met counting the tiles down)."""
    if max_tiles < 1:
        raise SizeError(f"max_patches must be at least 1, got {max_tiles}")
    by_aspect: dict[float, list[tuple[int, int]]] = {}
    for count in range(max_tiles, 0, -1):
        for rows in sorted(_factors(count)):
            by_aspect.setdefault(rows / (count // rows), []).append((rows, count // rows))
    return tuple((rows * tile, columns * tile) for pairs in by_aspect.values() for rows, columns in pairs)


def _factors(number: int) -> set[int]:
    return {
        factor
        for low in range(1, int(number**0.5) + 1)
        if number % low == 0
        for factor in (low, number // low)
    }


def best_fit(height: int, width: int, canvases: Sequence[tuple[int, int]], to_max: bool) -> tuple[int, int]:
    """transformers' get_best_fit: the canvas an image of this size goes into, its scales
    in float32 as torch computes them (an int64 tensor over a Python int)."""
    sizes = np.array(canvases, np.int64)
    scale_h = sizes[:, 0].astype(np.float32) / np.float32(height)
    scale_w = sizes[:, 1].astype(np.float32) / np.float32(width)
    scales = np.where(scale_h > scale_w, scale_w, scale_h)
    up = scales[scales >= 1]
    if len(up):
        chosen = up.max() if to_max else up.min()
    else:
        chosen = scales[scales < 1].max()
    fits = sizes[scales == chosen]
    best = fits[np.argmin(fits[:, 0] * fits[:, 1])]  # the first of the smallest area
    return int(best[0]), int(best[1])


def without_distortion(
    height: int, width: int, target: tuple[int, int], in_float32: tuple[bool, bool]
) -> tuple[int, int]:
    """transformers' get_max_res_without_distortion: the largest size of the image's aspect
    inside `target` (at least 1 a side). A target side that is one of get_best_fit's torch
    values (`in_float32`) makes its scale, and what is computed from it, float32, as torch
    computes them; a Python int's is a double."""
    scales: list[float | np.floating] = [
        np.float32(side) / np.float32(length) if float32 else side / length
        for side, length, float32 in zip(target, (height, width), in_float32, strict=True)
    ]
    scale_h, scale_w = scales
    # torch compares a tensor with a Python float in float32
    narrower = np.float32(scale_w) < np.float32(scale_h) if any(in_float32) else scale_w < scale_h
    if narrower:
        size = (min(math.floor(_times(height, scale_w)), target[0]), target[1])
    else:
        size = (target[0], min(math.floor(_times(width, scale_h)), target[1]))
    return max(size[0], 1), max(size[1], 1)


def _times(length: int, scale: float | np.floating) -> float:
    """length * scale as torch or Python computes it: in float32 for a float32 scale."""
    return float(np.float32(length) * scale) if isinstance(scale, np.float32) else length * scale


def canvas(config: SideConfig, height: int, width: int) -> tuple[int, int]:
    """(h, w): the canvas of whole tiles an image of this size is pasted into."""
    tile_height, tile_width = config.fixed_size
    if tile_height != tile_width:
        raise SizeError(f"llama4 tiles must be square, got size {tile_height}x{tile_width}")
    canvases = supported_canvases(int(config.option("max_patches")), tile_height)
    return best_fit(height, width, canvases, bool(config.option("resize_to_max_canvas")))


def resized(config: SideConfig, height: int, width: int) -> tuple[int, int]:
    """(h, w) the image is resized to inside its canvas: upscaled no further than one tile a
    side unless resize_to_max_canvas (Llama4ImageProcessor's max_upscaling_size)."""
    whole = canvas(config, height, width)
    if config.option("resize_to_max_canvas"):
        return without_distortion(height, width, whole, (True, True))
    # Python's min keeps its first argument unless the canvas' side (a torch value) is smaller
    tile = config.fixed_size[0]
    least = (max(height, tile), max(width, tile))
    target = (min(least[0], whole[0]), min(least[1], whole[1]))
    return without_distortion(height, width, target, (whole[0] < least[0], whole[1] < least[1]))


def tile_grid(config: SideConfig, height: int, width: int) -> tuple[int, int]:
    """(rows, columns) of tiles: transformers' aspect_ratios."""
    whole = canvas(config, height, width)
    return whole[0] // config.fixed_size[0], whole[1] // config.fixed_size[1]


def tokens_per_tile(tile: tuple[int, int]) -> int:
    """Llama4Processor's num_patches_per_chunk: (336 / 14)^2 / 4 = 144."""
    return (tile[0] // VISION_PATCH) * (tile[1] // VISION_PATCH) // DOWNSAMPLE


class Llama4Image(ImageSide):
    """Llama4ImageProcessor, as Llama4Processor calls it."""

    tensor_names = ("pixel_values", "aspect_ratios")
    unused_input_names = ("aspect_ratios",)  # Llama4Processor's
    placeholder = "<|image|>"  # mllama4.py's get_placeholder_str
    pad_key = "fake_image_token_id"  # the template writes <|image|>; the model embeds <|patch|>
    defaults = DEFAULTS | EXTRA
    takes_pixel_aliases = False

    def tile_tokens(self, config: SideConfig, num_frames: int, height: int, width: int) -> int:
        """144 a tile: the canvas', and the global tile's where there is more than one."""
        rows, columns = tile_grid(config, height, width)
        tiles = rows * columns
        return (tiles + 1 if tiles > 1 else 1) * tokens_per_tile(config.fixed_size)

    def tile_tensors(
        self, config: SideConfig, tiles: np.ndarray, height: int, width: int
    ) -> dict[str, np.ndarray]:
        """The canvas' tiles then the global one (N, 3, H, W), and aspect_ratios (1, 2)."""
        grid = np.array([tile_grid(config, height, width)], np.int64)
        return {"pixel_values": tiles, "aspect_ratios": grid}

    def item_tokens(
        self,
        grid: Sequence[int],
        config: SideConfig,
        token_ids: Mapping[str, int],
        video: SampledVideo | None,
        encode: Encode,
    ) -> list[int]:
        """Llama4Processor._prompt_split_image's tokens for an image of rows x columns tiles."""
        rows, columns = grid
        patch = [token_ids["image_token_id"]] * tokens_per_tile(config.fixed_size)
        tokens = [token_ids["boi_token_id"]]
        if rows * columns > 1:
            for _ in range(rows):
                for column in range(columns):
                    tokens += patch
                    if column < columns - 1:
                        tokens.append(token_ids["tile_x_separator_token_id"])
                tokens.append(token_ids["tile_y_separator_token_id"])
        return tokens + [token_ids["fake_image_token_id"], *patch, token_ids["eoi_token_id"]]

    def vllm_batched_fields(self, tensors: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """mllama4.py's patches_per_image: the item's tiles, the global one included (0-d)."""
        return {"patches_per_image": np.array(len(tensors["pixel_values"]), np.int64)}


class Llama4Video(NoVideoSide):
    """No video: Llama 4's processor has none."""

    defaults = DEFAULTS | EXTRA


class Llama4(Family):
    name = "llama4"
    model_types = ("llama4",)
    processor_classes = ("Llama4Processor",)
    image_processor_classes = ("Llama4ImageProcessor",)
    # Llama4Processor's tokens; config.json gives the patch, start and end as *_token_index
    token_names = {
        "image_token_id": "<|patch|>",
        "fake_image_token_id": "<|image|>",
        "boi_token_id": "<|image_start|>",
        "eoi_token_id": "<|image_end|>",
        "tile_x_separator_token_id": "<|tile_x_separator|>",
        "tile_y_separator_token_id": "<|tile_y_separator|>",
    }
    config_aliases = {
        "image_token_id": "image_token_index",
        "boi_token_id": "boi_token_index",
        "eoi_token_id": "eoi_token_index",
    }
    image = Llama4Image()
    video = Llama4Video()
    layout = "tiles"
    extra_keys = frozenset(EXTRA)
    normalizes_in = "bfloat16"
    # transformers 5.24's Llama4ForConditionalGeneration.forward cannot answer: it reads
    # image_outputs off its language model's output, which has none (an AttributeError)
    transformers_engine = False
    max_position_embeddings = 4096 * 32  # Llama4TextConfig's default

    def vllm_image_runs(
        self, side: Side, tensors: Mapping[str, np.ndarray]
    ) -> list[dict[str, np.ndarray]] | None:
        """An image of several tiles as one image of one tile per run of `<|patch|>`, the
        global tile last, as the prompt has them (one tile: the image whole). mllama4.py
        embeds each tile by itself: the patch embedding, the encoder's attention (tiles are
        its batch), the pixel shuffle and the projector are all per tile, so a tile's
        embeddings are the same to the bit whatever tiles share the encoder's batch
        (scripts/llama4_tile_embeddings.py); and vLLM's runner batches a request's items of
        one modality into one encoder call, so the tiles meet the encoder as the whole
        image's pixel_values would."""
        pixels = tensors.get("pixel_values")
        if side is not self.image or pixels is None or len(pixels) == 1:
            return None
        one = np.ones((1, 2), np.int64)  # a canvas of one tile (the model does not read it)
        return [
            {"pixel_values": pixels[tile : tile + 1], "aspect_ratios": one} for tile in range(len(pixels))
        ]

    def image_size(self, config: SideConfig, height: int, width: int) -> tuple[int, int]:
        """The canvas of whole tiles the image is pasted into before it is cut."""
        return canvas(config, height, width)

    def video_size(self, config: SideConfig, num_frames: int, height: int, width: int) -> tuple[int, int]:
        raise SizeError("llama4 models take no video")

    def image_views(self, config: SideConfig, height: int, width: int) -> list[View]:
        """The image resized into its canvas at the top left, cut into tiles; then, where
        that makes more than one, the whole image resized to one tile."""
        whole = canvas(config, height, width)
        views = [View(resized(config, height, width), whole, tile=config.fixed_size)]
        if whole != config.fixed_size:
            views.append(View(config.fixed_size, config.fixed_size))
        return views


FAMILY = Llama4()
