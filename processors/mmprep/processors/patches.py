"""`PatchWriter`: frames resized, rescaled, normalized and written straight into the one
preallocated output, in the order transformers' `patchify` leaves them.

Output rows are patches ordered (temporal block, merge-block row, merge-block column, row
within the merge block, column within it); each row holds (channel, frame within the
temporal block, pixel row, pixel column). Each frame goes in one pass of resize.py's
kernel: resized, and each value written where that order puts it, as its rescaled and
normalized float in the processor's dtype (`Normalizer`'s table of the 256 levels) or as the
uint8 level itself. `ProcessedMedia` is the finished output, as the processors return it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

import mmprep.families as families

from .config import ProcessorConfig
from .dtypes import cast, round_to_bfloat16
from .resize import Scatter, resize_into


@dataclass(frozen=True)
class ProcessedMedia:
    """`tensors`: named, shaped, ordered and typed as transformers returns them
    (`pixel_values_videos` + `video_grid_thw`, or `pixel_values` + `image_grid_thw`), the
    floating ones in the processor's dtype (Processor.in_dtype: as `BatchFeature.to(dtype)`
    leaves them). `num_tokens`: the placeholder tokens the language model sees for this item."""

    tensors: dict[str, np.ndarray]
    num_tokens: int


class Normalizer:
    """uint8 pixels to what transformers' fused rescale-and-normalize makes of them, in the
    same float32 operations, so the values are the same to the bit; then cast to `dtype`
    (float32, float16 or bfloat16) as torch casts them. A pixel's value depends only on its
    level and channel, so the operations (and the cast) run once, on the 256 levels of each
    channel (`table`), and the kernel looks each pixel up: a 16-bit output costs nothing
    more than a float32 one."""

    def __init__(self, config: ProcessorConfig, dtype: str = "float32"):
        shape = (3, 1)  # a (channel, level) table
        mean = np.array(config.image_mean, np.float32).reshape(shape)
        std = np.array(config.image_std, np.float32).reshape(shape)
        self.dtype: np.dtype[Any] = np.dtype(np.float32)
        self._rounds = False  # each step's result rounded to bfloat16 (kept as float32)
        # (ufunc, operand): applied in turn, the first from the pixels, the rest in place
        self._steps: list[tuple[np.ufunc, np.ndarray | np.float32]]
        in_bfloat16 = families.get(config.family).normalizes_in == "bfloat16"
        if config.do_rescale and config.do_normalize and in_bfloat16:
            # Llama 4's: each step rounded to bfloat16, in its order (no folding)
            self._steps = [
                (np.multiply, np.float32(config.rescale_factor)),
                (np.subtract, to_bfloat16(mean)),
                (np.divide, to_bfloat16(std)),
            ]
            self._rounds = True
        elif config.do_rescale and config.do_normalize:
            # transformers folds the rescale into mean and std: (x - mean/f) / (std/f)
            inverse = np.float32(1.0 / config.rescale_factor)
            self._steps = [(np.subtract, mean * inverse), (np.divide, std * inverse)]
        elif config.do_normalize:
            self._steps = [(np.subtract, mean), (np.divide, std)]
        elif config.do_rescale:
            self._steps = [(np.multiply, np.float32(config.rescale_factor))]
        else:
            self._steps = []
            self.dtype = np.dtype(np.uint8)  # transformers leaves the pixels as they are
        self.table: np.ndarray | None = None
        if self._steps:
            self.table = cast(self._levels(), dtype)
            self.table.flags.writeable = False
            self.dtype = self.table.dtype  # BFLOAT16 for bfloat16 (dtypes.py)

    @property
    def keeps_pixels(self) -> bool:
        """Whether the output is the uint8 pixels themselves (rescale and normalize off)."""
        return not self._steps

    def _levels(self) -> np.ndarray:
        """(3, 256) float32: each channel's value of each uint8 level."""
        levels = np.broadcast_to(np.arange(256, dtype=np.uint8), (3, 256))
        out = np.empty((3, 256), np.float32)
        (first, operand), *rest = self._steps
        first(levels, operand, out=out)
        if self._rounds:
            round_to_bfloat16(out)
        for step, operand in rest:
            step(out, operand, out=out)
            if self._rounds:
                round_to_bfloat16(out)
        return out


