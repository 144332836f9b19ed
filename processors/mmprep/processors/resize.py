"""Bicubic and bilinear resizing equal, byte for byte, to torchvision's antialiased uint8
resize, which is what transformers' processors run (`torch.nn.functional.interpolate(...,
mode="bicubic" or "bilinear", antialias=True)` on a uint8 tensor: PyTorch's
`_upsample_bicubic2d_aa` / `_upsample_bilinear2d_aa`; the Qwen-VL, LLaVA-OneVision, InternVL
and Gemma 4 processors resample bicubic, Gemma 3's bilinear), written straight into the
tensor the processor returns.

PyTorch's uint8 path (`separable_upsample_generic_Nd_kernel_impl`, or its AVX2 twin
`upsample_avx_bilinear_bicubic_uint8`; both give the same bytes) resizes horizontally
first, then vertically, rounding to uint8 in between and skipping a pass whose size does
not change. Each pass has the same taps as Pillow's (bicubic: the Keys kernel with a = -0.5,
its support 2; bilinear: the triangle, its support 1; the support widened by the scale
when shrinking, weights normalized by their sum), but turns the double weights into int16
with a precision chosen per pass from the largest weight
(`_compute_index_ranges_int16_weights`), where Pillow keeps 22 bits: Pillow lands one
level away on about 0.7% of values of noise. torchvision runs bilinear on uint8 natively
only on a CPU with AVX2 (or ARM), else in float32, rounded back: there it may differ by a
level (transformers' machines, and vLLM's, have AVX2).

This module computes those tables in numpy, once per size (cached); the arithmetic is the
C kernel `_resample.c`, built with the package, which also writes each resized row where
the tensor's layout puts it (a `Scatter`: patches, tiles or plain rows), through a table of
each uint8 level's rescaled and normalized value where the tensor is float. So a frame is
resized, reordered and normalized in one pass over it, with no copy between (1280x720 ->
1288x728 into Qwen-VL's patches: benchmarks/resize_speed.py). tests/processors check the
kernel against torchvision itself and against a plain numpy reading of the same tables.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

import numpy as np

from . import _resample

_A = -0.5  # Keys' a, as PyTorch's `HelperInterpCubic::aa_filter` uses with antialias (Pillow's)
BILINEAR, BICUBIC = 2, 3  # PIL's (and transformers' PILImageResampling) numbers for them
RESAMPLES = {BILINEAR: "bilinear", BICUBIC: "bicubic"}  # interpolate's mode of each


def _cubic(x: np.ndarray) -> np.ndarray:
    """PyTorch's `aa_filter` for bicubic (`cubic_convolution1` / `cubic_convolution2`),
    the same operations in the same order so the doubles agree to the last bit."""
    x = np.abs(x)
    near = ((_A + 2) * x - (_A + 3)) * x * x + 1
    far = ((_A * x - 5 * _A) * x + 8 * _A) * x - 4 * _A
    return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))


def _triangle(x: np.ndarray) -> np.ndarray:
    """PyTorch's `aa_filter` for bilinear (`HelperInterpLinear`): 1 - |x| within 1."""
    x = np.abs(x)
    return np.where(x < 1.0, 1.0 - x, 0.0)


# each resample's filter and its interp_size (the taps it spans unscaled)
_FILTERS = {BICUBIC: (_cubic, 4), BILINEAR: (_triangle, 2)}


@functools.lru_cache(maxsize=64)
def _taps(in_size: int, out_size: int, resample: int = BICUBIC) -> tuple[np.ndarray, np.ndarray, int]:
    """(sources, weights, precision) of one pass from `in_size` to `out_size` pixels:
    output pixel i is `(sum_j in[sources[i, j]] * weights[i, j] + 2**(precision - 1))
    >> precision`, clamped to 0..255. Both tables are (out_size, taps); taps whose weight
    is zero everywhere are dropped (they add nothing to the integer sums)."""
    # `_compute_indices_min_size_weights_aa`, in doubles, as PyTorch (and Pillow) computes it
    scale = in_size / out_size  # `area_pixel_compute_scale` (align_corners=False, no scale given)
    kernel, interp_size = _FILTERS[resample]
    half = interp_size / 2
    support = half * scale if scale >= 1.0 else half  # interp_size halved, widened when shrinking
    invscale = 1.0 / scale if scale >= 1.0 else 1.0
    max_taps = math.ceil(support) * 2 + 1
    center = scale * (np.arange(out_size) + 0.5)
    xmin = np.maximum((center - support + 0.5).astype(np.int64), 0)  # C casts truncate
    xsize = np.minimum((center + support + 0.5).astype(np.int64), in_size) - xmin
    xsize = np.clip(xsize, 0, max_taps)
    j = np.arange(max_taps)
    weights = kernel(((xmin[:, None] + j) - center[:, None] + 0.5) * invscale)
    weights[j >= xsize[:, None]] = 0.0
    total = np.zeros(out_size)
    for column in weights.T:  # summed left to right, as the C loop does (numpy's sum pairs them)
        total += column
    weights[total != 0] /= total[total != 0, None]

    # `_compute_index_ranges_int16_weights`: the most bits for which the largest weight,
    # doubled, still fits in int16; weights rounded half away from zero
    wt_max = float(weights.max())
    precision = 0
    while precision < 22 and int(0.5 + wt_max * (1 << (precision + 1))) < (1 << 15):
        precision += 1
    scaled = weights * (1 << precision)
    ints = np.where(scaled < 0, np.trunc(scaled - 0.5), np.trunc(scaled + 0.5)).astype(np.int32)

    # keep the columns from the first to the last nonzero weight of each output pixel
    nonzero = ints != 0
    first = np.where(nonzero.any(axis=1), nonzero.argmax(axis=1), 0)
    last = max_taps - 1 - nonzero[:, ::-1].argmax(axis=1)
    taps = int((last - first).max()) + 1
    columns = first[:, None] + np.arange(taps)
    rows = np.arange(out_size)[:, None]
    inside = columns < max_taps
    kept = np.where(inside, ints[rows, np.minimum(columns, max_taps - 1)], 0).astype(np.int32)
    sources = np.minimum(xmin[:, None] + columns, in_size - 1)  # past the end: weight 0
    sources.flags.writeable = kept.flags.writeable = False  # cached and shared between threads
    return sources, kept, precision


def _frozen(*tables: np.ndarray) -> None:
    for table in tables:
        table.flags.writeable = False  # cached and shared between threads


MIN_RUN = 32  # outputs a run holds on average, at least, for the pass to go run by run


