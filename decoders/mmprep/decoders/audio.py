"""decode_audio: an audio file as a float32 mono waveform at the rate a model's feature
extractor takes, with PyAV, as vLLM 0.33 makes it for the processor.

vLLM 0.33 (vllm/multimodal/media/audio.py, parse.py, audio.py) does it in two steps:
- AudioMediaIO loads at the file's own rate (`sr=None`) with torchcodec, else soundfile, else
  PyAV: float32 samples, integer PCM scaled by 1/2**(bits-1) as all three scale it, then the
  channels' mean (`np.mean(audio, axis=0)` over (channels, samples)). Here: libsndfile's
  samples where the `soundfile` package is installed and reads the format, as vLLM's loaders
  take them (vllm[audio] installs soundfile), else FFmpeg's (PyAV);
- the model's data parser resamples to the feature extractor's rate with its AudioResampler,
  whose default method is torchaudio's `Resample` (Hann-windowed sinc, 6 zero crossings, roll
  off 0.99, a float32 kernel computed in float64): `sinc_resample` below, in numpy.
The waveform here equals the loaders' to the bit at the file's own rate (the same FFmpeg
decoders and the same scaling and mean), and torchaudio's resampling to float32 rounding
(numpy and torch's conv1d sum the kernel's products in different orders).
"""

from __future__ import annotations

import io
import math
import os
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import av
import numpy as np

from .errors import (
    CorruptMediaError,
    InvalidArgumentError,
    MediaError,
    MediaNotFoundError,
    MediaTooLargeError,
)
from .sniff import HEAD_BYTES, describe_bytes

if TYPE_CHECKING:
    from .source import Source

# vLLM's VLLM_MAX_AUDIO_DECODE_DURATION_S default: longer audio is refused, not cut.
DEFAULT_MAX_DURATION = 600.0
# torchaudio's Resample defaults, which vLLM's AudioResampler keeps
LOWPASS_FILTER_WIDTH = 6
ROLLOFF = 0.99
# libsndfile's errors on which vLLM's loaders hand the file to PyAV (vllm/multimodal/media/
# audio.py _BAD_SF_CODES): a lost error, a format it does not know, a malformed file, an
# encoding its build lacks
LIBSNDFILE_DEFERS = frozenset({0, 1, 3, 4})
# FFmpeg's integer sample formats and the scale that makes them [-1, 1) floats, as libsndfile,
# torchcodec (through libswresample) and FFmpeg's own s16 -> flt conversion scale them
_INTEGER_SCALE = {"u8": 2.0**7, "s16": 2.0**15, "s32": 2.0**31, "s64": 2.0**63}


class NoAudioStreamError(MediaError):
    code = "no_audio_stream"


@dataclass(frozen=True)
class AudioMetadata:
    sample_rate: int  # the file's own rate
    channels: int
    num_samples: int  # per channel, at the file's own rate
    duration: float  # num_samples / sample_rate
    codec: str
    container: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class DecodedAudio:
    waveform: np.ndarray  # float32 (N,), mono, at `sampling_rate`
    sampling_rate: int
    metadata: AudioMetadata


def decode_audio(
    source: Source, sampling_rate: int | None = None, max_duration: float | None = DEFAULT_MAX_DURATION
) -> DecodedAudio:
    """Decode `source` (bytes, a path or a binary file): its best audio stream, every channel,
    their mean, resampled to `sampling_rate` (None: the file's own rate).

    Audio longer than `max_duration` seconds is refused (MediaTooLargeError naming the limit),
    by the header where it says so and by the samples decoded in any case. Raises
    CorruptMediaError for data FFmpeg cannot decode, NoAudioStreamError for a file without
    audio, MediaNotFoundError for a missing path; InvalidArgumentError for a limit or rate
    that makes no sense."""
    if sampling_rate is not None and (not isinstance(sampling_rate, int) or sampling_rate < 1):
        raise InvalidArgumentError(f"sampling_rate must be a positive integer, got {sampling_rate!r}")
    if max_duration is not None and not max_duration > 0:
        raise InvalidArgumentError(f"max_duration must be positive, got {max_duration!r}")
    samples, metadata = _decode(source, max_duration)
    waveform = np.mean(samples, axis=0) if len(samples) > 1 else samples[0]
    if sampling_rate is not None and sampling_rate != metadata.sample_rate:
        waveform = sinc_resample(waveform, metadata.sample_rate, sampling_rate)
    return DecodedAudio(
        np.ascontiguousarray(waveform, np.float32), sampling_rate or metadata.sample_rate, metadata
    )


