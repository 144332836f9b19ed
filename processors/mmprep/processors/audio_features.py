"""Gemma 4's audio features: transformers 5.24's Gemma4AudioFeatureExtractor
(models/gemma4/feature_extraction_gemma4.py) in numpy, for one waveform at a time as vLLM's
renderer runs it.

The waveform (float32, mono, at `sampling_rate`) is cut to `max_length` samples (30 s at 16
kHz), padded with zeros to a multiple of `pad_to_multiple_of` (the extractor's "longest"
padding of a batch of one), and left-padded by half a frame; frames of `frame_length` + 1
samples every `hop_length` (the last sample dropped, or used by pre-emphasis), each times a
periodic Hann window, |rfft| over `fft_length`, times an HTK mel filter bank (no norm), plus
`mel_floor`, log; the frames whose last sample is padding are zeroed and masked out. Each
step is transformers' own numpy code, in its order and dtypes, so the features equal its to
the bit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from .errors import ProcessorConfigError, ProcessorInputError


@dataclass(frozen=True)
class AudioFeatureConfig:
    """The feature extractor's config (processor_config.json's `feature_extractor`), its
    defaults transformers' class defaults."""

    feature_size: int = 128
    sampling_rate: int = 16000
    frame_length_ms: float = 20.0
    hop_length_ms: float = 10.0
    min_frequency: float = 0.0
    max_frequency: float = 8000.0
    preemphasis: float = 0.0
    preemphasis_htk_flavor: bool = True
    fft_overdrive: bool = False
    input_scale_factor: float = 1.0
    mel_floor: float = 1e-3
    per_bin_mean: tuple[float, ...] | None = None
    per_bin_stddev: tuple[float, ...] | None = None
    # __call__'s defaults, which neither transformers' processor nor vLLM's changes
    max_length: int = 480_000
    pad_to_multiple_of: int = 128

    @classmethod
    def from_dict(cls, config: Mapping[str, Any]) -> AudioFeatureConfig:
        """From a feature_extractor section. The saved frame_length / hop_length / fft_length
        are derived values (transformers recomputes them from the milliseconds), and dither
        adds random noise: a config with dither is refused, since no two runs would agree."""
        if config.get("dither", 0.0):
            raise ProcessorConfigError(f"dither {config['dither']} adds random noise; mmprep takes dither 0")
        kind = config.get("feature_extractor_type", "Gemma4AudioFeatureExtractor")
        if kind != "Gemma4AudioFeatureExtractor":
            raise ProcessorConfigError(f"feature extractor {kind!r}: mmprep has Gemma4AudioFeatureExtractor")
        names = {
            name for name in cls.__dataclass_fields__ if name not in ("max_length", "pad_to_multiple_of")
        }
        values = {name: config[name] for name in names if name in config and config[name] is not None}
        for name in ("per_bin_mean", "per_bin_stddev"):
            if name in values:
                values[name] = tuple(float(v) for v in values[name])
        return cls(**values)

    @property
    def frame_length(self) -> int:
        return int(round(self.sampling_rate * self.frame_length_ms / 1000.0))

    @property
    def hop_length(self) -> int:
        return int(round(self.sampling_rate * self.hop_length_ms / 1000.0))

    @property
    def fft_length(self) -> int:
        return int(2 ** math.ceil(math.log2(self.frame_length))) * (2 if self.fft_overdrive else 1)

    @cached_property
    def window(self) -> np.ndarray:
        """transformers' window_function(frame_length): a periodic Hann, as float32."""
        return np.hanning(self.frame_length + 1)[:-1].astype(np.float32)

    @cached_property
    def mel_filters(self) -> np.ndarray:
        """transformers' mel_filter_bank(fft_length // 2 + 1, feature_size, ..., norm=None,
        mel_scale="htk"): (bins, mels) float64."""
        bins = self.fft_length // 2 + 1
        mel_min = 2595.0 * np.log10(1.0 + (self.min_frequency / 700.0))
        mel_max = 2595.0 * np.log10(1.0 + (self.max_frequency / 700.0))
        mel_freqs = np.linspace(mel_min, mel_max, self.feature_size + 2)
        filter_freqs = 700.0 * (np.power(10, mel_freqs / 2595.0) - 1.0)
        fft_freqs = np.linspace(0, self.sampling_rate // 2, bins)
        filter_diff = np.diff(filter_freqs)
        slopes = np.expand_dims(filter_freqs, 0) - np.expand_dims(fft_freqs, 1)
        down_slopes = -slopes[:, :-2] / filter_diff[:-1]
        up_slopes = slopes[:, 2:] / filter_diff[1:]
        return np.maximum(np.zeros(1), np.minimum(down_slopes, up_slopes))


@dataclass(frozen=True)
class AudioConfig:
    """The audio side of a family's processor: its feature extractor's config and the
    processor's cap on an item's soft tokens (Gemma4Processor's audio_seq_length)."""

    family: str
    features: AudioFeatureConfig
    seq_length: int = 750

    @property
    def sampling_rate(self) -> int:
        """The rate a waveform must be at (vLLM's parser resamples to it)."""
        return self.features.sampling_rate

    @classmethod
    def from_processor_config(
        cls, family: str, config: Mapping[str, Any], defaults: Mapping[str, Any]
    ) -> AudioConfig:
        """From processor_config.json (its `feature_extractor` section and top-level
        `audio_seq_length`), `defaults` (the family's audio side's) for what it leaves out."""
        section = config.get("feature_extractor")
        if section is not None and not isinstance(section, Mapping):
            raise ProcessorConfigError(f"feature_extractor must be an object, got {section!r}")
        seq_length = config.get("audio_seq_length")
        if seq_length is None:
            seq_length = defaults.get("audio_seq_length", cls.seq_length)
        if isinstance(seq_length, bool) or not isinstance(seq_length, int) or seq_length < 1:
            raise ProcessorConfigError(f"audio_seq_length must be a positive integer, got {seq_length!r}")
        return cls(family, AudioFeatureConfig.from_dict(section or {}), seq_length)


def audio_tokens(num_samples: int, config: AudioFeatureConfig, seq_length: int) -> int:
    """Soft tokens of a waveform of `num_samples`: its mel frames through the encoder's two
    stride-2 convolutions, at most `seq_length` (vLLM's _compute_audio_num_tokens; transformers'
    replace_audio_token counts the same from the mask)."""
    frames = (num_samples + config.frame_length // 2 - (config.frame_length + 1)) // config.hop_length + 1
    if frames <= 0:
        return 0
    for _ in range(2):
        frames = (frames + 2 - 3) // 2 + 1
    return min(frames, seq_length)


def log_mel(waveform: np.ndarray, config: AudioFeatureConfig) -> tuple[np.ndarray, np.ndarray]:
    """One waveform's features as transformers returns them for a batch of one:
    `input_features` float32 (frames, feature_size), zero where masked, and
    `input_features_mask` bool (frames,)."""
    if not isinstance(waveform, np.ndarray) or waveform.ndim != 1:
        raise ProcessorInputError("an audio item must be a 1-D numpy waveform")
    speech = waveform[: config.max_length]
    padded_length = -(-len(speech) // config.pad_to_multiple_of) * config.pad_to_multiple_of
    # SequenceFeatureExtractor.pad: the samples as float32 (it casts float64 down), zeros after
    samples = np.zeros((1, padded_length), np.float32)
    samples[0, : len(speech)] = speech
    attention = np.zeros(padded_length, np.int32)
    attention[: len(speech)] = 1
    if config.input_scale_factor != 1.0:
        samples = samples * config.input_scale_factor
    pad_left = config.frame_length // 2
    samples = np.pad(samples, ((0, 0), (pad_left, 0)), mode="constant")
    attention = np.pad(attention, (pad_left, 0), mode="constant", constant_values=0)
    size = config.frame_length + 1
    count = (samples.shape[1] - size) // config.hop_length + 1
    if count <= 0:
        return np.zeros((0, config.feature_size), np.float32), np.zeros(0, bool)
    unfolded = np.lib.stride_tricks.sliding_window_view(samples, size, axis=-1)[:, :: config.hop_length][
        :, :count
    ]
    if config.preemphasis > 0.0:
        if config.preemphasis_htk_flavor:
            first = unfolded[..., :1] * (1.0 - config.preemphasis)
            rest = unfolded[..., 1:-1] - config.preemphasis * unfolded[..., :-2]
            frames = np.concatenate([first, rest], axis=-1)
        else:
            frames = unfolded[..., 1:] - config.preemphasis * unfolded[..., :-1]
    else:
        frames = unfolded[..., :-1]
    frames = frames * config.window
    magnitude = np.abs(np.fft.rfft(frames, n=config.fft_length, axis=-1))
    mel = np.matmul(magnitude, config.mel_filters)
    log_spec = np.log(mel + np.array(config.mel_floor, dtype=np.float64))
    if config.per_bin_mean is not None:
        log_spec = log_spec - np.array(config.per_bin_mean).reshape(1, 1, -1)
    if config.per_bin_stddev is not None:
        log_spec = log_spec / np.array(config.per_bin_stddev).reshape(1, 1, -1)
    features = log_spec.squeeze(0).astype(np.float32)
    ends = np.arange(len(features)) * config.hop_length + size - 1
    mask = attention[ends].astype(bool)
    return features * mask[..., None], mask
