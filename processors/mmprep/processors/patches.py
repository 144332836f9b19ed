"""`PatchWriter`: resized uint8 frames rescaled, normalized and written straight into the
one preallocated output, in the order transformers' `patchify` leaves them.

Output rows are patches ordered (temporal block, merge-block row, merge-block column, row
within the merge block, column within it); each row holds (channel, frame within the
temporal block, pixel row, pixel column). Frames are written one at a time, so working
memory is one frame's patch-ordered copy, not a float copy of the whole clip.
`ProcessedMedia` is the finished output, as the processors return it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

import mmprep.families as families

from .config import ProcessorConfig


@dataclass(frozen=True)
class ProcessedMedia:
    """`tensors`: named, shaped, ordered and typed as transformers returns them
    (`pixel_values_videos` + `video_grid_thw`, or `pixel_values` + `image_grid_thw`).
    `num_tokens`: the placeholder tokens the language model sees for this item."""

    tensors: dict[str, np.ndarray]
    num_tokens: int


class Normalizer:
    """uint8 pixels to what transformers' fused rescale-and-normalize makes of them,
    in the same float32 operations, so the values are the same to the bit."""

    # the channel axis of a row of merge blocks in patch order; tiles.py's runs pass theirs
    PATCH_ORDER = (1, 1, 1, 3, 1, 1)

    def __init__(self, config: ProcessorConfig, shape: tuple[int, ...] = PATCH_ORDER):
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

    @property
    def keeps_pixels(self) -> bool:
        """Whether the output is the uint8 pixels themselves (rescale and normalize off)."""
        return not self._steps

    def __call__(self, pixels: np.ndarray, out: np.ndarray) -> None:
        if not self._steps:
            np.copyto(out, pixels)
            return
        (first, operand), *rest = self._steps
        first(pixels, operand, out=out)
        if self._rounds:
            round_to_bfloat16(out)
        for step, operand in rest:
            step(out, operand, out=out)
            if self._rounds:
                round_to_bfloat16(out)


def round_to_bfloat16(values: np.ndarray) -> None:
    """float32 `values` rounded, in place, to the nearest bfloat16 (ties to even), as torch
    casts: the top 16 bits of each kept, so each is still a float32 of the same value."""
    bits = values.view(np.uint32)
    # every operand uint32: numpy 1.x would widen a 0-d array's shift by a Python int to int64
    bits += np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    bits &= np.uint32(0xFFFF0000)


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
    out = np.empty(patches.shape, np.float32)
    channels = patches.reshape(len(patches), 1, 1, 3, -1, 1)  # a row is (channel, frame, row, column)
    Normalizer(config)(channels, out.reshape(channels.shape))
    return out


class PatchWriter:
    """The output of one video or image: `grid_t * grid_h * grid_w` patches of
    `3 * temporal * patch * patch` values, filled frame by frame (threads may fill
    different frames at once: each writes only its own columns). `side`: the family's side
    whose tensors these are (its tensor_names)."""

    def __init__(self, config: ProcessorConfig, side: families.Side, grid_t: int, height: int, width: int):
        self._names = side.tensor_names
        self.patch, self.merge, self.temporal = (
            config.patch_size,
            config.merge_size,
            config.temporal_patch_size,
        )
        self.grid_t, self.grid_h, self.grid_w = grid_t, height // self.patch, width // self.patch
        self._normalize = Normalizer(config)
        patch_dim = 3 * self.temporal * self.patch * self.patch
        self.output = np.empty((grid_t * self.grid_h * self.grid_w, patch_dim), self._normalize.dtype)

    def write(self, frame: np.ndarray, index: int, copies: int = 1) -> None:
        """Frame number `index` of the (padded) clip, resized to the grid: (H, W, 3) uint8;
        also frames `index + 1` to `index + copies - 1`, the same pixels (an image's temporal
        block, a clip's padding), which must be in the same temporal block."""
        block, slot = divmod(index, self.temporal)
        if copies < 1 or slot + copies > self.temporal:
            raise ValueError(
                f"{copies} copies from frame {index} leave its temporal block of {self.temporal}"
            )
        rows = self.grid_h * self.grid_w
        m, p = self.merge, self.patch
        blocks_h, blocks_w = self.grid_h // m, self.grid_w // m
        target = self.output[block * rows : (block + 1) * rows].reshape(
            blocks_h, blocks_w, m, m, 3, self.temporal, p, p
        )
        source = frame.reshape(blocks_h, m, p, blocks_w, m, p, 3)
        if self._normalize.keeps_pixels:
            # No float work to keep in the cache: the whole frame reordered in one numpy
            # copy, twice as fast as row by row.
            target[..., slot, :, :] = source.transpose(0, 3, 1, 4, 6, 2, 5)
        else:
            # One row of merge blocks at a time: the reorder is done on uint8 (a quarter of
            # the bytes) into a small contiguous buffer, so the float arithmetic reads
            # contiguous, cache-resident memory and the frame is never copied whole.
            for row in range(blocks_h):
                pixels = np.ascontiguousarray(source[row].transpose(2, 0, 3, 5, 1, 4))
                self._normalize(pixels, target[row, :, :, :, :, slot])
        for copy in range(slot + 1, slot + copies):  # copied, not reordered and normalized again
            target[..., copy, :, :] = target[..., slot, :, :]

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