def to_bfloat16(values: np.ndarray) -> np.ndarray:
    """A float32 copy of `values` rounded to bfloat16 (torch.as_tensor(mean, dtype=bfloat16))."""
    copy = np.array(values, np.float32)
    round_to_bfloat16(copy)
    return copy


def normalized_patches(patches: np.ndarray, config: ProcessorConfig) -> np.ndarray:
    """uint8 patches (the form `config` with rescale and normalize off makes) rescaled and
    normalized as `config` does it: the same float32 values, to the bit, as the patches
    `config` itself makes of the same pixels (what a model that normalizes on the device
    computes first)."""
    table = Normalizer(config).table
    if table is None:
        return patches.copy()
    channels = patches.reshape(len(patches), 3, -1)  # a row is (channel, frame, row, column)
    normalized: np.ndarray = table[np.arange(3)[None, :, None], channels]
    return normalized.reshape(patches.shape)


class PatchWriter:
    """The output of one video or image: `grid_t * grid_h * grid_w` patches of
    `3 * temporal * patch * patch` values, filled frame by frame (threads may fill
    different frames at once: each writes only its own columns). Frames come at any size
    and are resized to (height, width) with the config's resample. `side`: the family's
    side whose tensors these are (its tensor_names); `dtype`: the floats' (Normalizer)."""

    def __init__(
        self,
        config: ProcessorConfig,
        side: families.Side,
        grid_t: int,
        height: int,
        width: int,
        dtype: str = "float32",
    ):
        self._names = side.tensor_names
        self.patch, self.merge, self.temporal = (
            config.patch_size,
            config.merge_size,
            config.temporal_patch_size,
        )
        self.height, self.width, self._resample = height, width, config.resample
        self.grid_t, self.grid_h, self.grid_w = grid_t, height // self.patch, width // self.patch
        self._normalize = Normalizer(config, dtype)
        patch_dim = 3 * self.temporal * self.patch * self.patch
        self.output = np.empty((grid_t * self.grid_h * self.grid_w, patch_dim), self._normalize.dtype)
        # Where pixel (row i, column x) of a frame goes in its temporal block, less its
        # channel's and frame's place: (merge-block row, merge-block column, row and column
        # within the merge block, row and column within the patch)
        p, m, blocks_w = self.patch, self.merge, self.grid_w // self.merge
        i, x = np.arange(height, dtype=np.int64), np.arange(width, dtype=np.int64)
        self._rows = ((i // (m * p)) * blocks_w * m * m + (i // p) % m * m) * patch_dim + i % p * p
        self._columns = ((x // (m * p)) * m * m + (x // p) % m) * patch_dim + x % p

    def write(self, frame: np.ndarray, index: int, copies: int = 1) -> None:
        """Frame number `index` of the (padded) clip, (H, W, 3) uint8 at any size; also
        frames `index + 1` to `index + copies - 1`, the same pixels (an image's temporal
        block, a clip's padding), which must be in the same temporal block."""
        block, slot = divmod(index, self.temporal)
        if copies < 1 or slot + copies > self.temporal:
            raise ValueError(
                f"{copies} copies from frame {index} leave its temporal block of {self.temporal}"
            )
        area = self.patch * self.patch
        block_start = block * self.grid_h * self.grid_w * self.output.shape[1]
        # each channel's place in the patch row, for each copy of the frame
        places = [
            block_start + (channel * self.temporal + copy) * area
            for channel in range(3)
            for copy in range(slot, slot + copies)
        ]
        scatter = Scatter(
            self.output,
            self._rows,
            self._columns,
            np.array(places, np.int64),
            np.repeat(np.arange(3, dtype=np.int32), copies),
            self._normalize.table,
        )
        resize_into(frame, scatter, self.height, self.width, self._resample)

    def processed(self) -> ProcessedMedia:
        """The output, under transformers' names for it, with its grid and token count."""
        pixels_key, grid_key = self._names
        grid = (self.grid_t, self.grid_h, self.grid_w)
        if grid_key is None:
            raise ValueError("the patches layout names its grid")
        return ProcessedMedia(
            tensors={pixels_key: self.output, grid_key: np.array([grid], dtype=np.int64)},
            num_tokens=self.grid_t * self.grid_h * self.grid_w // (self.merge * self.merge),
        )
