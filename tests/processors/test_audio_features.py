"""Gemma 4's audio features (processors/mmprep/processors/audio_features.py) against
transformers 5.24's Gemma4AudioFeatureExtractor, to the bit, and the soft-token count against
its processor's mask arithmetic."""

import json

import numpy as np
import pytest

from mmprep.processors import PRESETS
from mmprep.processors.audio_features import AudioFeatureConfig, audio_tokens, log_mel

transformers = pytest.importorskip("transformers")
from transformers.models.gemma4.feature_extraction_gemma4 import Gemma4AudioFeatureExtractor  # noqa: E402

SECTION = json.loads((PRESETS / "gemma4" / "processor_config.json").read_text())["feature_extractor"]


def waveform(samples: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(samples) / 16000
    return (0.3 * np.sin(2 * np.pi * 440 * t) + 0.05 * rng.standard_normal(samples)).astype(np.float32)


@pytest.mark.parametrize("samples", [321, 1000, 16000, 16127, 16128, 40_001, 480_000, 500_000])
def test_features_equal_transformers_to_the_bit(samples):
    reference = Gemma4AudioFeatureExtractor(**SECTION)
    expected = reference([waveform(samples)], return_tensors="np")
    features, mask = log_mel(waveform(samples), AudioFeatureConfig.from_dict(SECTION))
    assert features.dtype == np.float32 and features.shape == expected["input_features"][0].shape
    np.testing.assert_array_equal(features, expected["input_features"][0])
    np.testing.assert_array_equal(mask, expected["input_features_mask"][0])


@pytest.mark.parametrize(
    "options",
    [
        {"preemphasis": 0.97},
        {"preemphasis": 0.97, "preemphasis_htk_flavor": False},
        {
            "per_bin_mean": [0.1] * 128,
            "per_bin_stddev": [2.0] * 128,
            "input_scale_factor": 0.5,
            "fft_overdrive": True,
        },
    ],
)
def test_the_other_options_equal_transformers(options):
    section = SECTION | options
    expected = Gemma4AudioFeatureExtractor(**section)([waveform(20_000, 1)], return_tensors="np")
    features, mask = log_mel(waveform(20_000, 1), AudioFeatureConfig.from_dict(section))
    np.testing.assert_array_equal(features, expected["input_features"][0])
    np.testing.assert_array_equal(mask, expected["input_features_mask"][0])


@pytest.mark.parametrize(
    "samples", [0, 100, 320, 321, 480, 481, 16000, 16160, 160_000, 479_999, 480_000, 960_000]
)
def test_token_count_is_the_processors(samples):
    """transformers' replace_audio_token: the mask through two stride-2 convolutions."""
    config = AudioFeatureConfig.from_dict(SECTION)
    _, mask = log_mel(np.zeros(samples, np.float32), config)
    for _ in range(2):
        mask = mask[::2][: (len(mask) + 2 - 3) // 2 + 1]
    assert audio_tokens(samples, config, 750) == min(int(mask.sum()), 750)


def test_dither_is_refused():
    with pytest.raises(ValueError, match="dither"):
        AudioFeatureConfig.from_dict(SECTION | {"dither": 1e-4})
