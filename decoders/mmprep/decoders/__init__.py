"""Media decoding for multimodal models: frames sampled by presentation time, right
whatever the container claims; audio as the model's mono waveform. Knows FFmpeg, libsndfile
(audio, as vLLM's loaders read it) and numpy, nothing of HTTP."""

from .audio import AudioMetadata, DecodedAudio, NoAudioStreamError, decode_audio
from .errors import (
    CorruptMediaError,
    DecodeCancelledError,
    DecodeTimeoutError,
    InvalidArgumentError,
    InvalidSamplingError,
    MediaError,
    MediaNotFoundError,
    MediaTooLargeError,
    NoVideoStreamError,
    UnsupportedCodecError,
)
from .image import DecodedImage, ImageMetadata, decode_image
from .metadata import VideoMetadata
from .sampling import VideoSampling
from .suffixes import IMAGE_SUFFIXES, VIDEO_SUFFIXES
from .video import DecodedVideo, decode_video, probe_video

__all__ = [
    "AudioMetadata",
    "DecodedAudio",
    "NoAudioStreamError",
    "decode_audio",
    "CorruptMediaError",
    "DecodeCancelledError",
    "DecodeTimeoutError",
    "DecodedImage",
    "DecodedVideo",
    "IMAGE_SUFFIXES",
    "ImageMetadata",
    "InvalidArgumentError",
    "InvalidSamplingError",
    "MediaError",
    "MediaNotFoundError",
    "MediaTooLargeError",
    "NoVideoStreamError",
    "UnsupportedCodecError",
    "VIDEO_SUFFIXES",
    "VideoMetadata",
    "VideoSampling",
    "decode_image",
    "decode_video",
    "probe_video",
]
