"""The "tiles" layout (mmprep.families: Family.layout): frames and image tiles kept whole,
(3, H, W) each, one after another, as transformers' tiling processors return them
(LLaVA-OneVision's `pixel_values` (1, tiles, 3, H, W), InternVL's (tiles, 3, H, W): the
family's image or video side's `tile_tensors` says which, and what goes beside them); the Qwen-VL families'
temporal-patch rows are patches.py's.

An image is cut from its family's views (`Family.image_views`): each view (the whole
image, or a crop of it) resized (resize.py: torchvision's antialiased bicubic, or bilinear
where the side's resample says), pasted into zeros (transformers pads the
uint8 pixels before it rescales them) and cut into tiles row by row. Every tile is then
rescaled and normalized as the patches are (patches.Normalizer), to the same bits. A video's
frames are one tile each, resized to the family's video_size."""

from __future__ import annotations

import numpy as np

import mmprep.families as families

from .config import ProcessorConfig
from .patches import Normalizer, ProcessedMedia
from .resize import resize

CHANNELS_FIRST = (1, 3, 1, 1)  # the channel axis of a (tiles, 3, H, W) run


def image_tiles(image: np.ndarray, views: list[families.View], resample: int = 3) -> list[np.ndarray]:
    """uint8 (3, h, w) tiles of `image` (H, W, 3), view by view (resized with `resample`:
    resize.BICUBIC or BILINEAR)."""
    tiles = []
    for view in views:
        source = image
        if view.crop is not None:
            top, left, height, width = view.crop
            source = image[top : top + height, left : left + width]
        resized = resize(source, *view.size, resample)
        canvas = resized
        if view.canvas != view.size:
            canvas = np.zeros((*view.canvas, 3), np.uint8)
            top, left = view.offset
            canvas[top : top + view.size[0], left : left + view.size[1]] = resized
        side_h, side_w = view.tile if view.tile != (0, 0) else view.canvas
        for row in range(0, view.canvas[0], side_h):
            for column in range(0, view.canvas[1], side_w):
                tiles.append(canvas[row : row + side_h, column : column + side_w].transpose(2, 0, 1))
    return tiles


def process_image(config: ProcessorConfig, image: np.ndarray, num_tokens: int) -> ProcessedMedia:
    """`image` uint8 (H, W, 3): its tiles under transformers' names (Side.tile_tensors)."""
    rules = families.get(config.family)
    height, width = image.shape[:2]
    tiles = np.stack(image_tiles(image, rules.image_views(config, height, width), config.resample))
    normalize = Normalizer(config, CHANNELS_FIRST)
    pixels = np.empty(tiles.shape, normalize.dtype)
    normalize(tiles, pixels)
    return ProcessedMedia(
        tensors=rules.image.tile_tensors(config, pixels, height, width), num_tokens=num_tokens
    )


class TileWriter:
    """A clip's output in the tiles layout: frame `index` resized to the family's size, one
    (3, H, W) slot each (PatchWriter's interface, so the streaming video path takes either).
    Threads may fill different slots at once. `side`: the family's side whose tensors these
    are (its tile_tensors)."""

    temporal = 1  # no temporal blocks: a frame is written once

    def __init__(
        self,
        config: ProcessorConfig,
        side: families.Side,
        num_frames: int,
        height: int,
        width: int,
        num_tokens: int,
    ):
        self.grid_t = num_frames
        self._config = config
        self._side = side
        self._normalize = Normalizer(config, CHANNELS_FIRST)
        self._num_tokens = num_tokens
        self.output = np.empty((num_frames, 3, height, width), self._normalize.dtype)

    def write(self, frame: np.ndarray, index: int, copies: int = 1) -> None:
        """Frame `index` (and the `copies - 1` after it, the same pixels), as PatchWriter.write."""
        self._normalize(frame.transpose(2, 0, 1)[None], self.output[index : index + 1])
        self.output[index + 1 : index + copies] = self.output[index]

    def processed(self) -> ProcessedMedia:
        """The frames under the family's names (Side.tile_tensors; the keys are its own)."""
        height, width = self.output.shape[2:]
        tensors = self._side.tile_tensors(self._config, self.output, height, width)
        return ProcessedMedia(tensors=tensors, num_tokens=self._num_tokens)
