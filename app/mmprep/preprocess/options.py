"""A chat request's media options as a whole: the sampling it asks of every video, and the
processor options it may send. Each part's own keys, and the merge into one VideoSampling per
video part, are the video modality's (app/mmprep/modalities/video.py).

Where a video's sampling can come from, the first that says wins:
1. the video_url part's own keys (`{"url": ..., "num_frames": 8}`);
2. `media_io_kwargs.video`, for the whole request (vLLM's spelling);
3. the sampling keys of `mm_processor_kwargs` (`fps`, `num_frames`, with `do_sample_frames`
   not false), which vLLM users send for their model's processor: honoured as sampling where
   media_io_kwargs does not say otherwise, a 400 where the two disagree;
4. the server's `--media-io-kwargs` video options (vllm serve's flag), key by key;
5. the server's defaults (`--default-fps`, capped at `--default-max-frames`).
fps and num_frames replace each other across levels. vLLM's spellings mean what they mean
there: `num_frames: -1` is every frame, `fps <= 0` is "not set". An explicit num_frames is
honoured up to `--max-frames` and refused above it; only fps and the default are capped. A
key mmprep does not know, or a vLLM key it does not do, is a 400 naming it, at every level.

The processor options: the request's mm_processor_kwargs over the server's
--mm-processor-kwargs, merged as vLLM merges them (interface.prepared.merge_processor_kwargs), are what the
model's processor runs with, as in vLLM: with mmprep's own vision processor (--processor,
--model) the keys that change its tensors (processing_layers) make the processor for the
request, each modality's scope over the flat keys.
"""

from __future__ import annotations

from typing import Any

from mmprep import families
from mmprep.processors import IGNORED_KEYS, KNOWN_KEYS

from ..core.errors import ServiceError
from ..modalities import MODALITIES
from ..modalities.video import VIDEO, sampling_keys

PROCESSOR_SAMPLING_KEYS = ("fps", "num_frames")
# mm_processor_kwargs keys that change what transformers' processor makes (its config keys;
# a family's own ones too, processing_keys: Gemma 4's max_soft_tokens), and the scopes vLLM
# passes to one modality's processor.
PROCESSING_KEYS = frozenset(KNOWN_KEYS - IGNORED_KEYS)
PROCESSOR_SCOPES = tuple(modality.processor_scope for modality in MODALITIES.values())
DEVICE_NORMALIZE_KEYS = frozenset({"do_rescale", "do_normalize"})
# The model's patch layout: its weights fix them, and the prompt's placeholder counts read them.
LAYOUT_KEYS = frozenset({"patch_size", "temporal_patch_size", "merge_size"})


def request_options(video_options: dict[str, Any], mm_processor_kwargs: dict | None) -> dict[str, Any]:
    """The sampling the request as a whole asks for (media_io_kwargs.video over the processor's);
    ServiceError for a wrong key or a conflict. Both objects (their types checked at the edge)."""
    video = sampling_keys(video_options, "media_io_kwargs.video")
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


def processing_keys(family: str) -> frozenset[str]:
    """The mm_processor_kwargs keys that change what `family`'s processor makes (others, a
    sampling key or another family's, change nothing there, as transformers' processor
    leaves a key it does not take)."""
    return PROCESSING_KEYS | families.get(family).extra_keys


def processing_layers(
    kwargs: dict | None, family: str, normalizes_on_device: bool
) -> dict[str, dict[str, Any]]:
    """The keys of `kwargs` (the server's --mm-processor-kwargs and the request's own, merged as
    merge_processor_kwargs merges them) that change what `family`'s vision processor makes,
    per modality: the flat keys, each modality's scope (videos_kwargs, ...) over them, as
    transformers' processor routes a call's keys to each modality's processor. do_rescale and
    do_normalize are left out where the model normalizes on the device (vLLM ignores them
    there). A key of the model's own patch layout (its weights are built for the folder's) is
    a ServiceError naming it, at start or in a request."""
    kwargs = kwargs or {}
    ignored = DEVICE_NORMALIZE_KEYS if normalizes_on_device else frozenset()
    known = processing_keys(family)

    def processing(values: dict[str, Any], where: str) -> dict[str, Any]:
        keys = sorted(set(values) & known - ignored)
        for key in keys:
            if key in LAYOUT_KEYS:
                raise ServiceError(
                    f"{where}.{key}: the model's own patch layout, which its weights are built for: "
                    "the model folder's, not an option",
                    "unsupported_processor_option",
                    where,
                )
        return {key: values[key] for key in keys}

    flat = processing(kwargs, "mm_processor_kwargs")
    layers: dict[str, dict[str, Any]] = {}
    for modality in MODALITIES.values():
        scope = modality.processor_scope
        scoped = processing(kwargs.get(scope) or {}, f"mm_processor_kwargs.{scope}")
        if flat or scoped:
            layers[modality.name] = {**flat, **scoped}
    return layers


# -- reading the keys --------------------------------------------------------------------


def _processor_sampling(mm_processor_kwargs: dict | None) -> dict[str, Any]:
    kwargs = mm_processor_kwargs or {}
    if kwargs.get("do_sample_frames") is False:
        return {}  # the processor is told not to sample: its fps and num_frames are not sampling
    sampling = {key: kwargs[key] for key in PROCESSOR_SAMPLING_KEYS if kwargs.get(key) is not None}
    return sampling_keys(sampling, "mm_processor_kwargs")


def _spell(options: dict) -> str:
    return ", ".join(f"{key}={value!r}" for key, value in options.items())


def server_options(media_io_kwargs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """--media-io-kwargs' video sampling, its keys checked as a request's are (a ServiceError
    names a wrong one)."""
    return sampling_keys(media_io_kwargs.get(VIDEO.name) or {}, "--media-io-kwargs video")


def under_server_options(server: dict[str, Any], requested: dict[str, Any]) -> dict[str, Any]:
    """The request's sampling over the server's, key by key; fps and num_frames replace each
    other, as they do across the request's own levels."""
    merged = dict(server)
    if "fps" in requested or "num_frames" in requested:
        merged.pop("fps", None)
        merged.pop("num_frames", None)
    return {**merged, **requested}
