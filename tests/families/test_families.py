"""The registry and the facts each family gives (families/): the lookups the rest of mmprep
relies on, and the facts as the tables they replaced held them (vLLM 0.33's model files,
transformers 5's classes). What the families compute is checked against transformers and
vLLM through the processors', render's and vLLM protocol's goldens."""

from __future__ import annotations

import numpy as np
import pytest

from mmprep import families
from mmprep.families import SampledVideo, View
from mmprep.families.registry import _table
from mmprep.families.video import block_times, qwen2_vl_picks, qwen3_vl_picks


def test_the_registry_is_keyed_by_name_and_model_type():
    assert families.FAMILIES == (
        "qwen2_vl",
        "qwen2_5_vl",
        "qwen3_vl",
        "qwen3_5",
        "llava_onevision",
        "internvl",
        "gemma4",
        "gemma3",
        "mistral3",
        "llama4",
    )
    assert {model_type: families.for_model_type(model_type).name for model_type in families.MODEL_TYPES} == {
        "qwen2_vl": "qwen2_vl",
        "qwen2_5_vl": "qwen2_5_vl",
        "qwen3_vl": "qwen3_vl",
        "qwen3_vl_moe": "qwen3_vl",
        "qwen3_5": "qwen3_5",
        "qwen3_5_moe": "qwen3_5",
        "llava_onevision": "llava_onevision",
        "internvl": "internvl",
        "gemma4": "gemma4",
        "gemma3": "gemma3",
        "mistral3": "mistral3",
        "llama4": "llama4",
    }
    assert families.for_model_type("llava") is None and families.for_model_type(None) is None
    assert families.find("llava") is None and families.find(None) is None
    with pytest.raises(
        KeyError,
        match="qwen2_vl, qwen2_5_vl, qwen3_vl, qwen3_5, llava_onevision, internvl, gemma4, gemma3, "
        "mistral3, llama4",
    ):
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
    assert by_class("processor_class", "InternVLProcessor").name == "internvl"
    assert by_class("video_processor_type", "InternVLVideoProcessor").name == "internvl"
    assert families.for_image_processor_type("GotOcr2ImageProcessorFast").name == "internvl"
    assert by_class("processor_class", "Gemma4Processor").name == "gemma4"
    assert families.for_image_processor_type("Gemma4ImageProcessor").name == "gemma4"
    assert by_class("processor_class", "Gemma3Processor").name == "gemma3"
    assert families.for_image_processor_type("Gemma3ImageProcessor").name == "gemma3"
    assert by_class("processor_class", "PixtralProcessor").name == "mistral3"
    assert families.for_image_processor_type("PixtralImageProcessorFast").name == "mistral3"
    assert by_class("processor_class", "Llama4Processor").name == "llama4"
    assert families.for_image_processor_type("Llama4ImageProcessorFast").name == "llama4"


def test_two_families_cannot_claim_one_name():
    qwen2, qwen3 = families.get("qwen2_vl"), families.get("qwen3_vl")
    with pytest.raises(RuntimeError, match="'qwen3_vl' is claimed by qwen2_vl and qwen3_vl"):
        _table([("qwen3_vl", qwen2), ("qwen3_vl", qwen3)], "model_type")


def test_vllms_facts_per_family():
    """supports_mm_device_do_normalize and video_needs_metadata in vllm 0.33.0's model files
    (interns1.py, which serves InternVL's HF form, has neither)."""
    facts = {name: families.get(name) for name in families.FAMILIES}
    assert {name for name, family in facts.items() if family.device_normalizes} == {
        "qwen2_vl",
        "qwen2_5_vl",
        "qwen3_vl",
        "qwen3_5",  # qwen3_5.py's classes are Qwen3-VL's, these two facts not overridden
        "mistral3",
    }
    assert {name for name, family in facts.items() if family.video_metadata_in_hash} == {
        "qwen2_5_vl",
        "qwen3_vl",
        "qwen3_5",
        "gemma4",  # gemma4_mm.py's get_data_parser
    }
    # gemma4_mm.py runs a video's frames through Gemma4Processor's image side
    assert {name for name, family in facts.items() if family.vllm_frames_as_images} == {"gemma4"}
    assert {name: family.max_position_embeddings for name, family in facts.items()} == {
        "qwen2_vl": 32768,
        "qwen2_5_vl": 32768,
        "qwen3_vl": 128000,
        "qwen3_5": 32768,
        "llava_onevision": 32768,
        "internvl": 32768,
        "gemma4": 131072,
        "gemma3": 131072,
        "mistral3": 131072,
        "llama4": 131072,
    }
    # Gemma 3, Mistral 3 and Llama 4 take no video; every other family takes both; only
    # Gemma 4 takes audio (gemma4_mm.py, where the model has an audio tower)
    refused = {
        (name, kind) for name, family in facts.items() for kind in family.sides if not family.takes(kind)
    }
    assert refused == {("gemma3", "video"), ("mistral3", "video"), ("llama4", "video")} | {
        (name, "audio") for name in facts if name != "gemma4"
    }


