"""Audio files made on the spot with PyAV, a few KB each, for the tests and the live checks:
a tone at a known frequency in any of the formats mmprep decodes, so what comes out can be
told from what went in."""

from __future__ import annotations

import io
from typing import cast

import av
import numpy as np
from av.audio.stream import AudioStream

# format name -> (container, codec, the encoder's sample format)
FORMATS = {
    "wav": ("wav", "pcm_s16le", "s16"),
    "flac": ("flac", "flac", "s16"),
    "mp3": ("mp3", "libmp3lame", "fltp"),
    "ogg": ("ogg", "vorbis", "fltp"),  # FFmpeg's own Vorbis encoder: stereo only
    "opus": ("ogg", "libopus", "s16"),
    "m4a": ("ipod", "aac", "fltp"),
}

# The rate pairs tests/data/audio/torchaudio_resample.npz holds torchaudio's answer for
# (scripts/record_resample_golden.py), each from resample_input(orig)
RESAMPLE_PAIRS = (
    (44100, 16000),
    (48000, 16000),
    (22050, 16000),
    (8000, 16000),
    (11025, 16000),
    (32000, 16000),
)


def resample_input(rate: int) -> np.ndarray:
    """50 ms of two tones and a little noise, float32: what each recorded pair resamples."""
    t = np.arange(rate // 20) / rate
    noise = np.random.default_rng(rate).standard_normal(len(t)) * 0.01
    return (0.4 * np.sin(2 * np.pi * 440 * t) + 0.2 * np.sin(2 * np.pi * 5000 * t) + noise).astype(np.float32)


def tone(seconds: float, rate: int, channels: int = 1, frequency: float = 440.0) -> np.ndarray:
    """float32 (channels, samples): a sine at `frequency`, the second channel (if any) at half
    the amplitude and twice the frequency, so a channel mix shows."""
    t = np.arange(round(seconds * rate)) / rate
    planes = [0.5 * np.sin(2 * np.pi * frequency * (k + 1) * t) / (k + 1) for k in range(channels)]
    return np.stack(planes).astype(np.float32)


def encode_audio(samples: np.ndarray, rate: int, fmt: str = "wav") -> bytes:
    """`samples` float32 (channels, samples) in [-1, 1) as a file of format `fmt` (FORMATS)."""
    container_name, codec, sample_format = FORMATS[fmt]
    channels = samples.shape[0]
    layout = "mono" if channels == 1 else "stereo"
    buffer = io.BytesIO()
    with av.open(buffer, "w", format=container_name) as container:
        stream = cast(AudioStream, container.add_stream(codec, rate=rate, layout=layout))
        if codec == "vorbis":
            stream.codec_context.options = {"strict": "-2"}
        frame_size = stream.codec_context.frame_size or 1024
        pcm = (
            (np.clip(samples, -1, 1 - 2**-15) * 2**15).astype(np.int16) if sample_format == "s16" else samples
        )
        for start in range(0, pcm.shape[1], frame_size):
            chunk = np.ascontiguousarray(pcm[:, start : start + frame_size])
            if sample_format == "s16":
                frame = av.AudioFrame.from_ndarray(chunk.T.reshape(1, -1), format="s16", layout=layout)
            else:
                frame = av.AudioFrame.from_ndarray(chunk, format=sample_format, layout=layout)
            frame.sample_rate = rate
            frame.pts = start
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return buffer.getvalue()
