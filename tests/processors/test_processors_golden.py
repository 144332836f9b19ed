"""The processors against transformers' output, stored once by
tests/data/processors/make_goldens.py: numpy only, no torch needed.

Where transformers resizes nothing, values must agree within 1e-5; where it resizes, the
uint8 levels the values came from must be equal, every one (processors/mmprep/processors/resize.py is
torchvision's resize exactly; the goldens store levels, not float32, for those cases).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mmprep.processors import load_processor
from tests.data.processors.make_goldens import case_input, to_levels

GOLDENS = Path(__file__).parents[1] / "data" / "processors"
CASES = json.loads((GOLDENS / "cases.json").read_text())["cases"]


@pytest.fixture(scope="module")
def goldens():
    with np.load(GOLDENS / "goldens.npz") as stored:
        return {key: stored[key] for key in stored.files}


def run_case(case: dict):
    processor = load_processor(case["processor"], **case["overrides"])
    pixels = case_input(tuple(case["shape"]), case["seed"])
    if case["kind"] == "image":
        return processor.image_config, processor.process_image(pixels)
    return processor.video_config, processor.process_video(pixels)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_transformers(name, goldens):
    case = CASES[name]
    config, out = run_case(case)

    assert list(out.tensors) == case["keys"]
    assert {key: list(value.shape) for key, value in out.tensors.items()} == case["shapes"]
    assert {key: str(value.dtype) for key, value in out.tensors.items()} == case["dtypes"]
    values_key, grid_key = case["keys"]
    assert out.tensors[grid_key].tolist() == case["grid"]
    assert out.num_tokens == case["num_tokens"]

    ours, theirs = out.tensors[values_key], goldens[f"{name}/{values_key}"]
    if case["stored"] == "exact":
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-5)
        return
    np.testing.assert_array_equal(to_levels(ours, config), theirs)


def test_goldens_cover_what_the_issue_asks():
    covers = " ".join(case["covers"] for case in CASES.values())
    for needed in ("odd sizes", "one frame", "odd frame count", "min_pixels", "over max_pixels", "no resize"):
        assert needed in covers
    families = {load_processor(case["processor"]).family for case in CASES.values()}
    kinds = {(load_processor(case["processor"]).family, case["kind"]) for case in CASES.values()}
    assert families == {"qwen2_vl", "qwen2_5_vl", "qwen3_vl"}
    assert len(kinds) == 6
