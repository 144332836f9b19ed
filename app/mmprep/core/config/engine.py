"""The engine and how it is reached (app/mmprep/engines)."""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from ..registry import check_name
from .group import SettingsGroup

# The --engine choices. Each is built by its module in app/mmprep/engines, whose registry
# (engines/registry.py) maps each name to its factory; a test holds the two to one list.
ENGINE_NAMES = ("echo", "workers", "openai", "vllm-generate")
# Settings only some engines read: given with another engine they would be silently ignored,
# so they are refused instead.
ENGINE_SETTINGS = {
    "worker_url": ("workers",),
    "worker_probe_interval": ("workers",),
    "upstream_url": ("openai", "vllm-generate"),
    "upstream_model": ("openai", "vllm-generate"),
    "upstream_api_key": ("openai", "vllm-generate"),
    "upstream_allow_untested_version": ("vllm-generate",),
    "upstream_frame_format": ("openai",),
}
# How vLLM GenerateRequests are written: by --engine vllm-generate and the render route,
# both of which need the model folder.
VLLM_REQUEST_SETTINGS = ("upstream_model_id", "upstream_mm_hasher", "dtype")


class EngineSettings(SettingsGroup):
    """The engine (ENGINES; app/mmprep/engines/loading.py builds it) and how it is reached."""

    engine: str = Field(
        "echo",
        description="what produces the answers: echo (embedded), workers (mmprep worker processes), "
        "openai (an OpenAI-compatible server such as vLLM: media as JPEG frames, lossy), "
        "vllm-generate (vLLM's token-in /inference/v1/generate: token ids and processed tensors, lossless)",
    )
    echo_chars_per_token: int = Field(
        8, ge=1, description="characters per streamed piece (one token) of the echo answer"
    )
    worker_url: list[str] = Field(
        [], description="engine=workers: URL of an `mmprep worker` (repeat the flag for several)"
    )
    worker_probe_interval: float = Field(
        2.0, gt=0, description="engine=workers: seconds between health probes of each worker"
    )
    upstream_url: str | None = Field(
        None,
        description="engine=openai, vllm-generate: base URL of the upstream server, e.g. http://vllm:8000/v1",
    )
    upstream_model: str | None = Field(
        None,
        description="engine=openai, vllm-generate: the model to ask the upstream for (default served name: "
        "this)",
    )
    upstream_model_id: str | None = Field(
        None,
        description="with --model (engine=vllm-generate, the render route): the model `vllm serve` was "
        "started with, which vLLM keys its multimodal hashes by (default: --upstream-model, else --model as "
        "given, as `vllm launch render FOLDER` keys them; give it when vllm serve has --served-model-name)",
    )
    upstream_mm_hasher: Literal["blake3", "sha256", "sha512"] = Field(
        "blake3",
        description="with --model (engine=vllm-generate, the render route): vllm serve's "
        "--mm-hasher-algorithm",
    )
    dtype: Literal["auto", "half", "float16", "bfloat16", "float", "float32"] = Field(
        "auto",
        description="with --model (engine=vllm-generate, the render route): vllm serve's --dtype, the "
        "dtype vLLM's processor casts its floating outputs to (host-normalized pixels, audio features), "
        "and mmprep writes them in; vLLM's engine reads a Qwen2.5-VL video's second_per_grid_ts as that "
        "value (auto: as vLLM resolves it, the folder's "
        "config dtype, float32 taken as bfloat16; give vllm serve's own where it has --dtype or runs on "
        "a GPU without bfloat16)",
    )
    upstream_api_key: str | None = Field(
        None, description="engine=openai, vllm-generate: bearer token the upstream wants, if any"
    )
    upstream_frame_format: Literal["jpeg", "png"] = Field(
        "jpeg",
        description="engine=openai: how images and sampled video frames go to the upstream: jpeg (quality "
        "90: small, lossy) or png (lossless: vLLM sees mmprep's pixels to the bit, and with --model a "
        "Qwen3-VL video gets vllm serve's own answer for the file; about 6x JPEG's bytes on photographs)",
    )
    upstream_allow_untested_version: bool = Field(
        False,
        description="engine=vllm-generate: serve even when the upstream's GET /version names a vLLM release "
        "whose wire mmprep was not tested against (a warning in the log instead of a refusal at start)",
    )
    engine_connect_timeout: float = Field(2.0, gt=0, description="seconds to connect to a worker or upstream")
    engine_read_timeout: float = Field(
        300.0, gt=0, description="seconds a worker or upstream may stay silent while it answers"
    )
    engine_class: str | None = Field(
        None,
        description="your engine instead of --engine, as package.module:ClassName, made with no arguments "
        "(with --runtime ray: hosted by the engine replicas)",
    )

    @field_validator("engine")
    @classmethod
    def _engine_known(cls, engine: str) -> str:
        check_name("engine", engine, ENGINE_NAMES)
        return engine

    @field_validator("worker_url")
    @classmethod
    def _worker_urls_are_urls(cls, urls: list[str]) -> list[str]:
        urls = [_http_url(url) for url in urls]
        if len(set(urls)) != len(urls):
            raise ValueError(f"worker URLs repeat: {urls}")
        return urls

    @field_validator("upstream_url")
    @classmethod
    def _upstream_url_is_a_url(cls, url: str | None) -> str | None:
        return None if url is None else _http_url(url)


def _http_url(url: str) -> str:
    """`url` without a trailing slash, if it is an http(s) URL with a host."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as error:
        raise ValueError(f"{url!r} is not a valid URL: {error}") from error
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http:// or https:// URL with a host")
    return url.rstrip("/")
