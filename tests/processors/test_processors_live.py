"""The processors against transformers itself, run here and now: skipped unless torch,
torchvision and transformers are installed (mmprep does not depend on them; CI checks the
stored goldens in test_processors_golden.py instead)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from make_goldens import to_levels, transformers_output  # its oracle imports torch when called

from mmprep.processors import load_processor

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
        config, ours = processor.image_config, processor.process_image(pixels)
    else:
        config, ours = processor.video_config, processor.process_video(pixels)

    assert list(ours.tensors) == list(theirs)
    for key, value in theirs.items():
        assert ours.tensors[key].shape == value.shape and ours.tensors[key].dtype == value.dtype, key
    values_key, grid_key = list(theirs)
    np.testing.assert_array_equal(ours.tensors[grid_key], theirs[grid_key])
    off = np.abs(
        to_levels(ours.tensors[values_key], config).astype(np.int16) - to_levels(theirs[values_key], config)
    )
    assert (off <= 1).mean() >= 0.999 and off.max() <= 3


def test_no_resize_is_bit_exact():
    processor = load_processor("Qwen/Qwen2.5-VL-7B-Instruct")
    pixels = np.random.default_rng(5).integers(0, 256, (3, 56, 112, 3), dtype=np.uint8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = transformers_output(processor, "video", pixels)
    np.testing.assert_array_equal(
        processor.process_video(pixels).tensors["pixel_values_videos"], theirs["pixel_values_videos"]
    )
