"""A plain numpy reading of the processors' resize tables (processors/.../resize.py), the
oracle the C kernel is held to where torchvision is not installed."""

from __future__ import annotations

import numpy as np

from mmprep.processors.resize import BICUBIC, _taps


def reference_resize(frame: np.ndarray, height: int, width: int, resample: int = BICUBIC) -> np.ndarray:
    """`frame` (H, W, C) uint8 resized as resize.py's docstring says, straight from the
    taps: horizontally (if the width changes), rounded to uint8, then vertically."""
    pixels = frame.astype(np.int64)
    if width != frame.shape[1]:
        pixels = _reference_pass(pixels, width, resample, axis=1)
    if height != frame.shape[0]:
        pixels = _reference_pass(pixels, height, resample, axis=0)
    return pixels.astype(np.uint8)


def _reference_pass(pixels: np.ndarray, size: int, resample: int, axis: int) -> np.ndarray:
    sources, weights, precision = _taps(pixels.shape[axis], size, resample)
    taken = np.take(pixels, sources, axis=axis)  # the tap axis right after `axis`
    shape = [1] * taken.ndim
    shape[axis], shape[axis + 1] = weights.shape
    sums = (taken * weights.reshape(shape)).sum(axis=axis + 1) + (1 << (precision - 1))
    return np.clip(sums >> precision, 0, 255)
