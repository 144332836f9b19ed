"""decode_image: upright RGB from whatever Pillow reads, with clear errors."""

import io

import numpy as np
import pytest
from PIL import Image

from mmprep.decoders import CorruptMediaError, MediaNotFoundError, MediaTooLargeError, decode_image


def encoded(image: Image.Image, fmt: str, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def marked(width=60, height=40) -> Image.Image:
    """Grey with a red block in the top-left corner: shows which way up it came out."""
    image = Image.new("RGB", (width, height), (128, 128, 128))
    image.paste((230, 20, 20), (0, 0, width // 3, height // 3))
    return image


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "WEBP", "BMP", "GIF", "TIFF"])
def test_common_formats_decode_to_rgb(fmt):
    image = decode_image(encoded(marked(), fmt))
    assert image.pixels.shape == (40, 60, 3) and image.pixels.dtype == np.uint8
    assert image.pixels.flags.c_contiguous
    assert image.pixels[2, 2, 0] > 180 and image.pixels[2, 2, 1] < 80
    assert image.metadata.format == fmt and (image.metadata.width, image.metadata.height) == (60, 40)


def test_exif_orientation_is_applied():
    # Stored turned a quarter counter-clockwise, tagged "turn 90 degrees clockwise to view" (6).
    stored = marked().transpose(Image.Transpose.ROTATE_90)
    exif = Image.Exif()
    exif[0x0112] = 6
    image = decode_image(encoded(stored, "JPEG", exif=exif))
    assert image.pixels.shape == (40, 60, 3)
    assert image.pixels[2, 2, 0] > 180  # red corner back at the top left
    assert (image.metadata.width, image.metadata.height) == (60, 40)


def test_transparency_is_composited_on_white():
    rgba = Image.new("RGBA", (10, 10), (255, 0, 0, 0))
    assert decode_image(encoded(rgba, "PNG")).pixels[5, 5].tolist() == [255, 255, 255]


def test_grey_and_palette_images_become_rgb():
    assert decode_image(encoded(Image.new("L", (8, 8), 77), "PNG")).pixels[0, 0].tolist() == [77, 77, 77]
    palette = Image.new("RGB", (8, 8), (10, 200, 30)).convert("P")
    assert decode_image(encoded(palette, "PNG")).pixels.shape == (8, 8, 3)


def test_max_pixels_scales_down_keeping_the_aspect_ratio():
    image = decode_image(encoded(marked(600, 400), "JPEG"), max_pixels=6000)
    assert image.pixels.shape == (63, 94, 3)  # 600x400 scaled by sqrt(6000 / 240000)
    assert (image.metadata.width, image.metadata.height) == (600, 400)


def test_a_decompression_bomb_is_refused_before_decoding():
    bomb = encoded(Image.new("L", (4000, 4000)), "PNG")  # 16 Mpx in a few KB
    with pytest.raises(MediaTooLargeError, match="4000x4000"):
        decode_image(bomb, max_source_pixels=10_000_000)


@pytest.mark.parametrize(
    "data", [b"", b"not an image", encoded(marked(), "PNG")[:60]], ids=["empty", "text", "truncated"]
)
def test_unreadable_images_are_corrupt_media(data):
    with pytest.raises(CorruptMediaError):
        decode_image(data)


def test_a_missing_path_is_named(tmp_path):
    with pytest.raises(MediaNotFoundError, match="missing.png"):
        decode_image(tmp_path / "missing.png")


@pytest.mark.parametrize("limits", [{"max_pixels": 0}, {"max_source_pixels": -1}], ids=repr)
def test_nonsense_limits_are_named_value_errors(limits):
    # max_pixels=0 gave a 1x1 image without a word
    with pytest.raises(ValueError, match=next(iter(limits))):
        decode_image(encoded(marked(), "PNG"), **limits)
