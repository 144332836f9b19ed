"""How the requests for one vLLM server are written (GenerateOptions), made from the
deployment's settings and model folder (generate_options): what request.py writes by, and
content_parts.py with it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.config import Settings
from ..model import load_model_folder
from ..model.dtype import model_dtype
from ..preprocess.vision import normalizes_on_device
from .hashing import HashAlgorithm
from .sampling import max_tokens_cap, sampling_defaults
from .wire_cache import WireCache


@dataclass(frozen=True)
class GenerateOptions:
    """How requests for one vLLM server are written."""

    model_id: str  # what `vllm serve` was given as its model: the mm hashes are keyed by it
    served_model: str | None = None  # GenerateRequest.model (None: the server's own)
    family: str | None = None  # the vision processor's family (qwen2_vl, qwen2_5_vl, qwen3_vl)
    temporal_patch_size: int = 2
    vision_token_ids: Mapping[str, int] = field(default_factory=dict)  # ModelFolder.vision_token_ids
    hash_algorithm: HashAlgorithm = "blake3"  # vllm serve --mm-hasher-algorithm
    # The pixels go uint8 for the model to normalize on the device (vllm serve
    # --mm-device-do-normalize), else rescaled and normalized float32.
    normalizes_on_device: bool = False
    # vllm serve's model dtype (dtypes.model_dtype): its processor casts its floating outputs
    # to it, and its engine reads Qwen2.5-VL's second_per_grid_ts as that value (items.py)
    dtype: str = "float32"
    generation_defaults: dict[str, Any] = field(default_factory=dict)  # sampling.sampling_defaults
    max_tokens_cap: int | None = None  # sampling.max_tokens_cap: vLLM's override_max_tokens
    # vllm serve's max_model_len (Settings.max_model_len): max_tokens defaults to what the
    # prompt leaves of it; None: max_tokens is left out unless the client gives it
    max_model_len: int | None = None
    # Videos' hashes and items sent again, as written before (wire_cache.py); None: none kept
    wire_cache: WireCache | None = field(default=None, compare=False)
    # Written for vLLM's generate endpoint (the engine): an item whose embeddings text splits
    # goes as one image item per run where its family says how (Family.vllm_image_runs), and
    # a request with one that no runs can say goes with its images as files (content_parts.py);
    # off: every item as the one item vLLM's render answers (the render route, which answers
    # as `vllm launch render`)
    for_generate: bool = True


def generate_options(settings: Settings, wire_cache: WireCache | None = None) -> GenerateOptions:
    """How GenerateRequests are written for this deployment (the engine's and the render route's):
    the model folder's processor and sampling defaults, the upstream's model and hasher. The
    folder is the one the service loaded (load_model_folder's cache)."""
    folder = load_model_folder(str(settings.model), settings.processor)
    defaults = sampling_defaults(settings.generation_config, folder.path, settings.override_generation_config)
    return GenerateOptions(
        # vLLM keys its hashes by the model `vllm serve` (or `vllm launch render`) was given:
        # with no upstream named, the folder as mmprep was given it, as vLLM's render takes it.
        model_id=settings.upstream_model_id or settings.upstream_model or str(settings.model),
        served_model=settings.upstream_model or settings.served_model_name[0],
        family=folder.family,
        temporal_patch_size=folder.processor.video_config.temporal_patch_size,
        vision_token_ids=folder.vision_token_ids,
        hash_algorithm=settings.upstream_mm_hasher,
        normalizes_on_device=normalizes_on_device(settings, folder.family),
        dtype=model_dtype(settings.dtype, folder.config),
        generation_defaults=defaults,
        max_tokens_cap=max_tokens_cap(
            settings.generation_config, defaults, settings.override_generation_config
        ),
        max_model_len=settings.max_model_len,
        wire_cache=wire_cache,
    )
