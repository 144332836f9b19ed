"""mmprep.processors.dtypes: bfloat16 as torch rounds it, on vLLM's wire and back;
mmprep.model.dtype: the model dtype vLLM resolves; and every floating tensor of vLLM's items
in it (issue 45: Qwen2.5-VL's second_per_grid_ts; issue 59: the pixels too)."""

from __future__ import annotations

import base64
import importlib.util
from dataclasses import replace

import msgpack
import numpy as np
import pytest

from mmprep.model.dtype import model_dtype
from mmprep.processors import BFLOAT16, as_float32, cast, torch_name
from mmprep.vllm.items import FieldElem, batched, kwargs_items
from mmprep.vllm.request import generate_request
from mmprep.vllm.serde import decode_item, encode_item
from tests.support.vllm_cases import build_case


def test_bfloat16_rounds_to_nearest_even():
    seconds = np.array([1.8560208, 1.0998, 2.0260, 2 / 15, 1.0, 1 + 2**-8, 1 + 3 * 2**-8, -2.5], np.float32)
    rounded = cast(seconds, "bfloat16")
    assert rounded.dtype == BFLOAT16 and torch_name(rounded) == "bfloat16"
    # the pairs (vLLM's render: 1.1016, 2.0312, 0.13379), and ties going to the even one
    assert as_float32(rounded).tolist() == [
        1.859375,
        1.1015625,
        2.03125,
        0.1337890625,
        1.0,
        1.0,
        1.015625,
        -2.5,
    ]
    assert cast(np.array(1.5, np.float32), "bfloat16").shape == ()  # a 0-d stays 0-d
    assert cast(seconds, "float16").dtype == np.float16


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_bfloat16_is_torchs():
    import torch

    numbers = np.random.default_rng(45).standard_normal(10000).astype(np.float32) * 1000
    numbers = np.concatenate([numbers, np.array([np.inf, -np.inf, 0, -0.0, 3.4e38], np.float32)])
    theirs = torch.from_numpy(numbers).to(torch.bfloat16)
    assert (
        cast(numbers, "bfloat16").view(np.uint16).tolist()
        == theirs.view(torch.int16).numpy().view(np.uint16).tolist()
    )
    assert as_float32(cast(numbers, "bfloat16")).tolist() == theirs.float().numpy().tolist()


def test_a_bfloat16_tensor_goes_as_torchs_name_and_two_bytes_and_comes_back():
    item = {"second_per_grid_ts": FieldElem(cast(np.array(2 / 1.1, np.float32), "bfloat16"), batched(True))}
    text = encode_item(item)
    document = msgpack.unpackb(base64.b64decode(text), ext_hook=lambda code, data: (code, data))
    dtype, shape, (code, raw) = document["second_per_grid_ts"]["data"]
    assert (dtype, shape, code, raw) == ("bfloat16", [], 3, np.array(0x3FE9, "<u2").tobytes())
    back = decode_item(text)["second_per_grid_ts"].data
    assert isinstance(back, np.ndarray) and torch_name(back) == "bfloat16"
    assert float(as_float32(back)) == 1.8203125


@pytest.mark.parametrize(
    ("setting", "config", "dtype"),
    [
        ("auto", {"torch_dtype": "bfloat16"}, "bfloat16"),  # the published Qwen2.5-VL configs
        ("auto", {"dtype": "float32"}, "bfloat16"),  # vLLM serves a float32 config in bfloat16
        ("auto", {"text_config": {"dtype": "float16"}}, "float16"),
        ("auto", {"vision_config": {"torch_dtype": "torch.float16"}}, "float16"),
        ("auto", {}, "bfloat16"),
        ("float", {"torch_dtype": "bfloat16"}, "float32"),
        ("half", {}, "float16"),
        ("bfloat16", {"dtype": "float32"}, "bfloat16"),
    ],
)
def test_the_model_dtype_is_vllms(setting, config, dtype):
    assert model_dtype(setting, config) == dtype


def test_every_floating_tensor_goes_in_the_models_dtype():
    """vLLM's processor casts every floating tensor it makes to the model's dtype, pixels and
    second_per_grid_ts alike (its engine reads the seconds into M-RoPE positions); the grids
    stay int64, and Qwen3-VL's timestamps (a list, no tensor) as they are. A processor made
    in the dtype writes the pixels so already: they go as they are, not cast again."""
    case = build_case("qwen2_5_vl_two_videos")
    video = case.media[0]
    assert video.processed is not None
    pixels = video.processed.tensors["pixel_values_videos"]
    for dtype in ("float32", "bfloat16", "float16"):
        (item,) = kwargs_items([video], "qwen2_5_vl", 2, dtype=dtype)
        seconds = item["second_per_grid_ts"].data
        assert isinstance(seconds, np.ndarray) and torch_name(seconds) == dtype and seconds.shape == ()
        sent = item["pixel_values_videos"].data
        assert isinstance(sent, np.ndarray) and torch_name(sent) == dtype
        np.testing.assert_array_equal(sent, cast(pixels, dtype))
        assert item["video_grid_thw"].data.dtype == np.int64
    made_so = replace(
        video,
        processed=replace(
            video.processed,
            tensors={**video.processed.tensors, "pixel_values_videos": cast(pixels, "bfloat16")},
        ),
    )
    (item,) = kwargs_items([made_so], "qwen2_5_vl", 2, dtype="bfloat16")
    assert item["pixel_values_videos"].data is made_so.processed.tensors["pixel_values_videos"]
    body = generate_request(case.prepared, replace(case.options, dtype="bfloat16"))
    for key in ("kwargs_data", "mm_metadata"):
        for text in body["features"][key]["video"]:
            assert torch_name(decode_item(text)["second_per_grid_ts"].data) == "bfloat16"
    for text in body["features"]["kwargs_data"]["video"]:
        assert torch_name(decode_item(text)["pixel_values_videos"].data) == "bfloat16"
    (item,) = kwargs_items(build_case("qwen3_vl_video").media, "qwen3_vl", 2, dtype="bfloat16")
    assert item["timestamps"].data == [0.25, 1.0]


def test_a_bfloat16_tensor_is_cast_from_its_values():
    """cast reads a bfloat16 tensor's values, not its bit patterns as numbers."""
    halves = cast(np.array([1.5, -2.25], np.float32), "bfloat16")
    assert cast(halves, "bfloat16") is halves
    assert cast(halves, "float32").tolist() == cast(halves, "float16").tolist() == [1.5, -2.25]
