"""decode_image's JPEG path (mmprep.decoders.jpeg): libjpeg-turbo straight into numpy, byte for byte
what the Pillow path gives, and Pillow's own result or error wherever it cannot be sure of that."""

import io
import random
import struct
from pathlib import Path

import numpy as np
import pytest
import simplejpeg
from PIL import Image, features

from mmprep.decoders import MediaError, decode_image, jpeg
from mmprep.decoders.jpeg import agrees_with_pillow, decode_jpeg

DATA = Path(__file__).parents[1] / "data"


def photo(width: int, height: int, seed: int = 0) -> np.ndarray:
    """Gradients with noise and a sharp-edged block: chroma that upsampling must get right."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    pixels = np.stack([x * 255 // max(width - 1, 1), y * 255 // max(height - 1, 1), (x + y) * 7 % 256], -1)
    pixels = pixels + rng.integers(-20, 20, pixels.shape)
    pixels[height // 4 : height // 2, width // 3 : width // 2] = (230, 20, 40)
    return pixels.clip(0, 255).astype(np.uint8)


def pillow_jpeg(pixels: np.ndarray | Image.Image, **options) -> bytes:
    buffer = io.BytesIO()
    (pixels if isinstance(pixels, Image.Image) else Image.fromarray(pixels)).save(buffer, "JPEG", **options)
    return buffer.getvalue()


def turbo_jpeg(pixels: np.ndarray, subsampling: str, quality: int = 90) -> bytes:
    """The subsamplings Pillow's encoder does not write (4:4:0, 4:1:1)."""
    return simplejpeg.encode_jpeg(pixels, quality, "RGB", subsampling)


def with_orientation(data: bytes, orientation: int) -> bytes:
    """`data` with an EXIF APP1 segment right after its SOI marker."""
    exif = Image.Exif()
    exif[0x0112] = orientation
    payload = exif.tobytes()
    return data[:2] + b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload + data[2:]


def outcome(data: bytes, **limits) -> tuple:
    """What decode_image makes of `data`: the pixels, metadata and flag, or the error in full."""
    try:
        image = decode_image(data, **limits)
    except MediaError as error:
        return type(error), error.code, str(error)
    assert image.pixels.dtype == np.uint8 and image.pixels.flags.c_contiguous
    return image.pixels.shape, image.pixels.tobytes(), image.metadata, image.converted