def test_qwen3_vl_video_and_internvl_ignore_the_pixel_aliases():
    takes = {
        (name, kind): families.get(name).sides[kind].takes_pixel_aliases
        for name in families.FAMILIES
        for kind in ("image", "video")
    }
    assert [key for key, value in takes.items() if not value] == [
        ("qwen3_vl", "video"),
        ("qwen3_5", "video"),  # Qwen3VLVideoProcessor's too
        ("llava_onevision", "image"),  # a fixed size: min_pixels / max_pixels mean nothing to it
        ("llava_onevision", "video"),
        ("internvl", "image"),
        ("internvl", "video"),
        ("gemma4", "image"),  # sized by max_soft_tokens alone
        ("gemma4", "video"),
        ("gemma3", "image"),  # a fixed size
        ("gemma3", "video"),
        ("mistral3", "image"),  # sized by longest_edge alone
        ("mistral3", "video"),
        ("llama4", "image"),  # tiles of a fixed size
        ("llama4", "video"),
    ]


def test_each_familys_extras_beside_a_videos_tensors():
    video = SampledVideo(indices=(0, 6, 12), fps=24.0, frames_indices=(0, 6, 12), total_num_frames=48)
    assert video.sampled_fps == 3 / 48 * 24
    assert families.get("qwen2_vl").vllm_video_fields(video, 2, 0) == {}
    fields = families.get("qwen2_5_vl").vllm_video_fields(video, 2, 0)
    assert fields["second_per_grid_ts"].dtype == np.float32 and fields["second_per_grid_ts"] == np.float32(
        2 / 1.5
    )
    assert families.get("qwen3_vl").vllm_video_fields(video, 2, 0) == {"timestamps": [0.125, 0.5]}
    inputs = families.get("qwen2_5_vl").transformers_video_inputs([video, video], 2)
    assert inputs["second_per_grid_ts"].dtype == np.float32
    assert inputs["second_per_grid_ts"].tolist() == [np.float32(2 / 1.5)] * 2
    assert families.get("qwen3_vl").transformers_video_inputs([video], 2) == {}


def test_a_video_without_a_rate_is_taken_at_24_fps():
    video = SampledVideo(indices=(0, 1))
    assert video.source_fps == video.sampled_fps == 24.0
    assert block_times([0, 1, 2], 24.0, 2) == [1 / 48, 2 / 24]  # the last index repeated to a whole block


def test_internvl_tiles_and_prompt():
    """InternVL's rules as transformers states them: the grids GotOcr2's
    get_all_supported_aspect_ratios lists (its docstring's example), the canvas, the tile
    count with its thumbnail, and the tokens InternVLProcessor writes for an image and a video."""
    from mmprep.families.internvl import supported_grids, tiled_canvas
    from mmprep.processors import load_processor

    assert supported_grids(1, 4) == [(1, 1), (1, 2), (2, 1), (1, 3), (3, 1), (1, 4), (2, 2), (4, 1)]
    assert tiled_canvas(300, 800, 448, 448, 1, 12) == (5, 2)  # 2.67 is nearest 5:2
    assert tiled_canvas(448, 448, 448, 448, 1, 12) == (1, 1)  # ties favour more tiles only for larger images
    family = families.get("internvl")
    config = load_processor("OpenGVLab/InternVL3_5-1B-HF").image_config
    assert family.image_size(config, 300, 800) == (896, 2240)
    # the canvas's ten tiles and the thumbnail; one tile alone has none
    assert family.image_views(config, 300, 800) == [
        View((896, 2240), (896, 2240), tile=(448, 448)),
        View((448, 448), (448, 448)),
    ]
    assert family.image.tile_tokens(config, 1, 300, 800) == 11 * 256
    assert family.image_views(config, 448, 448) == [View((448, 448), (448, 448), tile=(448, 448))]
    assert family.image.tile_tokens(config, 1, 448, 448) == 256
    ids = {"image_token_id": 9, "video_token_id": 8, "start_image_token_id": 1, "end_image_token_id": 2}
    assert family.image.item_tokens((3,), config, ids, None, list) == [1] + [9] * 768 + [2]

    def encode(text):
        return [ord(char) for char in text]

    video = family.video.item_tokens((2,), config, ids, SampledVideo(indices=(0, 5)), encode)
    frame = [1] + [9] * 256 + [2]
    assert video == encode("Frame1: ") + frame + encode("\nFrame2: ") + frame
    assert family.video.vllm_shared_fields(ids) == {"video_token_id": 8}


