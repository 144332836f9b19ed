"""Every setting of the service, from MMPREP_* environment variables or `mmprep serve` flags.

Checked at start: a setting that does not exist, a path that is not there, a limit that
makes no sense or an engine that maps to nothing stops the process with a message that
says which and why. Nothing silently falls back to a default.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

ENV_PREFIX = "MMPREP_"
ENGINES = ("echo",)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", cli_kebab_case=True)

    # -- serving ---------------------------------------------------------------------
    host: str = Field("127.0.0.1", description="address to listen on")
    port: int = Field(8000, ge=0, le=65535, description="port to listen on (0: any free port)")
    served_model_name: list[str] = Field(
        ["mmprep-echo"], description="model names clients may ask for; the first is the one /v1/models lists first"
    )
    engine: str = Field("echo", description=f"what produces the answers: one of {', '.join(ENGINES)}")
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="log verbosity")

    # -- media ---------------------------------------------------------------------
    allow_private_networks: bool = Field(
        False,
        description="let media URLs reach loopback, private and link-local addresses (on-premise media servers)",
    )
    allowed_media_domains: list[str] = Field(
        [], description="if set, media URLs may only name these hosts (and their subdomains)"
    )
    allowed_local_media_path: list[Path] = Field(
        [], description="directories whose files file:// URLs may read (none: file:// is refused)"
    )
    default_fps: float = Field(2.0, gt=0, description="frames per second sampled when a request says neither fps nor num_frames")
    default_max_frames: int = Field(32, ge=1, description="frames per video when a request does not say max_frames")
    max_frames: int = Field(256, ge=1, description="most frames per video, whatever a request asks")
    seek_mode: Literal["exact", "keyframe"] = Field(
        "exact",
        description="default for videos: exact (the frame on screen at each time) or keyframe (the nearest keyframe: faster)",
    )
    max_pixels: int = Field(1920 * 1080, ge=1, description="most pixels per returned frame or image; larger ones are scaled down")
    max_source_pixels: int = Field(
        7680 * 4320, ge=1, description="largest stored frame or image (in pixels) accepted for decoding at all"
    )
    max_request_bytes: int = Field(
        768 * 1024**2, ge=1, description="most bytes of request body (data URLs count here, base64 and all)"
    )
    max_decoded_bytes: int = Field(2 * 1024**3, ge=1, description="most bytes of decoded frames per request")
    max_fetch_bytes: int = Field(512 * 1024**2, ge=1, description="most bytes fetched per media URL")
    max_media_parts: int = Field(16, ge=1, description="most image and video parts per request")
    fetch_connect_timeout: float = Field(5.0, gt=0, description="seconds to connect to a media server")
    fetch_read_timeout: float = Field(30.0, gt=0, description="seconds a media server may go silent")
    max_redirects: int = Field(5, ge=0, description="redirects followed per media URL")
    decode_timeout: float = Field(120.0, gt=0, description="seconds one request may spend fetching and decoding")

    # -- capacity -------------------------------------------------------------------
    decode_workers: int = Field(
        default_factory=lambda: os.cpu_count() or 1, ge=1, description="media decoded at once (default: one per core)"
    )
    decode_threads: int = Field(
        0, ge=0, description="FFmpeg threads per decode (0: share the cores among the decodes in flight)"
    )
    max_concurrent_requests: int = Field(64, ge=1, description="requests in flight; more get 503 with Retry-After")
    decode_cache_bytes: int = Field(
        1024**3, ge=0, description="bytes of decoded media kept for reuse across requests (0: no cache)"
    )

    # -- echo engine ----------------------------------------------------------------
    echo_chars_per_token: int = Field(8, ge=1, description="characters per streamed piece (one token) of the echo answer")

    @field_validator("served_model_name")
    @classmethod
    def _names_present(cls, names: list[str]) -> list[str]:
        if not names or any(not name.strip() for name in names):
            raise ValueError("give at least one non-empty model name")
        if len(set(names)) != len(names):
            raise ValueError(f"model names repeat: {names}")
        return names

    @field_validator("engine")
    @classmethod
    def _engine_known(cls, engine: str) -> str:
        if engine not in ENGINES:
            raise ValueError(f"unknown engine {engine!r}: choose one of {', '.join(ENGINES)}")
        return engine

    @field_validator("allowed_media_domains")
    @classmethod
    def _domains_are_hostnames(cls, domains: list[str]) -> list[str]:
        cleaned = [domain.strip().lower().strip(".") for domain in domains]
        for domain in cleaned:
            if not domain or "/" in domain or ":" in domain:
                raise ValueError(f"{domain!r} is not a host name (give e.g. media.example.com, no scheme or port)")
        return cleaned

    @field_validator("allowed_local_media_path")
    @classmethod
    def _paths_are_directories(cls, paths: list[Path]) -> list[Path]:
        for path in paths:
            if not path.is_dir():
                raise ValueError(f"{str(path)!r} is not an existing directory")
        return [path.resolve() for path in paths]

    @model_validator(mode="after")
    def _limits_fit_together(self) -> Settings:
        if self.default_max_frames > self.max_frames:
            raise ValueError(
                f"default_max_frames ({self.default_max_frames}) exceeds max_frames ({self.max_frames})"
            )
        return self


def unknown_environment_settings(environ=os.environ) -> list[str]:
    """MMPREP_* variables that name no setting: most likely a typo the operator would
    otherwise never notice."""
    known = {ENV_PREFIX + name.upper() for name in Settings.model_fields}
    return sorted(key for key in environ if key.upper().startswith(ENV_PREFIX) and key.upper() not in known)