def _decode(source: Source, max_duration: float | None) -> tuple[np.ndarray, AudioMetadata]:
    """Every channel's float32 samples, (channels, samples), at the file's own rate."""
    try:
        container = av.open(_file_of(source))
    except FileNotFoundError as error:
        raise MediaNotFoundError(f"no such file: {error.filename}") from error
    except (av.FFmpegError, EOFError, UnicodeDecodeError) as error:
        raise CorruptMediaError(_unreadable(source, error)) from error
    with container:
        if not container.streams.audio:
            raise NoAudioStreamError("the file has no audio stream")
        stream = container.streams.audio[0]
        rate = stream.rate or stream.codec_context.sample_rate
        if not rate:
            raise CorruptMediaError("the audio stream has no sample rate")
        _check_header_duration(stream, container, max_duration)
        codec, name = stream.codec_context.name, container.format.name
        # vLLM's loaders take libsndfile's samples where it reads the format: so does mmprep
        read = _libsndfile_samples(source, max_duration)
        if read is not None:
            samples, own_rate = read
            frames = samples.shape[1]
            return samples, AudioMetadata(own_rate, samples.shape[0], frames, frames / own_rate, codec, name)
        limit = None if max_duration is None else int(rate * max_duration)
        chunks: list[np.ndarray] = []
        total = 0
        try:
            for frame in container.decode(stream):
                chunk = _float_planes(frame)
                chunks.append(chunk)
                total += chunk.shape[1]
                if limit is not None and total > limit:
                    raise MediaTooLargeError(
                        f"the audio lasts more than the limit of {max_duration:g} s "
                        f"({total} samples at {rate} Hz decoded so far)"
                    )
        except (av.FFmpegError, EOFError, ValueError) as error:
            raise CorruptMediaError(f"FFmpeg cannot decode this audio: {error}") from error
    if not chunks or total == 0:
        raise CorruptMediaError("the audio stream holds no samples")
    channels = max(chunk.shape[0] for chunk in chunks)
    if any(chunk.shape[0] != channels for chunk in chunks):
        raise CorruptMediaError("the audio's channel count changes midway")
    samples = np.concatenate(chunks, axis=1)
    metadata = AudioMetadata(rate, channels, total, total / rate, codec, name)
    return samples, metadata


def _libsndfile_samples(source: Source, max_duration: float | None) -> tuple[np.ndarray, int] | None:
    """(channels, samples) float32 as vLLM's load_audio_soundfile reads them, and the rate,
    where the `soundfile` package is installed and libsndfile reads the format (WAV, FLAC,
    Ogg/Vorbis, Opus, MP3); None otherwise, for FFmpeg to decode, as vLLM's loaders fall back
    to PyAV on the same libsndfile errors. Its MP3 (mpg123) and Vorbis (libvorbis) samples
    differ from FFmpeg's in their last bits: taking them keeps the features and hashes vLLM's.
    Bytes and paths only: a caller's open file is PyAV's alone, mid-read."""
    if not isinstance(source, (bytes, bytearray, memoryview, str, os.PathLike)):
        return None
    try:
        import soundfile
    except (ImportError, OSError):  # not installed, or no libsndfile: FFmpeg decodes everything
        return None
    file = _file_of(source)
    try:
        with soundfile.SoundFile(file) as opened:
            if max_duration is not None and opened.frames / opened.samplerate > max_duration:
                raise MediaTooLargeError(
                    f"the audio lasts {opened.frames / opened.samplerate:.1f} s, more than the limit of "
                    f"{max_duration:g} s"
                )
            samples = opened.read(dtype="float32", always_2d=True).T
            rate = opened.samplerate
    except soundfile.LibsndfileError as error:
        if error.code in LIBSNDFILE_DEFERS:
            return None
        raise CorruptMediaError(f"libsndfile cannot decode this audio: {error}") from error
    if samples.shape[1] == 0:
        return None  # FFmpeg says what is wrong
    return samples, rate


