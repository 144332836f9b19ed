"""The processors against transformers itself, and `resize` (bicubic and bilinear) against
torchvision's resize, run here and now, all to the bit: skipped unless torch,
torchvision and transformers are installed (mmprep does not depend on them; CI checks the
stored goldens in test_processors_golden.py instead)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from mmprep.processors import load_processor
from mmprep.processors.resize import BILINEAR, resize, resize_bicubic
from tests.data.processors.make_goldens import transformers_output  # its oracle imports torch when called
from tests.support.resize_reference import reference_resize

REASON = "needs torch, torchvision and transformers (pip install torch torchvision transformers)"
pytest.importorskip("torch", reason=REASON)
pytest.importorskip("torchvision", reason=REASON)
transformers = pytest.importorskip("transformers", reason=REASON)

pytestmark = pytest.mark.slow  # torch, torchvision and transformers as the oracle

CASES = [
    # (processor, overrides, kind, shape)
    ("qwen2_vl", {}, "video", (3, 41, 173)),
    (
        "Qwen/Qwen2-VL-2B-Instruct",
        {"cap_pixels_per_frame": True, "max_video_tokens": 64},
        "video",
        (6, 200, 130),
    ),
    ("Qwen/Qwen2.5-VL-3B-Instruct", {}, "video", (2, 131, 97)),
    ("Qwen/Qwen2.5-VL-3B-Instruct", {}, "image", (1000, 11)),
    ("qwen2_5_vl", {"do_normalize": False}, "image", (77, 99)),
    ("qwen3_vl", {}, "video", (5, 57, 300)),
    ("Qwen/Qwen3-VL-4B-Instruct", {"cap_pixels_per_frame": True}, "video", (8, 240, 320)),
    (
        "Qwen/Qwen3-VL-4B-Instruct",
        {"size": {"shortest_edge": 4096, "longest_edge": 65536}},
        "video",
        (1, 90, 60),
    ),
    ("qwen3_vl", {"max_pixels": 20000}, "image", (150, 450)),
]


@pytest.mark.parametrize(("name", "overrides", "kind", "shape"), CASES)
def test_same_as_transformers(name, overrides, kind, shape):
    processor = load_processor(name, **overrides)
    # noise: the hardest content for a resize to agree on
    pixels = np.random.default_rng(sum(shape)).integers(0, 256, shape + (3,), dtype=np.uint8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = transformers_output(processor, kind, pixels)
    if kind == "image":
        ours = processor.process_image(pixels)
    else:
        ours = processor.process_video(pixels)

    assert list(ours.tensors) == list(theirs)
    for key, value in theirs.items():
        assert ours.tensors[key].shape == value.shape and ours.tensors[key].dtype == value.dtype, key
    values_key, grid_key = list(theirs)
    np.testing.assert_array_equal(ours.tensors[grid_key], theirs[grid_key])
    # the resize is torchvision's exactly and the normalization torch's float32 operations,
    # so the values are the same bits
    np.testing.assert_array_equal(ours.tensors[values_key], theirs[values_key])


def test_no_resize_is_bit_exact():
    processor = load_processor("Qwen/Qwen2.5-VL-7B-Instruct")
    pixels = np.random.default_rng(5).integers(0, 256, (3, 56, 112, 3), dtype=np.uint8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = transformers_output(processor, "video", pixels)
    np.testing.assert_array_equal(
        processor.process_video(pixels).tensors["pixel_values_videos"], theirs["pixel_values_videos"]
    )


# InternVL's tiles (processors/mmprep/processors/tiles.py): (overrides, kind, shape). Landscape, portrait,
# square, one tile, the thumbnail, an aspect no grid fits, a small max_patches, tiles of
# another size.
TILE_CASES = [
    ({}, "image", (300, 800)),
    ({}, "image", (448, 448)),
    ({}, "image", (100, 70)),
    ({}, "image", (1000, 11)),
    ({}, "image", (500, 1000)),
    ({"max_patches": 4}, "image", (333, 250)),
    ({"max_patches": 1}, "image", (240, 320)),
    ({"size": {"height": 56, "width": 56}, "min_patches": 2}, "image", (90, 120)),
    ({}, "video", (3, 100, 120)),
    ({"size": {"height": 28, "width": 28}}, "video", (2, 448, 448)),
]


@pytest.mark.parametrize(("overrides", "kind", "shape"), TILE_CASES)
def test_internvl_tiles_are_transformers(overrides, kind, shape):
    """InternVL 3.5's published configs, against GotOcr2ImageProcessor with crop_to_patches
    (as InternVLProcessor calls it) and InternVLVideoProcessor: every tile, to the bit."""
    processor = load_processor("OpenGVLab/InternVL3_5-1B-HF", **overrides)
    pixels = np.random.default_rng(sum(shape)).integers(0, 256, shape + (3,), dtype=np.uint8)
    config = processor.image_config if kind == "image" else processor.video_config
    assert config is not None
    kwargs = {
        "size": dict(zip(("height", "width"), config.fixed_size, strict=True)),
        "image_mean": list(config.image_mean),
        "image_std": list(config.image_std),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind == "image":
            reference = transformers.GotOcr2ImageProcessor(
                **kwargs, min_patches=config.option("min_patches"), max_patches=config.option("max_patches")
            )
            theirs = reference(images=[pixels], crop_to_patches=True, return_tensors="np")
            values, count = np.asarray(theirs["pixel_values"]), int(theirs["num_patches"][0])
            ours = processor.process_image(pixels)
            assert ours.num_tokens == processor.image_tokens(*shape) == 256 * count
        else:
            theirs = transformers.InternVLVideoProcessor(**kwargs)(videos=[pixels], return_tensors="np")
            values, count = np.asarray(theirs["pixel_values_videos"])[0], len(pixels)
            ours = processor.process_video(pixels)
            assert ours.num_tokens == processor.video_tokens(*shape) == 256 * count
    pixels_key, count_key = processor.tensor_names(kind)
    assert ours.tensors[count_key].tolist() == [count]
    assert ours.tensors[pixels_key].dtype == values.dtype and ours.tensors[pixels_key].shape == values.shape
    np.testing.assert_array_equal(ours.tensors[pixels_key], values)


# (input height, width) -> (output height, width): resize_bicubic against torchvision itself
RESIZES = [
    ((720, 1280), (728, 1288)),  # Qwen's grid for 720p: both sides up a little
    ((1080, 1920), (252, 448)),  # a large factor down (support 8.6 pixels, 18 taps)
    ((2160, 3840), (224, 392)),  # larger still
    ((97, 131), (112, 140)),  # odd sizes, up
    ((131, 97), (56, 196)),  # one side down, the other up
    ((300, 170), (308, 84)),  # one side up, the other down
    ((1000, 11), (1008, 28)),
    ((9, 40), (32, 64)),  # sides under the patch
    ((333, 250), (333, 252)),  # only the width changes
    ((250, 333), (56, 333)),  # only the height changes
    ((5, 3000), (5, 2)),  # weights small enough for 22 bits of precision
    ((1, 1), (3, 5)),
]


def torchvision_resize(frame: np.ndarray, height: int, width: int, resample: int = 3) -> np.ndarray:
    """What transformers' fast processors run: v2's resize of a uint8 CHW tensor (bicubic,
    or with `resample` 2 bilinear: Gemma 3's)."""
    import torch
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms.v2.functional import resize as v2_resize

    mode = InterpolationMode.BILINEAR if resample == BILINEAR else InterpolationMode.BICUBIC
    chw = torch.from_numpy(frame).permute(2, 0, 1)
    out = v2_resize(chw, [height, width], interpolation=mode, antialias=True)
    return out.permute(1, 2, 0).numpy()


@pytest.mark.parametrize(("size", "resized"), RESIZES)
def test_resize_is_torchvisions(size, resized):
    # noise: every tap's weight shows in the sums, the hardest content to agree on
    frame = np.random.default_rng(sum(size + resized)).integers(0, 256, size + (3,), dtype=np.uint8)
    theirs = torchvision_resize(frame, *resized)
    np.testing.assert_array_equal(reference_resize(frame, *resized), theirs)
    np.testing.assert_array_equal(resize_bicubic(frame, *resized), theirs)


GEMMA3_RESIZES = [((3000, 1000), (896, 896)), ((300, 334), (896, 896))]  # a tall image, a crop


@pytest.mark.parametrize(("size", "resized"), RESIZES + GEMMA3_RESIZES)
def test_bilinear_resize_is_torchvisions(size, resized):
    """Gemma 3's resample (2): torchvision's uint8 bilinear (native on this AVX2 CPU)."""
    frame = np.random.default_rng(sum(size + resized)).integers(0, 256, size + (3,), dtype=np.uint8)
    theirs = torchvision_resize(frame, *resized, BILINEAR)
    np.testing.assert_array_equal(reference_resize(frame, *resized, BILINEAR), theirs)
    np.testing.assert_array_equal(resize(frame, *resized, BILINEAR), theirs)


def test_resize_is_torchvisions_on_random_sizes():
    rng = np.random.default_rng(31)
    for _ in range(60):
        height, width, out_height, out_width = (int(side) for side in rng.integers(1, 200, 4))
        if rng.random() < 0.3:  # large factors down
            out_height = max(1, height // int(rng.integers(2, 40)))
        frame = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
        for resample in (3, BILINEAR):
            theirs = torchvision_resize(frame, out_height, out_width, resample)
            for ours in (
                reference_resize(frame, out_height, out_width, resample),
                resize(frame, out_height, out_width, resample),
            ):
                where = f"{(height, width)} -> {(out_height, out_width)}, resample {resample}"
                np.testing.assert_array_equal(ours, theirs, err_msg=where)
