"""The sizes the Qwen-VL families resize a frame to: transformers' `smart_resize` functions, ported
line for line (Python's `round` included, which rounds halves to even), so the grid is
always transformers' grid."""

from __future__ import annotations

import math

MAX_ASPECT_RATIO = 200


class SizeError(ValueError):
    """A frame no rule can size (too elongated); the processors raise it as their own
    ProcessorInputError, since this package knows nothing of theirs."""


def _check_aspect(height: int, width: int) -> None:
    if max(height, width) / min(height, width) > MAX_ASPECT_RATIO:
        raise SizeError(
            f"a {width}x{height} frame is too elongated: the aspect ratio must be at most "
            f"{MAX_ASPECT_RATIO}, got {max(height, width) / min(height, width):.1f}"
        )


def image_size(height: int, width: int, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """Qwen2-VL's rule (images of every family, videos of Qwen2-VL and Qwen2.5-VL):
    both sides multiples of `factor`, the area within [min_pixels, max_pixels] per frame."""
    _check_aspect(height, width)
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def qwen3_video_size(
    num_frames: int,
    height: int,
    width: int,
    temporal_factor: int,
    factor: int,
    min_pixels: int,
    max_pixels: int,
) -> tuple[int, int]:
    """Qwen3-VL's video rule: the pixel bounds hold for the whole clip (frames rounded to
    `temporal_factor`), and sides below `factor` are first scaled up for the arithmetic."""
    if height < factor or width < factor:
        scale = max(factor / height, factor / width)
        height = int(height * scale)
        width = int(width * scale)
    _check_aspect(height, width)
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    t_bar = round(num_frames / temporal_factor) * temporal_factor
    if t_bar * h_bar * w_bar > max_pixels:
        beta = math.sqrt((num_frames * height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif t_bar * h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (num_frames * height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar
