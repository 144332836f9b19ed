"""A chat request's media options, parsed once into one VideoSampling per video part.

Where a video's sampling can come from, the first that says wins:
1. the video_url part's own keys (`{"url": ..., "num_frames": 8}`);
2. `media_io_kwargs.video`, for the whole request (vLLM's spelling);
3. the sampling keys of `mm_processor_kwargs` (`fps`, `num_frames`, with `do_sample_frames`
   not false), which vLLM users send for their model's processor: honoured as sampling where
   media_io_kwargs does not say otherwise, a 400 where the two disagree;
4. the server's defaults (`--default-fps`, capped at `--default-max-frames`).
fps and num_frames replace each other across levels. vLLM's spellings mean what they mean
there: `num_frames: -1` is every frame, `fps <= 0` is "not set". An explicit num_frames is
honoured up to `--max-frames` and refused above it; only fps and the default are capped. A
key mmprep does not know, or a vLLM key it does not do, is a 400 naming it, at every level.
"""

from __future__ import annotations

from dataclasses import fields
from numbers import Real
from typing import Any

from mmprep.decoders import InvalidSamplingError, MediaError, VideoSampling
from mmprep.processors import IGNORED_KEYS, KNOWN_KEYS, ProcessorError

from ..core.config import MediaSettings
from ..core.errors import ServiceError

# What a request may say of a video's sampling: VideoSampling's fields but the server's max_pixels.
SAMPLING_KEYS = tuple(field.name for field in fields(VideoSampling) if field.name != "max_pixels")
# vLLM's video loader keys, by what mmprep does with them.
FRAME_RECOVERY = "frame_recovery"  # true: what mmprep always does (a frame FFmpeg cannot produce is
#                                    replaced by the frame on screen at its time); false: refused
REFUSED_KEYS = {
    "max_duration": "mmprep samples the whole video; cut it shorter, or bound the frames with max_frames",
}
PROCESSOR_SAMPLING_KEYS = ("fps", "num_frames")
# mm_processor_kwargs keys that change what transformers' processor makes (its config keys),
# and the scopes vLLM passes to one modality's processor.
PROCESSING_KEYS = frozenset(KNOWN_KEYS - IGNORED_KEYS)
PROCESSOR_SCOPES = ("images_kwargs", "videos_kwargs")
DEVICE_NORMALIZE_KEYS = frozenset({"do_rescale", "do_normalize"})
IMAGE_PART_KEYS = ("url", "detail")


def request_options(video_options: dict[str, Any], mm_processor_kwargs: dict | None) -> dict[str, Any]:
    """The sampling the request as a whole asks for (media_io_kwargs.video over the processor's);
    ServiceError for a wrong key or a conflict. Both objects (their types checked at the edge)."""
    video = _known_keys(video_options, "media_io_kwargs.video")
    processor = _processor_sampling(mm_processor_kwargs)
    if not processor:
        return video
    said = {key: video[key] for key in PROCESSOR_SAMPLING_KEYS if key in video}
    if said and said != processor:
        raise ServiceError(
            f"media_io_kwargs.video asks for {_spell(said)} but mm_processor_kwargs for {_spell(processor)}: "
            "say how to sample in one of them",
            "invalid_sampling",
            "mm_processor_kwargs",
        )
    return {**processor, **video}


def check_processor_kwargs(mm_processor_kwargs: dict | None, normalizes_on_device: bool) -> None:
    """With mmprep's own vision processor (--processor, --model): a 400 naming any key of
    `mm_processor_kwargs` that would change the processor's tensors (vLLM's processor honours
    `max_pixels` and the rest per request; mmprep's runs with the server's settings, and a
    key silently left out would give tensors vLLM's own frontend never makes under that
    request's hash). do_rescale and do_normalize change nothing where the model normalizes
    on the device: vLLM ignores them there, and so does mmprep."""
    kwargs = mm_processor_kwargs or {}
    scopes = [("mm_processor_kwargs", kwargs)] + [
        (f"mm_processor_kwargs.{scope}", kwargs[scope] or {}) for scope in PROCESSOR_SCOPES if scope in kwargs
    ]
    ignored = DEVICE_NORMALIZE_KEYS if normalizes_on_device else frozenset()
    for where, values in scopes:
        for key in sorted(set(values) & PROCESSING_KEYS - ignored):
            raise ServiceError(
                f"{where}.{key}: mmprep's vision processor runs with the server's settings, not per "
                f"request: start mmprep with a --processor folder whose config sets {key} (as vllm "
                "serve --mm-processor-kwargs sets it), or leave it out",
                "unsupported_processor_option",
                where,
            )


def part_options(value: dict, param: str) -> dict[str, Any]:
    """The sampling keys a video_url part carries itself (its other key is `url`)."""
    return _known_keys({key: item for key, item in value.items() if key != "url"}, param)


def check_image_part(value: dict, param: str) -> None:
    unknown = sorted(set(value) - set(IMAGE_PART_KEYS))
    if any(key in SAMPLING_KEYS for key in unknown):
        raise ServiceError(
            f"{param} takes no sampling keys; only video_url parts do", "invalid_sampling", param
        )
    if unknown:
        raise ServiceError(
            f"{param} has unknown key(s) {', '.join(map(repr, unknown))}: "
            f"an image_url takes {', '.join(IMAGE_PART_KEYS)}",
            "invalid_content_part",
            param,
        )


def video_sampling(
    request: dict[str, Any], part: dict[str, Any], settings: MediaSettings, param: str
) -> VideoSampling:
    """The part's VideoSampling: its own keys over the request's over the server's defaults."""
    merged = dict(request)
    if "fps" in part or "num_frames" in part:
        merged.pop("fps", None)
        merged.pop("num_frames", None)
    merged.update(part)
    fps, num_frames = merged.get("fps"), merged.get("num_frames")
    if num_frames is None and fps is None:
        fps = settings.default_fps
    # An explicit count is honoured up to the hard limit; only fps and the default are capped.
    cap = settings.max_frames if num_frames is not None else settings.default_max_frames
    max_frames = merged.get("max_frames", cap)
    if isinstance(max_frames, int) and not isinstance(max_frames, bool):
        max_frames = min(max_frames, settings.max_frames)
    try:
        return VideoSampling(
            fps, num_frames, max_frames, settings.max_pixels, merged.get("seek_mode", settings.seek_mode)
        )
    except InvalidSamplingError as error:
        raise part_error(error, param) from error


def part_error(error: MediaError | ProcessorError | ServiceError, param: str) -> ServiceError:
    """A sampling, decoding, processing or fetching error as the client sees it: a 400 naming the part."""
    return ServiceError(f"{param}: {error}", error.code, param)


# -- reading the keys --------------------------------------------------------------------


def _known_keys(options: dict, where: str) -> dict[str, Any]:
    """The sampling keys of `options`, vLLM's spellings read; ServiceError for any other key."""
    known = {}
    for key, value in options.items():
        if key in REFUSED_KEYS:
            raise ServiceError(
                f"{where}.{key}: mmprep does not do {key}: {REFUSED_KEYS[key]}", "invalid_sampling", where
            )
        if key == FRAME_RECOVERY:
            if value is not True:
                raise ServiceError(
                    f"{where}.{key}: mmprep always recovers frames (a frame FFmpeg cannot produce is "
                    "replaced by the frame on screen at its time); frame_recovery can only be true",
                    "invalid_sampling",
                    where,
                )
            continue
        if key not in SAMPLING_KEYS:
            raise ServiceError(
                f"{where} has unknown key {key!r}: the sampling keys are {', '.join(SAMPLING_KEYS)}",
                "invalid_sampling",
                where,
            )
        if value is None or (key == "fps" and _not_set(value)):
            continue  # vLLM: fps <= 0 means "not set"
        known[key] = value
    return known


def _processor_sampling(mm_processor_kwargs: dict | None) -> dict[str, Any]:
    kwargs = mm_processor_kwargs or {}
    if kwargs.get("do_sample_frames") is False:
        return {}  # the processor is told not to sample: its fps and num_frames are not sampling
    sampling = {key: kwargs[key] for key in PROCESSOR_SAMPLING_KEYS if kwargs.get(key) is not None}
    return _known_keys(sampling, "mm_processor_kwargs")


def _not_set(fps: Any) -> bool:
    return isinstance(fps, Real) and not isinstance(fps, bool) and fps <= 0


def _spell(options: dict) -> str:
    return ", ".join(f"{key}={value!r}" for key, value in options.items())
