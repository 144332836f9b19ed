"""Bicubic and bilinear resizing equal, byte for byte, to torchvision's antialiased uint8
resize, which is what transformers' processors run (`torch.nn.functional.interpolate(...,
mode="bicubic" or "bilinear", antialias=True)` on a uint8 tensor: PyTorch's
`_upsample_bicubic2d_aa` / `_upsample_bilinear2d_aa`; the Qwen-VL, LLaVA-OneVision, InternVL
and Gemma 4 processors resample bicubic, Gemma 3's bilinear).

PyTorch's uint8 path (`separable_upsample_generic_Nd_kernel_impl`, or its AVX2 twin
`upsample_avx_bilinear_bicubic_uint8`; both give the same bytes) resizes horizontally
first, then vertically, rounding to uint8 in between and skipping a pass whose size does
not change. Each pass has the same taps as Pillow's (bicubic: the Keys kernel with a = -0.5,
its support 2; bilinear: the triangle, its support 1; the support widened by the scale
when shrinking, weights normalized by their sum), but turns the double weights into int16
with a precision chosen per pass from the largest weight
(`_compute_index_ranges_int16_weights`), where Pillow keeps 22 bits: Pillow lands one
level away on about 0.7% of values of noise. This module does that integer arithmetic in
numpy; where torch is installed it calls PyTorch's kernel itself, the same bytes for about
2.5x less CPU (18 against 7 CPU-ms for 1280x720 -> 1288x728; MMPREP_TORCH_RESIZE=0 keeps
numpy's, tests/processors check the two agree). torchvision runs bilinear on uint8 natively
only on a CPU with AVX2 (or ARM), else in float32, rounded back: there it may differ by a
level from both (transformers' machines, and vLLM's, have AVX2).
"""

from __future__ import annotations

import functools
import importlib
import math
import os
import warnings
from typing import Any

import numpy as np

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


# Bytes of int32 sums worked on at a time: rows of the horizontal pass, output rows of
# the vertical one, so that a chunk's sums, products and gathered bytes stay in the core's
# cache, where whole-frame buffers (11 MB each at 720p) went through memory once per tap:
# 1.9x faster on 1280x720 -> 1288x728 (benchmarks/resize_speed.py). The sums are the same.
HORIZONTAL_CHUNK_BYTES = 1 << 19
VERTICAL_CHUNK_BYTES = 1 << 17