def _float_planes(frame: av.AudioFrame) -> np.ndarray:
    """One decoded frame as float32 (channels, samples), integer PCM scaled to [-1, 1)."""
    array = frame.to_ndarray()
    channels = len(frame.layout.channels)
    if not frame.format.is_planar:  # interleaved: (1, samples * channels)
        array = array.reshape(-1, channels).T
    name = frame.format.name.rstrip("p")
    if name in _INTEGER_SCALE:
        offset = 128.0 if name == "u8" else 0.0
        return ((array.astype(np.float64) - offset) / _INTEGER_SCALE[name]).astype(np.float32)
    return array.astype(np.float32)


def _check_header_duration(stream: Any, container: Any, max_duration: float | None) -> None:
    """Refuse before decoding where the header already says the audio is too long."""
    if max_duration is None:
        return
    if stream.duration and stream.time_base:
        claimed = float(stream.duration * stream.time_base)
    elif container.duration:
        claimed = container.duration / 1_000_000
    else:
        return
    if claimed > max_duration:
        raise MediaTooLargeError(
            f"the audio lasts {claimed:.1f} s, more than the limit of {max_duration:g} s"
        )


def _file_of(source: Source) -> Any:
    if isinstance(source, (bytes, bytearray, memoryview)):
        return io.BytesIO(bytes(source))
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    return source


def _unreadable(source: Source, error: BaseException) -> str:
    """Why FFmpeg cannot open `source`, naming what it is where the bytes say."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        described = describe_bytes(bytes(source[:HEAD_BYTES]))
        if described is not None:
            return f"this is {described}, not an audio file"
    return f"FFmpeg cannot read this as an audio file (WAV, FLAC, MP3, Ogg, Opus, M4A...): {error}"


def sinc_resample(waveform: np.ndarray, orig_rate: int, new_rate: int) -> np.ndarray:
    """`waveform` (float32, 1-D) from `orig_rate` to `new_rate` as torchaudio's
    transforms.Resample(orig_rate, new_rate) does it: per output phase a Hann-windowed sinc
    kernel, the signal zero-padded by the kernel's width, ceil(n * new / orig) samples kept."""
    gcd = math.gcd(orig_rate, new_rate)
    orig, new = orig_rate // gcd, new_rate // gcd
    kernel, width = _sinc_kernel(orig, new)
    length = len(waveform)
    padded = np.pad(np.asarray(waveform, np.float32), (width, width + orig))
    windows = np.lib.stride_tricks.sliding_window_view(padded, kernel.shape[1])[::orig]
    resampled: np.ndarray = (windows @ kernel.T).reshape(-1)
    return resampled[: math.ceil(new * length / orig)]


@lru_cache(maxsize=32)
def _sinc_kernel(orig: int, new: int) -> tuple[np.ndarray, int]:
    """torchaudio's _get_sinc_resample_kernel for the reduced rates: (new, 2 * width + orig)
    float32, and the width. Its phase offsets are float32 (torch divides an int64 arange in
    the default dtype), the rest float64, as torchaudio computes them."""
    base = min(orig, new) * ROLLOFF
    width = math.ceil(LOWPASS_FILTER_WIDTH * orig / base)
    index = np.arange(-width, width + orig, dtype=np.float64)[None, :] / orig
    phase = (np.arange(0, -new, -1).astype(np.float32) / np.float32(new)).astype(np.float64)
    t = (phase[:, None] + index) * base
    t = np.clip(t, -LOWPASS_FILTER_WIDTH, LOWPASS_FILTER_WIDTH)
    window = np.cos(t * math.pi / LOWPASS_FILTER_WIDTH / 2) ** 2
    t = t * math.pi
    with np.errstate(divide="ignore", invalid="ignore"):
        kernel = np.where(t == 0, 1.0, np.sin(t) / t)
    kernel = kernel * (window * (base / orig))
    return kernel.astype(np.float32), width