@functools.lru_cache(maxsize=64)
def horizontal_pass(in_width: int, width: int, resample: int = BICUBIC) -> _resample.Horizontal:
    """The kernel's horizontal pass (each channel alike): (width, taps8, precision, starts,
    weights, pairs, runs). Output x reads the window of source pixels from starts[x]: its
    weights, int16, zero-padded to taps8 (a multiple of 8). Where the windows slide by one
    pixel per output over long stretches (`runs`: first output, end; a size that changes
    little), the kernel goes 16 outputs at a time, two taps at a time: `pairs` holds each
    pair of taps' weights for every output, two int16 in an int32. A shrink's windows jump:
    no runs, and each output is summed on its own."""
    sources, weights, precision = _taps(in_width, width, resample)
    taps = sources.shape[1]
    starts = np.ascontiguousarray(sources[:, 0], dtype=np.int32)
    # a window is consecutive pixels wherever it weighs anything (past the end: weight 0)
    assert ((sources == starts[:, None] + np.arange(taps)) | (weights == 0)).all()
    taps8 = -(-taps // 8) * 8
    padded = np.zeros((width, taps8), np.int16)
    padded[:, :taps] = weights
    breaks = np.flatnonzero(np.diff(starts) != 1) + 1
    bounds = [0, *breaks.tolist(), width]
    if len(bounds) - 1 <= width // MIN_RUN:
        runs: np.ndarray | None = np.array(list(itertools.pairwise(bounds)), np.int32).reshape(-1, 2)
        halves = padded.view(np.uint16).astype(np.uint32)
        pairs: np.ndarray | None = np.ascontiguousarray((halves[:, 0::2] | (halves[:, 1::2] << 16)).T).view(
            np.int32
        )
    else:
        runs = pairs = None
    _frozen(*(table for table in (starts, padded, pairs, runs) if table is not None))
    return width, taps8, precision, starts, padded, pairs, runs


@functools.lru_cache(maxsize=64)
def vertical_pass(in_height: int, height: int, resample: int = BICUBIC) -> _resample.Vertical:
    """The kernel's vertical pass: (height, taps, precision, sources, weights), each output
    row the weighted sum of `taps` source rows."""
    sources, weights, precision = _taps(in_height, height, resample)
    row_sources, row_weights = (np.ascontiguousarray(table, dtype=np.int32) for table in (sources, weights))
    _frozen(row_sources, row_weights)
    return height, row_sources.shape[1], precision, row_sources, row_weights


@dataclass(frozen=True)
class Scatter:
    """Where a resized frame's values go in `out` (any shape, C-contiguous): value (row i,
    column x, channel c) to element `rows[i] + columns[x] + places[e]` (of the flattened
    output) for every e with `channel_of[e] == c`, as `table[c, value]` where the output is
    not uint8 (`table`: (channels, 256) of out's dtype, each level rescaled and normalized).
    Several places may take one channel: the copies of an image in its temporal block."""

    out: np.ndarray
    rows: np.ndarray  # int64 (height,)
    columns: np.ndarray  # int64 (width,)
    places: np.ndarray  # int64 (e,)
    channel_of: np.ndarray  # int32 (e,)
    table: np.ndarray | None = None

    @classmethod
    def plain(cls, out: np.ndarray) -> Scatter:
        """Into `out`, uint8 (height, width, channels), pixel by pixel."""
        height, width, channels = out.shape
        return cls(
            out,
            np.arange(height, dtype=np.int64) * width * channels,
            np.arange(width, dtype=np.int64) * channels,
            np.arange(channels, dtype=np.int64),
            np.arange(channels, dtype=np.int32),
        )


def resize_into(
    frame: np.ndarray, scatter: Scatter, height: int, width: int, resample: int = BICUBIC
) -> None:
    """`frame` (H, W, C) uint8 resized to (height, width) as torchvision resizes it, and
    written where `scatter` says (a pass whose size does not change is skipped, as
    PyTorch skips it)."""
    if resample not in RESAMPLES:
        raise ValueError(f"resample={resample!r}: only bilinear (2) and bicubic (3)")
    old_height, old_width, channels = frame.shape
    horizontal = horizontal_pass(old_width, width, resample) if width != old_width else None
    vertical = vertical_pass(old_height, height, resample) if height != old_height else None
    out = scatter.out
    itemsize = out.dtype.itemsize
    if scatter.table is not None and scatter.table.dtype != out.dtype:
        raise ValueError(f"a {scatter.table.dtype} table for a {out.dtype} output")
    if scatter.table is None and out.dtype != np.uint8:
        raise ValueError(f"a {out.dtype} output needs a table of its values")
    _resample.resample(
        np.ascontiguousarray(frame),
        old_height,
        old_width,
        channels,
        horizontal,
        vertical,
        (
            out.reshape(-1).view(np.uint8),
            itemsize,
            scatter.rows,
            scatter.columns,
            scatter.places,
            scatter.channel_of,
            scatter.table,
        ),
    )


def resize_bicubic(frame: np.ndarray, height: int, width: int) -> np.ndarray:
    """`frame` (H, W, 3) uint8 resized to (height, width, 3), exactly as torchvision's
    antialiased bicubic resize of the same pixels; the frame itself if the size already
    matches."""
    return resize(frame, height, width, BICUBIC)


def resize(frame: np.ndarray, height: int, width: int, resample: int = BICUBIC) -> np.ndarray:
    """resize_bicubic, or with `resample` BILINEAR (2) torchvision's antialiased bilinear."""
    if resample not in RESAMPLES:
        raise ValueError(f"resample={resample!r}: only bilinear (2) and bicubic (3)")
    if frame.shape[:2] == (height, width):
        return frame
    out = np.empty((height, width, frame.shape[2]), np.uint8)
    resize_into(frame, Scatter.plain(out), height, width, resample)
    return out
