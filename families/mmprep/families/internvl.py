"""InternVL 3 and 3.5 in their Hugging Face form (config.json model_type `internvl`,
InternVLForConditionalGeneration; transformers' InternVLProcessor over GotOcr2ImageProcessor
and InternVLVideoProcessor; vLLM's interns1.py, which serves that architecture).

- Images are cut into tiles (the processor's crop_to_patches, which InternVLProcessor always
  turns on): of the grids of min_patches to max_patches tiles of `size`, the one whose aspect
  is nearest the image's (transformers' get_optimal_tiled_canvas, its tie rule included); the
  image is resized to that grid and cut row by row, and when that makes more than one tile the
  whole image resized to one tile follows (the thumbnail). Tiles: (N, 3, H, W), float32.
- Videos: each frame resized to one tile (InternVLVideoProcessor; vLLM gives it the image
  processor's size). The frames come sampled: `initial_shift` is sampling, not read here.
- The prompt: an image is `<img>`, `<IMG_CONTEXT>` x image_seq_length per tile, `</img>`; a
  video, per frame, `Frame{i}: <img>`, `<IMG_CONTEXT>` x image_seq_length, `</img>`, frames
  joined by a line break (InternVLProcessor's replace_image_token / replace_video_token). The
  labels are tokenized on their own; transformers tokenizes the first with the text before it,
  which gave the same ids wherever tried (a word glued to the video included:
  tests/render/test_render_live.py) but need not for every text.
- vLLM (interns1.py): an item's tiles under `pixel_values` / `pixel_values_videos`, their
  count `image_num_patches` / `video_num_patches`, and the context token's id shared by the
  items (`image_token_id`, `video_token_id`). vLLM writes `<video>` where transformers writes
  `<IMG_CONTEXT>` in a video's frames (its own prompt update); mmprep writes transformers'.
  Pixels normalized on the CPU: interns1.py does not support mm_device_do_normalize. On
  vLLM 0.33's generate endpoint (no is_embed) a video goes as one one-tile image item per
  frame (vllm_image_runs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np

from .base import Encode, Family, ImageSide, Side, SideConfig, VideoSide, View
from .video import SampledVideo

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
OPENAI_CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_CLIP_STD = (0.26862954, 0.26130258, 0.27577711)

# The class attributes of GotOcr2ImageProcessor and InternVLVideoProcessor (the published
# configs set size 448 and ImageNet's mean and std). Tiles have no patches of their own:
# patch, merge and temporal sizes of 1 say so to the code that reads them.
DEFAULTS = {
    "size": {"height": 384, "width": 384},
    "image_mean": OPENAI_CLIP_MEAN,
    "image_std": OPENAI_CLIP_STD,
    "rescale_factor": 1 / 255,
    "do_resize": True,
    "do_rescale": True,
    "do_normalize": True,
    "resample": 3,
    "patch_size": 1,
    "merge_size": 1,
    "temporal_patch_size": 1,
}
# The family's extra keys, with the classes' defaults. image_seq_length is InternVLProcessor's
# (tokens per tile), crop_to_patches the image processor's, which the processor turns on
# whatever the config says (its images_kwargs default), so it is accepted and not read;
# initial_shift is the video processor's sampling, not read here. The video side reads its
# config from preprocessor_config.json where there is no video config, so both sides take
# every key.
EXTRA = {
    "min_patches": 1,
    "max_patches": 12,
    "crop_to_patches": False,
    "image_seq_length": 256,
    "initial_shift": True,
}


class InternVLSide(Side):
    """What InternVL's two sides share: the classes' defaults and extra keys, no
    min_pixels / max_pixels, the context token's id shared by vLLM's items."""

    takes_pixel_aliases = False  # neither class has min_pixels / max_pixels

    def tile_tensors(
        self, config: SideConfig, tiles: np.ndarray, height: int, width: int
    ) -> dict[str, np.ndarray]:
        """The item's tiles (N, 3, H, W) and, as vLLM's `*_num_patches`, their count."""
        pixels_key, count_key = self.tensor_names
        assert count_key is not None
        return {pixels_key: tiles, count_key: np.array([len(tiles)], np.int64)}

    def vllm_shared_fields(self, token_ids: Mapping[str, int]) -> dict[str, int]:
        """interns1.py's image_token_id / video_token_id: the id vLLM finds the item's
        embeddings at. vLLM's video prompt writes `<video>` there, so that is its video id."""
        return {self.token_key: token_ids[self.token_key]}


class InternVLImage(InternVLSide, ImageSide):
    """GotOcr2ImageProcessor, cropping to tiles as InternVLProcessor has it."""

    # vLLM's names: transformers' processor returns every tile, images' and videos' frames in
    # prompt order, as one `pixel_values`, and the counts only in the prompt
    tensor_names = ("pixel_values", "image_num_patches")
    placeholder = "<IMG_CONTEXT>"  # get_placeholder_str
    defaults = DEFAULTS | EXTRA

    def tile_tokens(self, config: SideConfig, num_frames: int, height: int, width: int) -> int:
        """image_seq_length a tile: the canvas's, and the thumbnail where there is more than one."""
        seq_length: int = config.option("image_seq_length")
        tiles = tile_count(canvas(config, height, width), config.fixed_size)
        return (tiles + 1 if tiles > 1 else 1) * seq_length

    def item_tokens(
        self,
        grid: Sequence[int],
        config: SideConfig,
        token_ids: Mapping[str, int],
        video: SampledVideo | None,
        encode: Encode,
    ) -> list[int]:
        (tiles,) = grid
        start, end = token_ids["start_image_token_id"], token_ids["end_image_token_id"]
        return [start] + [token_ids["image_token_id"]] * (config.option("image_seq_length") * tiles) + [end]


