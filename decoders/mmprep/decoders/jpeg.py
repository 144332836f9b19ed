"""JPEG decoded by libjpeg-turbo (simplejpeg) straight into a numpy array, where the pixels are
Pillow's to the byte: 0.7x the CPU of Pillow's decode and its copy out (tobytes and a join)
on a 720p photo, 0.43x on a 12 MP one (benchmarks/image_decode_speed.py).

Pillow decodes JPEG with the same library at its defaults (the accurate integer DCT, fancy
upsampling), so simplejpeg with `fastdct=False, fastupsample=False` gives the same bytes for every
three-component JPEG of the usual subsamplings. Everything else stays Pillow's, chosen from the
header: grey, CMYK and YCCK files, other subsamplings, and damaged files: simplejpeg's `strict`
refuses any file libjpeg warns about (a truncated tail, corrupt data), which Pillow either
refuses as truncated or decodes in its own way, so Pillow then decides what the file gives.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable

import numpy as np
import simplejpeg
from PIL import Image

# Pillow's names for a JPEG file. MPO: a camera's JPEG with more pictures after it, the first at its start.
FORMATS = ("JPEG", "MPO")
# The colour layouts whose decode is proven equal to Pillow's (tests/decoders/test_decode_jpeg.py).
SUBSAMPLINGS = ("444", "422", "420", "440", "411")
COLORSPACES = ("YCbCr", "RGB")  # RGB: Adobe's transform 0, decoded without a colour conversion

# EXIF orientation -> the turn that shows the image upright, as ImageOps.exif_transpose makes it
# (on an (H, W) array of whole pixels).
TRANSPOSES: dict[int, Callable[[np.ndarray], np.ndarray]] = {
    2: np.fliplr,  # FLIP_LEFT_RIGHT
    3: lambda pixels: np.rot90(pixels, 2),  # ROTATE_180
    4: np.flipud,  # FLIP_TOP_BOTTOM
    5: lambda pixels: pixels.swapaxes(0, 1),  # TRANSPOSE
    6: lambda pixels: np.rot90(pixels, -1),  # ROTATE_270: a quarter turn clockwise
    7: lambda pixels: np.rot90(pixels, 2).swapaxes(0, 1),  # TRANSVERSE
    8: np.rot90,  # ROTATE_90: a quarter turn counter-clockwise
}


def decode_jpeg(
    data: bytes | bytearray | memoryview, image: Image.Image, orientation: object
) -> np.ndarray | None:
    """The upright RGB pixels of `data`, a JPEG that Pillow has opened (lazily) as `image`,
    exactly as Pillow would decode and turn them; None where Pillow must decode it."""
    if image.format not in FORMATS or image.mode != "RGB" or not isinstance(orientation, int):
        return None
    try:
        height, width, colorspace, subsampling = simplejpeg.decode_jpeg_header(data)
        if (height, width) != (image.height, image.width) or colorspace not in COLORSPACES:
            return None
        if subsampling not in SUBSAMPLINGS or not agrees_with_pillow():
            return None
        pixels: np.ndarray = simplejpeg.decode_jpeg(
            data, "RGB", fastdct=False, fastupsample=False, strict=True
        )
    except ValueError:  # damaged, or a warning from libjpeg: Pillow says what it makes of the file
        return None
    return upright(pixels, orientation)


def upright(pixels: np.ndarray, orientation: int) -> np.ndarray:
    turn = TRANSPOSES.get(orientation)
    if turn is None:
        return pixels
    # Each pixel moved as one 3-byte item: half the time of numpy moving its bytes one by one
    # (12 MP turned a quarter: 35 ms against 67).
    turned = np.ascontiguousarray(turn(pixels.view("V3")[..., 0]))
    return turned.view(np.uint8).reshape(*turned.shape, 3)


@functools.cache
def agrees_with_pillow() -> bool:
    """Pillow and simplejpeg give the same pixels on a noisy image in every subsampling taken.
    Both wheels bundle libjpeg-turbo; a Pillow built against another libjpeg (IJG's 9 upsamples
    chroma its own way) would differ, and then every JPEG goes to Pillow."""
    rng = np.random.default_rng(0)
    noisy = rng.integers(0, 256, (21, 35, 3), dtype=np.uint8)  # odd sizes: SIMD rows and C tails
    for subsampling in SUBSAMPLINGS:
        data = simplejpeg.encode_jpeg(noisy, 85, "RGB", subsampling)
        with Image.open(io.BytesIO(data)) as image:
            pillows = np.asarray(image)
        if not np.array_equal(
            simplejpeg.decode_jpeg(data, "RGB", fastdct=False, fastupsample=False), pillows
        ):
            return False
    return True
