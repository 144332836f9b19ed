"""The "tiles" layout (mmprep.families: Family.layout): frames and image tiles kept whole,
(3, H, W) each, one after another, as transformers' tiling processors return them
(LLaVA-OneVision's `pixel_values` (1, tiles, 3, H, W), InternVL's (tiles, 3, H, W): the
family's image or video side's `tile_tensors` says which, and what goes beside them); the Qwen-VL families'
temporal-patch rows are patches.py's.

An image is cut from its family's views (`Family.image_views`): each view (the whole
image, or a crop of it) resized (resize.py: torchvision's antialiased bicubic, or bilinear
where the side's resample says), pasted into zeros (transformers pads the
uint8 pixels before it rescales them) and cut into tiles row by row. Every tile is then
rescaled and normalized as the patches are (patches.Normalizer), to the same bits, in the
processor's dtype. A video's
frames are one tile each, resized to the family's video_size. Each view or frame goes
through resize.py's kernel in one pass, written straight into its tiles.
"""

from __future__ import annotations

import numpy as np

import mmprep.families as families

from .config import ProcessorConfig
from .patches import Normalizer, ProcessedMedia
from .resize import Scatter, resize_into


def _tile_side(view: families.View) -> tuple[int, int]:
    return view.tile if view.tile != (0, 0) else view.canvas


def _view_tiles(view: families.View) -> int:
    side_h, side_w = _tile_side(view)
    return (view.canvas[0] // side_h) * (view.canvas[1] // side_w)


def write_view(
    image: np.ndarray, view: families.View, out: np.ndarray, first: int, normalize: Normalizer, resample: int
) -> None:
    """`view` of `image` (H, W, 3) resized, pasted and cut into `out`'s tiles `first`
    onwards ((tiles, 3, h, w) of the normalizer's dtype), the canvas's padding the value
    of a zero pixel."""
    side_h, side_w = _tile_side(view)
    tiles = out[first : first + _view_tiles(view)]
    zero = normalize.table[:, 0] if normalize.table is not None else np.zeros(3, np.uint8)
    if view.size != view.canvas:  # padding: every tile starts as zeros, then the view over them
        tiles[...] = zero.astype(out.dtype)[None, :, None, None]
    source = image
    if view.crop is not None:
        top, left, height, width = view.crop
        source = image[top : top + height, left : left + width]
    across = view.canvas[1] // side_w
    tile_size = 3 * side_h * side_w
    i = np.arange(view.size[0], dtype=np.int64) + view.offset[0]
    x = np.arange(view.size[1], dtype=np.int64) + view.offset[1]
    rows = (first + i // side_h * across) * tile_size + i % side_h * side_w
    columns = x // side_w * tile_size + x % side_w
    places = np.arange(3, dtype=np.int64) * side_h * side_w
    scatter = Scatter(out, rows, columns, places, np.arange(3, dtype=np.int32), normalize.table)
    resize_into(source, scatter, *view.size, resample)


def process_image(
    config: ProcessorConfig, image: np.ndarray, num_tokens: int, dtype: str = "float32"
) -> ProcessedMedia:
    """`image` uint8 (H, W, 3): its tiles under transformers' names (Side.tile_tensors), the
    floats in `dtype`."""
    rules = families.get(config.family)
    height, width = image.shape[:2]
    views = rules.image_views(config, height, width)
    side_h, side_w = _tile_side(views[0])
    if any(_tile_side(view) != (side_h, side_w) for view in views):
        raise ValueError("the views of an image are cut into tiles of one size")
    normalize = Normalizer(config, dtype)
    pixels = np.empty((sum(_view_tiles(view) for view in views), 3, side_h, side_w), normalize.dtype)
    first = 0
    for view in views:
        write_view(image, view, pixels, first, normalize, config.resample)
        first += _view_tiles(view)
    return ProcessedMedia(
        tensors=rules.image.tile_tensors(config, pixels, height, width), num_tokens=num_tokens
    )


class TileWriter:
    """A clip's output in the tiles layout: frame `index` resized to the family's size, one
    (3, H, W) slot each (PatchWriter's interface, so the streaming video path takes either).
    Threads may fill different slots at once. `side`: the family's side whose tensors these
    are (its tile_tensors); `dtype`: the floats' (Normalizer)."""

    temporal = 1  # no temporal blocks: a frame is written once

    def __init__(
        self,
        config: ProcessorConfig,
        side: families.Side,
        num_frames: int,
        height: int,
        width: int,
        num_tokens: int,
        dtype: str = "float32",
    ):
        self.grid_t = num_frames
        self._config = config
        self._side = side
        self._normalize = Normalizer(config, dtype)
        self._num_tokens = num_tokens
        self.output = np.empty((num_frames, 3, height, width), self._normalize.dtype)
        self._rows = np.arange(height, dtype=np.int64) * width
        self._columns = np.arange(width, dtype=np.int64)

    def write(self, frame: np.ndarray, index: int, copies: int = 1) -> None:
        """Frame `index` (and the `copies - 1` after it, the same pixels) at any size, as
        PatchWriter.write."""
        height, width = self.output.shape[2:]
        area = height * width
        places = [
            (slot * 3 + channel) * area for channel in range(3) for slot in range(index, index + copies)
        ]
        scatter = Scatter(
            self.output,
            self._rows,
            self._columns,
            np.array(places, np.int64),
            np.repeat(np.arange(3, dtype=np.int32), copies),
            self._normalize.table,
        )
        resize_into(frame, scatter, height, width, self._config.resample)

    def processed(self) -> ProcessedMedia:
        """The frames under the family's names (Side.tile_tensors; the keys are its own)."""
        height, width = self.output.shape[2:]
        tensors = self._side.tile_tensors(self._config, self.output, height, width)
        return ProcessedMedia(tensors=tensors, num_tokens=self._num_tokens)
