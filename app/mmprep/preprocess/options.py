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
"""

from __future__ import annotations

from typing import Any

from mmprep import families
from mmprep.processors import IGNORED_KEYS, KNOWN_KEYS

from ..core.errors import ServiceError
from ..modalities import MODALITIES
from ..modalities.video import VIDEO, sampling_keys

PROCESSOR_SAMPLING_KEYS = ("fps", "num_frames")
# mm_processor_kwargs keys that change what transformers' processor makes (its config keys,
# a family's own ones too: Gemma 4's max_soft_tokens, Gemma 3's pan-and-scan), and the scopes
# vLLM passes to one modality's processor.
FAMILY_KEYS = frozenset().union(*(families.get(name).extra_keys for name in families.FAMILIES))
PROCESSING_KEYS = frozenset(KNOWN_KEYS - IGNORED_KEYS) | FAMILY_KEYS
PROCESSOR_SCOPES = tuple(modality.processor_scope for modality in MODALITIES.values())
DEVICE_NORMALIZE_KEYS = frozenset({"do_rescale", "do_normalize"})


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


def check_processor_kwargs(
    mm_processor_kwargs: dict | None, normalizes_on_device: bool, family: str | None = None
) -> None:
    """With mmprep's own vision processor (--processor, --model) of `family`: a 400 naming
    any key of `mm_processor_kwargs` that would change the processor's tensors (vLLM's
    processor honours `max_pixels` and the rest per request; mmprep's runs with the server's
    settings, and a key silently left out would give tensors vLLM's own frontend never makes
    under that request's hash), but those the family's processor takes per call
    (Side.request_keys: Gemma 3's pan-and-scan, processor_options); and a 400 naming a
    family's option the model's family has not (Gemma 4's max_soft_tokens for Gemma 3).
    do_rescale and do_normalize change nothing where the model normalizes on the device:
    vLLM ignores them there, and so does mmprep."""
    kwargs = mm_processor_kwargs or {}
    known = families.find(family)
    scopes = [("mm_processor_kwargs", kwargs, None)] + [
        (
            f"mm_processor_kwargs.{modality.processor_scope}",
            kwargs[modality.processor_scope] or {},
            modality.name,
        )
        for modality in MODALITIES.values()
        if modality.processor_scope in kwargs
    ]
    ignored = DEVICE_NORMALIZE_KEYS if normalizes_on_device else frozenset()
    for where, values, scope in scopes:
        if known is not None:
            sides = [known.sides[scope]] if scope is not None else list(known.sides.values())
            per_call = frozenset().union(*(side.request_keys for side in sides if side.taken))
            for key in sorted(set(values) & FAMILY_KEYS - known.extra_keys - per_call):
                raise ServiceError(
                    f"{where}.{key}: the {known.name} processor has no {key} option (it is another model "
                    "family's); leave it out",
                    "unsupported_processor_option",
                    where,
                )
            ignored = ignored | per_call
        for key in sorted(set(values) & PROCESSING_KEYS - ignored):
            raise ServiceError(
                f"{where}.{key}: mmprep's vision processor runs with the server's settings, not per "
                f"request: start mmprep with a --processor folder whose config sets {key} (as vllm "
                "serve --mm-processor-kwargs sets it), or leave it out",
                "unsupported_processor_option",
                where,
            )


def processor_options(mm_processor_kwargs: dict | None, family: str | None, kind: families.Kind) -> tuple:
    """The options of `mm_processor_kwargs` that the `family`'s processor takes per call for
    `kind`'s items (Side.request_keys), its scope's (images_kwargs) over the flat ones, as
    sorted (key, value) pairs: () for none. Checked by check_processor_kwargs first."""
    known = families.find(family)
    if known is None or not mm_processor_kwargs:
        return ()
    side = known.sides[kind]
    scoped = mm_processor_kwargs.get(MODALITIES[kind].processor_scope) or {}
    merged = {key: value for key, value in mm_processor_kwargs.items() if key in side.request_keys}
    merged |= {key: value for key, value in scoped.items() if key in side.request_keys}
    return tuple(sorted(merged.items()))


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


def under_server_kwargs(server: dict[str, Any], requested: dict[str, Any] | None) -> dict[str, Any] | None:
    """The request's mm_processor_kwargs over --mm-processor-kwargs, as vLLM merges them: key by
    key, and a modality's scope (videos_kwargs, ...) key by key within it."""
    if not server:
        return requested
    merged = {**server, **(requested or {})}
    for scope in PROCESSOR_SCOPES:
        if isinstance(server.get(scope), dict) and isinstance((requested or {}).get(scope), dict):
            merged[scope] = {**server[scope], **(requested or {})[scope]}
    return merged
