"""decode_audio: every common audio format to a float32 mono waveform at the model's rate,
as vLLM 0.33 makes it (its loaders' scaling and channel mean, torchaudio's resampling), with
clear errors for what it cannot or will not decode."""

from pathlib import Path

import numpy as np
import pytest

from mmprep.decoders import CorruptMediaError, MediaNotFoundError, MediaTooLargeError
from mmprep.decoders.audio import NoAudioStreamError, decode_audio, sinc_resample
from tests.support.audio import FORMATS, RESAMPLE_PAIRS, encode_audio, resample_input, tone
from tests.support.media import MEDIA

GOLDEN = Path(__file__).parents[1] / "data" / "audio" / "torchaudio_resample.npz"


def channels_of(fmt: str) -> int:
    return 2 if fmt == "ogg" else 1  # FFmpeg's own Vorbis encoder writes stereo only


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_each_format_decodes_to_the_tone_at_16k(fmt):
    rate = 48000 if fmt == "opus" else 44100
    data = encode_audio(tone(0.5, rate, channels_of(fmt)), rate, fmt)
    audio = decode_audio(data, 16000)
    assert audio.sampling_rate == 16000 and audio.waveform.dtype == np.float32 and audio.waveform.ndim == 1
    assert audio.metadata.sample_rate == rate and audio.metadata.channels == channels_of(fmt)
    # ceil(n * 16000 / rate) samples, as torchaudio keeps; lossy codecs may pad a frame
    assert len(audio.waveform) == -(-audio.metadata.num_samples * 16000 // rate)
    assert 0.49 <= audio.metadata.duration <= 0.53
    # the 440 Hz tone is the strongest frequency of what came out
    spectrum = np.abs(np.fft.rfft(audio.waveform[:8000]))
    assert abs(np.argmax(spectrum) * 16000 / 8000 - 440) <= 2


def test_wav_samples_are_the_pcm_over_32768_to_the_bit():
    """What soundfile and torchcodec (vLLM's first loaders) give for 16-bit PCM."""
    pcm = (np.random.default_rng(0).integers(-(2**15), 2**15, (1, 4000))).astype(np.int16)
    data = encode_audio(pcm.astype(np.float32) / 2**15, 16000, "wav")
    audio = decode_audio(data, 16000)
    np.testing.assert_array_equal(audio.waveform, pcm[0].astype(np.float32) / 2**15)


def test_stereo_is_the_mean_of_the_channels_as_numpy_takes_it():
    samples = tone(0.25, 16000, 2)
    audio = decode_audio(encode_audio(samples, 16000, "flac"), 16000)
    pcm = (np.clip(samples, -1, 1 - 2**-15) * 2**15).astype(np.int16).astype(np.float32) / 2**15
    np.testing.assert_array_equal(audio.waveform, np.mean(pcm, axis=0))


def test_native_rate_is_kept_without_a_rate():
    audio = decode_audio(encode_audio(tone(0.1, 22050), 22050, "wav"))
    assert audio.sampling_rate == 22050 and len(audio.waveform) == 2205


@pytest.mark.parametrize(("orig", "new"), RESAMPLE_PAIRS)
def test_resampling_is_torchaudios_to_float32_rounding(orig, new):
    """vLLM 0.33's AudioResampler default: torchaudio's Resample (recorded by
    scripts/record_resample_golden.py); the kernel is the same float32 numbers, the sums
    differ in order only."""
    expected = np.load(GOLDEN)[f"{orig}_{new}"]
    got = sinc_resample(resample_input(orig), orig, new)
    assert got.shape == expected.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=0, atol=2.5e-7)


def test_too_long_is_refused_naming_the_limit():
    data = encode_audio(tone(2.0, 8000), 8000, "wav")
    with pytest.raises(MediaTooLargeError, match="limit of 1 s"):
        decode_audio(data, 16000, max_duration=1.0)
    assert len(decode_audio(data, 16000, max_duration=2.0).waveform) == 32000


def test_too_long_without_a_header_duration_is_refused_while_decoding():
    data = encode_audio(tone(2.0, 8000), 8000, "mp3")  # a raw MP3 stream: no duration in its header
    with pytest.raises(MediaTooLargeError, match="limit of 1 s"):
        decode_audio(data, max_duration=1.0)


def test_damaged_data_is_corrupt_media():
    data = encode_audio(tone(0.5, 16000), 16000, "flac")
    with pytest.raises(CorruptMediaError):
        decode_audio(data[:60] + bytes(range(256)) * 4)
    with pytest.raises(CorruptMediaError, match="an HTML page, not an audio file"):
        decode_audio(b"<!doctype html><html><body>not found</body></html>")
    with pytest.raises(CorruptMediaError, match="audio file"):
        decode_audio(bytes(range(256)) * 8)


def test_a_video_without_audio_and_a_missing_file():
    with pytest.raises(NoAudioStreamError, match="no audio stream"):
        decode_audio((MEDIA / "vp8.webm").read_bytes())
    with pytest.raises(MediaNotFoundError):
        decode_audio("/nonexistent/clip.wav")


def test_the_audio_of_a_video_file():
    audio = decode_audio((MEDIA / "audio_only_opus.webm").read_bytes(), 16000)
    assert audio.metadata.codec == "opus" and len(audio.waveform) > 0


@pytest.mark.parametrize("fmt", ["mp3", "ogg", "flac", "wav", "opus"])
def test_where_libsndfile_reads_the_format_its_samples_are_taken(fmt):
    """vLLM's loaders take soundfile's samples first: MP3 (mpg123) and Vorbis (libvorbis)
    differ from FFmpeg's in their last bits, so mmprep takes them too."""
    soundfile = pytest.importorskip("soundfile")
    import io

    rate = 48000 if fmt == "opus" else 44100
    data = encode_audio(tone(0.5, rate, channels_of(fmt)), rate, fmt)
    expected = soundfile.read(io.BytesIO(data), dtype="float32", always_2d=False)[0].T
    if expected.ndim > 1:
        expected = np.mean(expected, axis=0)
    audio = decode_audio(data)
    np.testing.assert_array_equal(audio.waveform, expected)
    assert audio.metadata.num_samples == len(expected)