class InternVLVideo(InternVLSide, VideoSide):
    """InternVLVideoProcessor: each frame one tile."""

    tensor_names = ("pixel_values_videos", "video_num_patches")
    placeholder = "<video>"  # get_placeholder_str
    defaults = DEFAULTS | EXTRA | {"max_video_tokens": 1}  # never read

    def tile_tokens(self, config: SideConfig, num_frames: int, height: int, width: int) -> int:
        """image_seq_length a frame: each is one tile."""
        seq_length: int = config.option("image_seq_length")
        return num_frames * seq_length

    def item_tokens(
        self,
        grid: Sequence[int],
        config: SideConfig,
        token_ids: Mapping[str, int],
        video: SampledVideo | None,
        encode: Encode,
    ) -> list[int]:
        (tiles,) = grid
        if video is not None and len(video.indices) != tiles:
            raise ValueError(f"{len(video.indices)} frames for {tiles} tiles")
        start, end = token_ids["start_image_token_id"], token_ids["end_image_token_id"]
        frame = [start] + [token_ids["image_token_id"]] * config.option("image_seq_length") + [end]
        tokens: list[int] = []
        for index in range(tiles):
            # between two special tokens (or after the turn's line break) text is tokenized on its own
            tokens += _encode(encode, f"{chr(10) if index else ''}Frame{index + 1}: ")
            tokens += frame
        return tokens


class InternVL(Family):
    name = "internvl"
    model_types = ("internvl",)
    processor_classes = ("InternVLProcessor",)
    video_processor_classes = ("InternVLVideoProcessor",)
    image_processor_classes = ("GotOcr2ImageProcessor",)
    token_names = {
        "image_token_id": "<IMG_CONTEXT>",
        "video_token_id": "<video>",
        "start_image_token_id": "<img>",
        "end_image_token_id": "</img>",
    }
    image = InternVLImage()
    video = InternVLVideo()
    max_position_embeddings = 32768  # Qwen2Config's, InternVLConfig's default text config
    layout = "tiles"
    extra_keys = frozenset(EXTRA)
    # its model takes every tile, images' and videos' frames, as one pixel_values in prompt
    # order: not what the transformers engine hands a model
    transformers_engine = False

    def vllm_image_runs(
        self, side: Side, tensors: Mapping[str, np.ndarray]
    ) -> list[dict[str, np.ndarray]] | None:
        """A video as one image per frame: the frame's tile as a one-tile image's
        pixel_values, image_num_patches 1. interns1.py runs images' and videos' tiles through
        the same tower (extract_feature) and the text model has 1-D positions, so the engine
        computes what it computes for the video item; the `Frame{i}: <img>` text between is
        plain prompt tokens."""
        if side is not self.video:
            return None
        tiles = tensors[self.video.tensor_names[0]]
        pixels_key, count_key = self.image.tensor_names
        assert count_key is not None
        return [
            {pixels_key: tiles[frame : frame + 1], count_key: np.array([1], np.int64)}
            for frame in range(len(tiles))
        ]

    def image_size(self, config: SideConfig, height: int, width: int) -> tuple[int, int]:
        """The canvas of whole tiles the image is resized to before it is cut."""
        return canvas(config, height, width)

    def video_size(self, config: SideConfig, num_frames: int, height: int, width: int) -> tuple[int, int]:
        return config.fixed_size

    def image_views(self, config: SideConfig, height: int, width: int) -> list[View]:
        """The canvas cut into tiles, then the thumbnail where that makes more than one."""
        whole = canvas(config, height, width)
        views = [View(whole, whole, tile=config.fixed_size)]
        if tile_count(whole, config.fixed_size) > 1:
            views.append(View(config.fixed_size, config.fixed_size))
        return views


def canvas(config: SideConfig, height: int, width: int) -> tuple[int, int]:
    """(h, w): the canvas of whole tiles an image of this size is resized to before it is cut."""
    tile_height, tile_width = config.fixed_size
    columns, rows = tiled_canvas(
        height, width, tile_height, tile_width, config.option("min_patches"), config.option("max_patches")
    )
    return rows * tile_height, columns * tile_width


def tile_count(canvas: tuple[int, int], tile: tuple[int, int]) -> int:
    return (canvas[0] // tile[0]) * (canvas[1] // tile[1])


def supported_grids(min_tiles: int, max_tiles: int) -> list[tuple[int, int]]:
    """(columns, rows) of min_tiles to max_tiles tiles, fewest tiles first, in the order
    transformers' get_all_supported_aspect_ratios lists them (a stable sort)."""
    grids = [
        (columns, rows)
        for columns in range(1, max_tiles + 1)
        for rows in range(1, max_tiles + 1)
        if min_tiles <= columns * rows <= max_tiles
    ]
    return sorted(grids, key=lambda grid: grid[0] * grid[1])


def tiled_canvas(
    height: int, width: int, tile_height: int, tile_width: int, min_tiles: int, max_tiles: int
) -> tuple[int, int]:
    """(columns, rows): transformers' get_optimal_tiled_canvas. The grid whose aspect is
    nearest the image's; on a tie the later (more tiles) while the image's area exceeds half
    of the grid's."""
    aspect, area = width / height, width * height
    best_difference, best = float("inf"), (1, 1)
    for grid in supported_grids(min_tiles, max_tiles):
        difference = abs(aspect - grid[0] / grid[1])
        if difference < best_difference:
            best_difference, best = difference, grid
        elif difference == best_difference and area > 0.5 * tile_height * tile_width * grid[0] * grid[1]:
            best = grid
    return best


@lru_cache(maxsize=4096)
def _encode(encode: Encode, text: str) -> tuple[int, ...]:
    return tuple(encode(text))


FAMILY = InternVL()
