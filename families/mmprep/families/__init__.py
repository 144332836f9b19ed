"""The model families mmprep knows, one module each, behind one registry keyed by name and
by config.json's `model_type`: what differs between families (token names, processor
defaults and sizing, prompt expansion, the engines' tensors, vLLM's facts) lives here and
nowhere else; what differs by modality within a family is one `Side` per modality
(`family.sides[modality]`). Knows numpy, nothing else of mmprep's: the processors and the
service use it."""

from .base import AudioSide, Family, ImageSide, Kind, NoAudioSide, Side, SideConfig, VideoSide, View
from .registry import (
    FAMILIES,
    MODEL_TYPES,
    find,
    for_image_processor_type,
    for_model_type,
    for_processor_class,
    get,
)
from .sizing import SizeError
from .video import FramesAsked, LoaderSource, SampledVideo, vllm_source

__all__ = [
    "AudioSide",
    "FAMILIES",
    "MODEL_TYPES",
    "Family",
    "ImageSide",
    "Kind",
    "NoAudioSide",
    "LoaderSource",
    "SampledVideo",
    "Side",
    "SideConfig",
    "SizeError",
    "VideoSide",
    "View",
    "find",
    "for_image_processor_type",
    "for_model_type",
    "for_processor_class",
    "get",
    "vllm_source",
    "FramesAsked",
]