def _chunk_rows(chunk_bytes: int, width: int) -> int:
    return max(1, chunk_bytes // (4 * width))


def _finish(sums: np.ndarray, precision: int, out: np.ndarray) -> None:
    """int32 sums (rounding term included) to uint8 in `out`, as `basic_loop_aa_horizontal<uint8_t>`."""
    sums >>= precision
    np.clip(sums, 0, 255, out=sums)
    out[...] = sums


@functools.lru_cache(maxsize=64)
def _columns(
    in_width: int, width: int, channels: int, resample: int = BICUBIC
) -> tuple[np.ndarray, np.ndarray, int]:
    """`_taps` for rows of interleaved channels: (taps, width * channels) source columns
    (pixel index times the channel count, plus the channel) and weights, one tap's row
    contiguous (numpy multiplies a contiguous row twice as fast as a strided one)."""
    sources, weights, precision = _taps(in_width, width, resample)
    offsets = np.arange(channels)[None, :, None]
    columns = (sources[:, None, :] * channels + offsets).reshape(width * channels, -1)
    tables = np.ascontiguousarray(columns.T), np.ascontiguousarray(np.repeat(weights, channels, axis=0).T)
    for table in tables:
        table.flags.writeable = False
    return tables[0], tables[1], precision


Runs = tuple[tuple[int, int, int], ...]  # (first output column, end, first source column)
MIN_RUN = 256  # output columns a stretch has on average, at least, to be read as slices


@functools.lru_cache(maxsize=64)
def _runs(in_width: int, width: int, channels: int, resample: int = BICUBIC) -> tuple[Runs | None, ...]:
    """Per tap, the stretches of output columns whose source columns go up one by one, as
    they do nearly everywhere when the size changes little (1280 -> 1288: 9 stretches per
    tap): each is then read as a slice, straight into the multiply, instead of gathered
    column by column (numpy's take, two thirds of the pass's time). None for a tap whose
    stretches are too short to be worth it (a shrink: every source column is skipped over)."""
    columns, _, _ = _columns(in_width, width, channels, resample)
    runs: list[Runs | None] = []
    for tap_columns in columns:
        breaks = np.flatnonzero(np.diff(tap_columns) != 1) + 1
        if len(breaks) + 1 > len(tap_columns) // MIN_RUN:
            runs.append(None)
            continue
        starts, stops = [0, *breaks.tolist()], [*breaks.tolist(), len(tap_columns)]
        runs.append(tuple((a, b, int(tap_columns[a])) for a, b in zip(starts, stops, strict=True)))
    return tuple(runs)


class _Scratch:
    """One chunk's int32 sums and products and its gathered uint8 bytes, reused chunk after chunk."""

    def __init__(self, rows: int, width: int):
        self.sums = np.empty((rows, width), np.int32)
        self.product = np.empty_like(self.sums)
        self.gathered = np.empty((rows, width), np.uint8)

    def first(self, rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.sums[:rows], self.product[:rows], self.gathered[:rows]


def _horizontal(rows: np.ndarray, channels: int, width: int, resample: int) -> np.ndarray:
    """(H, W * C) uint8, channels interleaved, to (H, width * C)."""
    columns, weights, precision = _columns(rows.shape[1] // channels, width, channels, resample)
    runs = _runs(rows.shape[1] // channels, width, channels, resample)
    out = np.empty((rows.shape[0], width * channels), np.uint8)
    step = _chunk_rows(HORIZONTAL_CHUNK_BYTES, width * channels)
    scratch = _Scratch(step, width * channels)
    for start in range(0, rows.shape[0], step):
        chunk = rows[start : start + step]
        sums, product, gathered = scratch.first(len(chunk))
        sums.fill(1 << (precision - 1))
        for tap_columns, tap_runs, tap_weights in zip(columns, runs, weights, strict=True):
            if tap_runs is None:
                np.take(chunk, tap_columns, axis=1, out=gathered)  # uint8: numpy's fast one-byte take
                np.multiply(gathered, tap_weights, out=product)
            else:
                for first, end, source in tap_runs:
                    np.multiply(
                        chunk[:, source : source + end - first],
                        tap_weights[first:end],
                        out=product[:, first:end],
                    )
            sums += product
        _finish(sums, precision, out[start : start + len(chunk)])
    return out


def _vertical(rows: np.ndarray, height: int, resample: int) -> np.ndarray:
    """(H, X) uint8 to (height, X): whole rows weighted and summed."""
    sources, weights, precision = _taps(rows.shape[0], height, resample)
    out = np.empty((height, rows.shape[1]), np.uint8)
    step = _chunk_rows(VERTICAL_CHUNK_BYTES, rows.shape[1])
    scratch = _Scratch(step, rows.shape[1])
    for start in range(0, height, step):
        stop = min(start + step, height)
        sums, product, gathered = scratch.first(stop - start)
        sums.fill(1 << (precision - 1))
        for tap_sources, tap_weights in zip(sources[start:stop].T, weights[start:stop].T, strict=True):
            np.take(rows, tap_sources, axis=0, out=gathered)
            np.multiply(gathered, tap_weights[:, None], out=product)
            sums += product
        _finish(sums, precision, out[start:stop])
    return out


def resize_bicubic(frame: np.ndarray, height: int, width: int) -> np.ndarray:
    """`frame` (H, W, 3) uint8 resized to (height, width, 3), exactly as torchvision's
    antialiased bicubic resize of the same pixels; the frame itself if the size already
    matches. Not always C-contiguous: torch's resize gives a view of channel planes."""
    return resize(frame, height, width, BICUBIC)


def resize(frame: np.ndarray, height: int, width: int, resample: int = BICUBIC) -> np.ndarray:
    """resize_bicubic, or with `resample` BILINEAR (2) torchvision's antialiased bilinear."""
    if resample not in RESAMPLES:
        raise ValueError(f"resample={resample!r}: only bilinear (2) and bicubic (3)")
    old_height, old_width, channels = frame.shape
    if (old_height, old_width) == (height, width):
        return frame
    torch = _torch()
    if torch is not None:
        return _resize_torch(torch, frame, height, width, resample)
    return resize_numpy(frame, height, width, resample)


def resize_numpy(frame: np.ndarray, height: int, width: int, resample: int = BICUBIC) -> np.ndarray:
    """resize in numpy alone."""
    if resample not in RESAMPLES:
        raise ValueError(f"resample={resample!r}: only bilinear (2) and bicubic (3)")
    old_height, old_width, channels = frame.shape
    if (old_height, old_width) == (height, width):
        return frame
    rows = np.ascontiguousarray(frame).reshape(old_height, old_width * channels)
    if width != old_width:
        rows = _horizontal(rows, channels, width, resample)
    if height != old_height:
        rows = _vertical(rows, height, resample)
    return rows.reshape(height, width, channels)


def preload() -> None:
    """Import torch now, where resize_bicubic will use it: about 2 CPU-seconds that would
    otherwise stall the first frame resized."""
    _torch()


@functools.cache
def _torch() -> Any:
    """torch, where it is installed and MMPREP_TORCH_RESIZE is not 0; else None."""
    if os.environ.get("MMPREP_TORCH_RESIZE", "1") == "0":
        return None
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        return None
    # interpolate only reads its input: a read-only frame (the decoder's, the cache's) is fine
    warnings.filterwarnings("ignore", message="The given NumPy array is not writable", category=UserWarning)
    return torch


def _resize_torch(torch: Any, frame: np.ndarray, height: int, width: int, resample: int) -> np.ndarray:
    """PyTorch's own uint8 antialiased resize: the (H, W, 3) frame seen as a channels-last
    (1, 3, H, W) tensor without a copy, which its AVX2 kernel takes. The kernel writes
    channels first; the result is a (height, width, 3) view of that memory, not a copy in
    pixel order: making one cost more than the resize (8 against 5 ms at 720p), and the
    patch writers reorder the pixels anyway, from either layout at the same speed."""
    pixels = torch.from_numpy(np.ascontiguousarray(frame)).permute(2, 0, 1).unsqueeze(0)
    resized = torch.nn.functional.interpolate(
        pixels, size=(height, width), mode=RESAMPLES[resample], antialias=True, align_corners=False
    )
    view: np.ndarray = resized[0].permute(1, 2, 0).numpy()
    return view