def test_internvl_config_keys_are_read_and_bad_ones_refused():
    """Its extra keys reach the rules (ProcessorConfig.option), a tile's size is a height and
    a width, and a setting that is not a plain value is a ProcessorConfigError naming it."""
    from mmprep.processors import ProcessorConfigError, load_processor

    config = load_processor("internvl", max_patches=4, size={"height": 56, "width": 28}).image_config
    assert config.option("max_patches") == 4 and config.option("min_patches") == 1
    assert config.fixed_size == (56, 28) and config.min_pixels == config.max_pixels == 56 * 28
    with pytest.raises(ProcessorConfigError, match="size must give a tile's height and width"):
        load_processor("internvl", size={"shortest_edge": 448})
    with pytest.raises(ProcessorConfigError, match="max_patches must be a number"):
        load_processor("internvl", max_patches=[4])


# (frames, source fps, fps asked) -> what vLLM 0.33's Qwen2VLVideoBackend and Qwen3VLVideoBackend
# .compute_frames_index_to_sample answered (num_frames=32 asked too: both ignore it)
VLLM_PICKS = [
    ((32, 8.0, 2), [0, 4, 8, 12, 16, 20, 24, 28], [0, 4, 9, 13, 18, 22, 27, 31]),
    ((48, 24.0, 2), [0, 12, 24, 36], [0, 16, 31, 47]),
    ((10, 25.0, 2), [0, 2, 5, 7], [0, 3, 6, 9]),
    ((75, 25.0, 2), [0, 12, 25, 37, 50, 62], [0, 15, 30, 44, 59, 74]),
    ((451, 30.0, 2), list(range(0, 436, 15)), 30),
    ((1800, 30.0, 2), list(range(0, 1786, 15)), 120),
    ((120, 2.0, 2), list(range(120)), list(range(120))),
]


@pytest.mark.parametrize("video, qwen2, qwen3", VLLM_PICKS, ids=[str(case[0]) for case in VLLM_PICKS])
def test_the_qwen_vl_families_take_the_frames_vllms_loaders_take(video, qwen2, qwen3):
    total, source_fps, fps = video
    assert qwen2_vl_picks(total, total / source_fps, fps, 768) == qwen2
    asked = families.FramesAsked(fps, None, 768, 2.0)
    assert families.get("qwen2_vl").vllm_frame_picks(total, total / source_fps, asked) == qwen2
    assert families.get("qwen2_5_vl").vllm_frame_picks(total, total / source_fps, asked) == qwen2
    ours3 = families.get("qwen3_vl").vllm_frame_picks(total, total / source_fps, asked)
    assert (len(ours3) if isinstance(qwen3, int) else ours3) == qwen3
    assert ours3 == qwen3_vl_picks(total, total / source_fps, fps, 768)


def test_the_server_caps_bound_vllms_count_and_other_families_take_the_plain_loaders():
    assert qwen2_vl_picks(1800, 60.0, 2, 32) == [int(k * 56.25) for k in range(32)]  # spread over it all
    assert len(qwen3_vl_picks(1800, 60.0, 2, 32)) == 32
    assert qwen2_vl_picks(1, 0.04, 2, 768) == [0]  # less than a block (vLLM divides by zero)
    # vLLM's plain VideoBackend: its 32 frames where nothing is asked, linspace truncated;
    # num_frames as asked, at most duration * fps (index-based)
    nothing = families.FramesAsked(None, None, 768, 2.0)
    for family in ("llava_onevision", "internvl", "gemma4"):
        assert families.get(family).vllm_frame_picks(48, 2.0, nothing) == [
            int(k * 47 / 31) for k in range(32)
        ]
    assert families.get("internvl").vllm_frame_picks(20, 2.0, nothing) == list(range(20))
    assert families.get("gemma4").vllm_frame_picks(48, 2.0, families.FramesAsked(2.0, None, 768, 2.0)) == [
        0,
        15,
        31,
        47,
    ]
    assert families.get("gemma4").vllm_frame_picks(48, 2.0, families.FramesAsked(None, 3, 768, 2.0)) == [
        0,
        23,
        47,
    ]


def test_the_qwen2_vl_picks_are_torchs_float32_arange():
    """vLLM's indices are torch.arange(0, total, total / n).int(), clamped, n its count (the
    rule restated): the same, for many sizes, where float32 rounding decides."""
    torch = pytest.importorskip("torch")
    for total in range(2, 2000, 7):
        for seconds_per_frame in (1 / 24, 1 / 30, 1001 / 30000, 1 / 8, 0.5):
            duration = total * seconds_per_frame
            most = min(768, total) // 2 * 2
            count = int(min(max(duration * 2, 4), most, total) // 2 * 2)
            expected = torch.arange(0, total, total / count).int().clamp(max=total - 1).tolist()
            assert qwen2_vl_picks(total, duration, 2, 768) == expected, (total, seconds_per_frame)
