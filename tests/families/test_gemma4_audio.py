"""Gemma 4's audio side against transformers 5.24's Gemma4Processor, on the preset with an
audio tower (gemma4_e4b): the placeholder ids of prompts with audio (and text, and an image)
and the audio's features, and vLLM's token count."""

import json
from dataclasses import replace

import numpy as np
import pytest

from mmprep.families.gemma4 import FAMILY
from mmprep.model import ModelFolder
from mmprep.processors.audio_features import AudioFeatureConfig, log_mel
from mmprep.vllm.serde import decode_item
from tests.support.model_folder import make_model_folder

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_model_folder("gemma4_e4b", tmp_path_factory.mktemp("gemma4_e4b"))


@pytest.fixture(scope="module")
def reference(folder):
    for module in ("torch", "torchvision"):  # Gemma 4's processor loads its video processor too
        pytest.importorskip(module, reason="transformers' Gemma 4 processor needs torch, torchvision")
    return transformers.AutoProcessor.from_pretrained(folder)


def waveform(seconds: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (0.1 * rng.standard_normal(round(seconds * 16000))).astype(np.float32)


def test_the_preset_has_an_audio_tower_and_the_31b_none(folder):
    assert json.loads((folder / "config.json").read_text())["audio_config"]["model_type"] == "gemma4_audio"
    config = transformers.AutoConfig.from_pretrained(folder)
    assert config.audio_config is not None
    assert ModelFolder.load(folder).vision_token_ids["audio_token_id"] == 258881


@pytest.mark.parametrize("seconds", [0.05, 1.0, 2.345, 7.0, 31.0])
def test_audio_ids_and_features_equal_transformers(folder, reference, seconds):
    audio = waveform(seconds)
    prompt = "Transcribe <|audio|> please, then describe <|image|>."
    image = np.full((64, 96, 3), 120, np.uint8)
    expected = reference(text=[prompt], audio=[audio], images=[image], return_tensors="np")
    model = ModelFolder.load(folder)
    ids = model.vision_token_ids
    config = AudioFeatureConfig.from_dict(
        json.loads((folder / "processor_config.json").read_text())["feature_extractor"]
    )
    features, mask = log_mel(audio, config)
    np.testing.assert_array_equal(features, expected["input_features"][0])
    np.testing.assert_array_equal(mask, expected["input_features_mask"][0])
    side = FAMILY.audio
    grid = side.item_grid({"input_features_mask": mask[None]})
    tokens = side.item_tokens(grid, _Config(), ids, None, lambda text: [])
    # transformers' ids hold the audio run between <|audio> and <audio|>, exactly ours
    got = expected["input_ids"][0].tolist()
    start = got.index(ids["boa_token_id"])
    assert got[start : start + len(tokens)] == tokens
    assert got[start + len(tokens) - 1] == ids["eoa_token_id"]
    # vLLM's count from the waveform's length (gemma4_mm.py _compute_audio_num_tokens)
    assert side.audio_tokens(len(audio), 750) == len(tokens) - 2


def test_every_other_family_takes_no_audio():
    from mmprep import families

    assert [name for name in families.FAMILIES if families.get(name).takes("audio")] == ["gemma4"]


class _Config:
    """The audio side's one option: Gemma4Processor's audio_seq_length."""

    def option(self, name):
        return {"audio_seq_length": 750}[name]


def test_a_mixed_requests_metadata_is_vllms_and_lists_every_modality(folder):
    """An image, a video and two audios in one request: on the render route each item's
    mm_metadata is what vLLM's render writes (the video's keep-on-CPU counts and stamps, null
    for an image or an audio, which keep nothing there), but every modality is listed, which
    vLLM's MultiModalFeatures insists on (its own render lists the video alone, and its check
    refuses that: tests/vllm_real/test_real_vllm_mixed.py); for the generate endpoint (the
    video's frames as image items) nothing keeps anything: null."""
    from mmprep.vllm.request import generate_request
    from tests.vllm_real.real_vllm import MEDIA_CASES, audio_engine_cases, prepared_in_process

    parts = [
        {"type": "image_url", "image_url": {"url": MEDIA_CASES["png"][1]}},
        {"type": "video_url", "video_url": {"url": MEDIA_CASES["vp9"][1]}},
        *next(iter(audio_engine_cases().values())),
        {"type": "text", "text": "Describe them."},
    ]
    body = {"model": "m", "messages": [{"role": "user", "content": parts}]}
    prepared, options = prepared_in_process(folder, body, None, "m")
    rendered = generate_request(prepared, replace(options, for_generate=False))["features"]
    assert {modality: len(hashes) for modality, hashes in rendered["mm_hashes"].items()} == {
        "image": 1,
        "video": 1,
        "audio": 2,
    }
    metadata = rendered["mm_metadata"]
    assert metadata["image"] == [None] and metadata["audio"] == [None, None]
    (video,) = metadata["video"]
    assert decode_item(video).keys() == {"video_frame_counts", "video_num_soft_tokens", "video_timestamps"}
    sent = generate_request(prepared, options)["features"]
    assert set(sent["mm_hashes"]) == {"image", "audio"} and sent["mm_metadata"] is None