def pillow_outcome(data: bytes, **limits) -> tuple:
    """The same with every JPEG decoded by Pillow, as before the JPEG path."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jpeg, "decode_jpeg", lambda *args: None)
        return outcome(data, **limits)


def fast_path_taken(data: bytes) -> bool:
    with Image.open(io.BytesIO(data)) as image:
        orientation = image.getexif().get(0x0112, 1)
        return decode_jpeg(data, image, orientation) is not None


def test_pillow_and_simplejpeg_agree_on_this_install():
    assert features.check_feature("libjpeg_turbo")
    assert agrees_with_pillow()


SIZES = [(1, 1), (17, 9), (9, 17), (64, 48), (1279, 721)]
ENCODINGS = {
    "444": lambda pixels, quality: pillow_jpeg(pixels, quality=quality, subsampling=0),
    "422": lambda pixels, quality: pillow_jpeg(pixels, quality=quality, subsampling=1),
    "420": lambda pixels, quality: pillow_jpeg(pixels, quality=quality, subsampling=2),
    "440": lambda pixels, quality: turbo_jpeg(pixels, "440", quality),
    "411": lambda pixels, quality: turbo_jpeg(pixels, "411", quality),
    "420-progressive": lambda pixels, quality: pillow_jpeg(pixels, quality=quality, progressive=True),
    "444-progressive-optimized": lambda pixels, quality: pillow_jpeg(
        pixels, quality=quality, subsampling=0, progressive=True, optimize=True
    ),
}


@pytest.mark.parametrize("size", SIZES, ids=lambda size: f"{size[0]}x{size[1]}")
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_jpegs_decode_as_pillow_decodes_them(encoding, size):
    for quality in (50, 75, 90, 100) if size != (1279, 721) else (90,):
        data = ENCODINGS[encoding](photo(*size, seed=quality), quality)
        assert fast_path_taken(data), (encoding, quality)
        assert outcome(data) == pillow_outcome(data), (encoding, quality)


@pytest.mark.parametrize(
    "options", [{"restart_marker_rows": 1}, {"restart_marker_blocks": 5, "progressive": True}]
)
def test_restart_intervals(options):
    data = pillow_jpeg(photo(133, 71), quality=85, **options)
    if b"\xff\xdd" not in data:  # no DRI marker: Pillow before 11.1 ignores the options
        pytest.skip("this Pillow writes no restart markers")
    assert fast_path_taken(data)
    assert outcome(data) == pillow_outcome(data)


@pytest.mark.parametrize("orientation", range(1, 9))
@pytest.mark.parametrize("encoding", ["420", "422", "444-progressive-optimized"])
def test_exif_orientations_turn_as_pillow_turns(orientation, encoding):
    data = with_orientation(ENCODINGS[encoding](photo(37, 18), 90), orientation)
    assert fast_path_taken(data)
    turned = outcome(data)
    assert turned == pillow_outcome(data)
    assert turned[2].width == (18 if orientation >= 5 else 37)


@pytest.mark.parametrize("orientation", [0, 9, 300])
def test_orientations_outside_exifs_range_leave_the_image_as_stored(orientation):
    data = with_orientation(pillow_jpeg(photo(37, 18)), orientation)
    assert fast_path_taken(data)
    assert outcome(data) == pillow_outcome(data)
    assert outcome(data)[0] == (18, 37, 3)


def test_an_rgb_jpeg_without_colour_conversion():
    data = pillow_jpeg(photo(45, 30), keep_rgb=True)  # Adobe marker, transform 0
    if simplejpeg.decode_jpeg_header(data)[2] != "RGB":  # Pillow before 11 ignores keep_rgb
        pytest.skip("this Pillow writes no RGB JPEGs")
    assert fast_path_taken(data)
    assert outcome(data) == pillow_outcome(data)


def test_a_camera_mpo_gives_its_first_picture():
    buffer = io.BytesIO()
    first, second = Image.fromarray(photo(64, 48)), Image.fromarray(photo(64, 48, seed=1))
    first.save(buffer, "MPO", save_all=True, append_images=[second])
    data = buffer.getvalue()
    assert fast_path_taken(data)
    assert outcome(data) == pillow_outcome(data)
    assert outcome(data)[2].format == "MPO"


@pytest.mark.parametrize(
    "data",
    [
        pillow_jpeg(photo(40, 30)[..., 0]),  # grey
        pillow_jpeg(Image.fromarray(photo(40, 30)).convert("CMYK")),
        (DATA / "vllm" / "images" / "gray.jpg").read_bytes(),
    ],
    ids=["grey", "cmyk", "gray.jpg"],
)
def test_grey_and_cmyk_jpegs_stay_with_pillow(data):
    assert not fast_path_taken(data)
    image = decode_image(data)
    assert image.converted and image.pixels.shape[2] == 3
    assert outcome(data) == pillow_outcome(data)


def test_a_scaled_decode_stays_with_pillow():
    # max_pixels asks for Pillow's draft (libjpeg's DCT scaling) and its resize: not this path's
    data = pillow_jpeg(photo(600, 400))
    assert outcome(data, max_pixels=6000) == pillow_outcome(data, max_pixels=6000)
    assert outcome(data, max_pixels=6000)[0] == (63, 94, 3)
    assert outcome(data, max_pixels=240_000) == pillow_outcome(data, max_pixels=240_000)  # the size itself


def test_paths_and_files_decode_as_bytes_do(tmp_path):
    data = with_orientation(pillow_jpeg(photo(50, 20)), 6)
    path = tmp_path / "photo.jpg"
    path.write_bytes(data)
    expected = decode_image(data).pixels
    assert np.array_equal(decode_image(path).pixels, expected)
    assert np.array_equal(decode_image(str(path)).pixels, expected)
    assert np.array_equal(decode_image(io.BytesIO(data)).pixels, expected)
    assert np.array_equal(decode_image(memoryview(data)).pixels, expected)


DAMAGED_SOURCES = {
    "baseline": pillow_jpeg(photo(96, 64), quality=90),
    "progressive": pillow_jpeg(photo(96, 64), quality=90, progressive=True),
    "411": turbo_jpeg(photo(96, 64), "411"),
    "oriented": with_orientation(pillow_jpeg(photo(96, 64), quality=90), 8),
}


@pytest.mark.parametrize("name", DAMAGED_SOURCES)
def test_truncated_jpegs_give_what_pillow_gives(name):
    data = DAMAGED_SOURCES[name]
    cuts = [
        2,
        20,
        200,
        len(data) // 3,
        len(data) // 2,
        len(data) - 100,
        len(data) - 3,
        len(data) - 2,
        len(data) - 1,
    ]
    for cut in cuts:
        assert outcome(data[:cut]) == pillow_outcome(data[:cut]), cut
    assert outcome(data + b"trailing bytes") == pillow_outcome(data + b"trailing bytes")


@pytest.mark.parametrize("name", DAMAGED_SOURCES)
def test_jpegs_with_flipped_bytes_give_what_pillow_gives(name):
    data = DAMAGED_SOURCES[name]
    rng = random.Random(name)
    outcomes = set()
    for _ in range(60):
        damaged = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            damaged[rng.randrange(len(damaged))] ^= 1 << rng.randrange(8)
        expected = pillow_outcome(bytes(damaged))
        assert outcome(bytes(damaged)) == expected
        outcomes.add("pixels" if len(expected) == 4 else expected[1])
    assert "pixels" in outcomes  # most flips land in the entropy-coded data, which still decodes


def test_a_corrupt_jpeg_is_corrupt_media():
    data = DAMAGED_SOURCES["baseline"]
    with pytest.raises(MediaError) as caught:
        decode_image(data[: len(data) // 2])
    assert caught.value.code == "corrupt_media" and "truncated" in str(caught.value)
