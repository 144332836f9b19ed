"""decode_image: a still image as an upright RGB array: Pillow reads the header and decodes
every format, but a JPEG whose pixels libjpeg-turbo gives exactly as Pillow would (jpeg.py)."""

from __future__ import annotations

import io
import os
import warnings
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from . import jpeg
from .errors import CorruptMediaError, MediaNotFoundError, MediaTooLargeError
from .frames import scaled_size
from .sampling import check_limits, check_sampling
from .sniff import HEAD_BYTES, describe_bytes

if TYPE_CHECKING:
    from .source import Source

# Pillow refuses images past this many pixels before decoding them (a decompression
# bomb: a few KB of PNG that would expand to gigabytes). Pillow's default is 89 M.
DEFAULT_MAX_SOURCE_PIXELS = Image.MAX_IMAGE_PIXELS
EXIF_ORIENTATION = 0x0112


@dataclass(frozen=True)
class ImageMetadata:
    width: int  # of the source, as displayed (after EXIF orientation)
    height: int
    format: str  # "PNG", "JPEG", ...
    mode: str  # Pillow's mode of the source: "RGB", "RGBA", "P", "L", ...

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class DecodedImage:
    pixels: np.ndarray  # uint8 (H, W, 3) RGB, C-contiguous
    metadata: ImageMetadata
    # The source's pixels were converted to RGB: from another mode, or transparency
    # composited on white (vLLM's image loader then records the conversion in its hash).
    converted: bool = False


def decode_image(
    source: Source, max_pixels: int | None = None, max_source_pixels: int | None = DEFAULT_MAX_SOURCE_PIXELS
) -> DecodedImage:
    """Decode `source` (bytes, a path or a binary file) to RGB.

    EXIF orientation is applied; transparency is composited on white, as vLLM does;
    an animated image gives its first frame. max_pixels scales the result down,
    aspect kept. Raises CorruptMediaError, MediaTooLargeError or MediaNotFoundError;
    InvalidArgumentError (also a ValueError) for a limit that makes no sense.
    """
    check_sampling(max_pixels=max_pixels)
    check_limits(max_source_pixels=max_source_pixels)
    try:
        with _open(source) as image:
            _check_size(image, max_source_pixels)
            orientation = image.getexif().get(EXIF_ORIENTATION, 1)
            turned = orientation in (5, 6, 7, 8)  # a quarter turn
            upright = (image.height, image.width) if turned else image.size
            metadata = ImageMetadata(*upright, image.format or "", image.mode)
            size = scaled_size(*upright, max_pixels)
            fast = _decode_jpeg(source, image, orientation) if size == upright else None
            if fast is not None:
                return DecodedImage(fast, metadata)
            if size != upright:
                image.draft("RGB", size[::-1] if turned else size)  # JPEG: decode at a smaller scale
            if orientation != 1:  # exif_transpose copies an upright image whole: a tenth of a render's CPU
                image = ImageOps.exif_transpose(image)
            if image.size != size:
                image = image.resize(size, Image.Resampling.BICUBIC, reducing_gap=2.0)
            rgb = _to_rgb(image)
            pixels = np.ascontiguousarray(np.asarray(rgb, dtype=np.uint8))
    except UnidentifiedImageError as error:  # its message names a BytesIO object: of no use to anyone
        raise CorruptMediaError(_unidentified(source)) from error
    except (OSError, SyntaxError, ValueError, EOFError) as error:
        raise CorruptMediaError(f"Pillow cannot read this image: {error}") from error
    return DecodedImage(pixels, metadata, converted=rgb is not image)


def _decode_jpeg(source: Source, image: Image.Image, orientation: object) -> np.ndarray | None:
    """A JPEG in RGB at its own size, straight into numpy where that is exactly Pillow's result."""
    if image.format not in jpeg.FORMATS:
        return None
    if isinstance(source, (bytes, bytearray, memoryview)):
        return jpeg.decode_jpeg(source, image, orientation)
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as file:
            return jpeg.decode_jpeg(file.read(), image, orientation)
    return None  # a file object: Pillow reads it as it goes


def _unidentified(source: Source) -> str:
    if isinstance(source, (bytes, bytearray, memoryview)):
        head = bytes(source[:HEAD_BYTES])
    elif isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as file:
            head = file.read(HEAD_BYTES)
    else:
        head = b""  # a file object Pillow has read from: not worth rewinding for a message
    kind = describe_bytes(head)
    if kind is None:
        return "Pillow cannot tell what image format this is (it may be damaged or not an image)"
    if kind.endswith(("video", "file")):
        return f"this is {kind}, not an image: send it as a video_url part"
    return f"this is {kind}, not an image"


def _open(source: Source) -> Image.Image:
    if isinstance(source, (bytes, bytearray, memoryview)):
        if len(source) == 0:
            raise CorruptMediaError("the input is empty (0 bytes)")
        source = io.BytesIO(source)
    elif isinstance(source, (str, os.PathLike)) and not os.path.isfile(source):
        raise MediaNotFoundError(f"cannot read {os.fspath(source)!r}: no such file")
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            return Image.open(source)
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as error:
            raise MediaTooLargeError(f"the image is too large to decode: {error}") from error


def _check_size(image: Image.Image, max_source_pixels: int | None) -> None:
    if max_source_pixels is not None and image.width * image.height > max_source_pixels:
        raise MediaTooLargeError(
            f"the image is {image.width}x{image.height}, more than the {max_source_pixels} pixels allowed"
        )


def _to_rgb(image: Image.Image) -> Image.Image:
    """The image in RGB, exactly as vLLM's loader converts it (multimodal/image.py
    convert_image_mode): transparency (an alpha channel, or a PNG's tRNS in any mode) pasted
    on white through its alpha, any other mode converted; the image itself if RGB already."""
    if image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info:
        rgba = image if image.mode == "RGBA" else image.convert("RGBA")
        rgb = Image.new("RGB", rgba.size, (255, 255, 255))
        rgb.paste(rgba, mask=rgba.split()[3])
        return rgb
    return image if image.mode == "RGB" else image.convert("RGB")
