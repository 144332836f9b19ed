"""The registry and the facts each family gives (families/): the lookups the rest of mmprep
relies on, and the facts as the tables they replaced held them (vLLM 0.33's model files,
transformers 5's classes). What the families compute is checked against transformers and
vLLM through the processors', render's and vLLM protocol's goldens."""

from __future__ import annotations

import numpy as np
import pytest

from mmprep import families
from mmprep.families import SampledVideo
from mmprep.families.registry import _table
from mmprep.families.video import block_times


def test_the_registry_is_keyed_by_name_and_model_type():
    assert families.FAMILIES == ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "llava_onevision")
    assert {model_type: families.for_model_type(model_type).name for model_type in families.MODEL_TYPES} == {
        "qwen2_vl": "qwen2_vl",
        "qwen2_5_vl": "qwen2_5_vl",
        "qwen3_vl": "qwen3_vl",
        "qwen3_vl_moe": "qwen3_vl",
        "llava_onevision": "llava_onevision",
    }
    assert families.for_model_type("llava") is None and families.for_model_type(None) is None
    assert families.find("llava") is None and families.find(None) is None
    with pytest.raises(KeyError, match="qwen2_vl, qwen2_5_vl, qwen3_vl, llava_onevision"):
        families.get("qwen9_vl")


def test_a_folder_without_config_json_is_told_by_its_class_names():
    by_class = families.for_processor_class
    assert by_class("processor_class", "Qwen2_5_VLProcessor").name == "qwen2_5_vl"
    assert by_class("processor_class", "Qwen3VLProcessor").name == "qwen3_vl"
    assert by_class("video_processor_type", "Qwen2VLVideoProcessor").name == "qwen2_vl"
    assert by_class("video_processor_type", "Qwen3VLVideoProcessor").name == "qwen3_vl"
    assert by_class("processor_class", None) is None
    assert families.for_image_processor_type("Qwen2VLImageProcessorFast").name == "qwen2_vl"
    assert families.for_image_processor_type("SiglipImageProcessor") is None


def test_two_families_cannot_claim_one_name():
    qwen2, qwen3 = families.get("qwen2_vl"), families.get("qwen3_vl")
    with pytest.raises(RuntimeError, match="'qwen3_vl' is claimed by qwen2_vl and qwen3_vl"):
        _table([("qwen3_vl", qwen2), ("qwen3_vl", qwen3)], "model_type")


def test_vllms_facts_per_family():
    """supports_mm_device_do_normalize and video_needs_metadata in vllm 0.33.0's model files."""
    facts = {name: families.get(name) for name in families.FAMILIES}
    assert {name for name, family in facts.items() if family.device_normalizes} == {
        "qwen2_vl",
        "qwen2_5_vl",
        "qwen3_vl",
    }
    assert {name for name, family in facts.items() if family.video_metadata_in_hash} == {
        "qwen2_5_vl",
        "qwen3_vl",
    }
    assert {name: family.max_position_embeddings for name, family in facts.items()} == {
        "qwen2_vl": 32768,
        "qwen2_5_vl": 32768,
        "qwen3_vl": 128000,
        "llava_onevision": 32768,
    }


def test_only_qwen3_vl_video_ignores_the_pixel_aliases():
    takes = {
        (name, kind): families.get(name).takes_pixel_aliases(kind)
        for name in families.FAMILIES
        for kind in ("image", "video")
    }
    assert [key for key, value in takes.items() if not value] == [
        ("qwen3_vl", "video"),
        ("llava_onevision", "image"),  # a fixed size: min_pixels / max_pixels mean nothing to it
        ("llava_onevision", "video"),
    ]


def test_each_familys_extras_beside_a_videos_tensors():
    video = SampledVideo(indices=(0, 6, 12), fps=24.0, frames_indices=(0, 6, 12), total_num_frames=48)
    assert video.sampled_fps == 3 / 48 * 24
    assert families.get("qwen2_vl").vllm_video_fields(video, 2) == {}
    fields = families.get("qwen2_5_vl").vllm_video_fields(video, 2)
    assert fields["second_per_grid_ts"].dtype == np.float32 and fields["second_per_grid_ts"] == np.float32(
        2 / 1.5
    )
    assert families.get("qwen3_vl").vllm_video_fields(video, 2) == {"timestamps": [0.125, 0.5]}
    inputs = families.get("qwen2_5_vl").transformers_video_inputs([video, video], 2)
    assert inputs["second_per_grid_ts"].dtype == np.float32
    assert inputs["second_per_grid_ts"].tolist() == [np.float32(2 / 1.5)] * 2
    assert families.get("qwen3_vl").transformers_video_inputs([video], 2) == {}


def test_a_video_without_a_rate_is_taken_at_24_fps():
    video = SampledVideo(indices=(0, 1))
    assert video.source_fps == video.sampled_fps == 24.0
    assert block_times([0, 1, 2], 24.0, 2) == [1 / 48, 2 / 24]  # the last index repeated to a whole block
