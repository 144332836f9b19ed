"""Media and their limits: where URLs may lead, sampling defaults, sizes, decoding
(app/mmprep/media, app/mmprep/modalities, app/mmprep/preprocess)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import Field, field_validator, model_validator

from .group import SettingsGroup

REQUEST_OVERHEAD_BYTES = 16 * 1024**2  # a request's text and JSON around its data URLs


def usable_cores() -> int:
    """The cores this process may run on (taskset, a container's cpuset), not the machine's."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def base64_size(size: int) -> int:
    return (size + 2) // 3 * 4


class MediaSettings(SettingsGroup):
    """Media and their limits: where URLs may lead, sampling defaults, sizes, decoding."""

    allow_private_networks: bool = Field(
        False,
        description="let media URLs reach loopback, private and link-local addresses (on-premise media "
        "servers)",
    )
    allowed_media_domains: list[str] = Field(
        [], description="if set, media URLs may only name these hosts (and their subdomains)"
    )
    allowed_local_media_path: list[Path] = Field(
        [], description="directories whose files file:// URLs may read (none: file:// is refused)"
    )
    default_fps: float = Field(
        2.0, gt=0, description="frames per second sampled when a request says neither fps nor num_frames"
    )
    default_max_frames: int = Field(
        32, ge=1, description="frames per video when a request does not say max_frames"
    )
    max_frames: int = Field(768, ge=1, description="most frames per video, whatever a request asks")
    seek_mode: Literal["exact", "keyframe"] = Field(
        "exact",
        description="default for videos: exact (the frame on screen at each time) or keyframe (the nearest "
        "keyframe: faster)",
    )
    max_pixels: int = Field(
        1920 * 1080, ge=1, description="most pixels per returned frame or image; larger ones are scaled down"
    )
    max_source_pixels: int = Field(
        7680 * 4320,
        ge=1,
        description="largest stored frame or image (in pixels) accepted for decoding at all",
    )
    max_request_bytes: int = Field(
        # None until _limits_fit_together derives it from --max-fetch-bytes: a validated
        # Settings always holds an int (a default factory reading max_fetch_bytes would add an
        # error line of its own whenever --max-fetch-bytes is wrong).
        None,  # type: ignore[assignment]
        ge=1,
        description="most bytes of request body, data URLs' base64 included "
        "(default: room for one data URL of --max-fetch-bytes: 4/3 of it, plus 16 MiB)",
        validate_default=False,
    )
    max_decoded_bytes: int = Field(2 * 1024**3, ge=1, description="most bytes of decoded frames per request")
    max_fetch_bytes: int = Field(512 * 1024**2, ge=1, description="most bytes fetched per media URL")
    max_media_parts: int = Field(16, ge=1, description="most image and video parts per request")
    limit_mm_per_prompt: dict[str, int | dict[str, Any]] = Field(
        {},
        description="vllm serve's --limit-mm-per-prompt: most items per modality in one request, as JSON, "
        """e.g. '{"image": 4, "video": 1}' (0: the modality is refused; vLLM's """
        """{"video": {"count": 1, ...}} form is read for its count); more is a 400 naming the modality """
        "and the limit",
    )
    media_io_kwargs: dict[str, dict[str, Any]] = Field(
        {},
        description="vllm serve's --media-io-kwargs: the server's media loading options per modality, as "
        """JSON, e.g. '{"video": {"num_frames": 40}}'; a request's own media_io_kwargs (and a part's """
        "keys) win over them, key by key (fps and num_frames replace each other)",
    )
    mm_processor_kwargs: dict[str, Any] = Field(
        {},
        description="vllm serve's --mm-processor-kwargs: the server's processor options, as JSON, laid "
        "under each request's own mm_processor_kwargs (the request's keys win), as vLLM merges them; with "
        """--processor or --model their processing keys make the processor, e.g. '{"max_pixels": 1003520}'""",
    )
    fetch_connect_timeout: float = Field(5.0, gt=0, description="seconds to connect to a media server")
    fetch_read_timeout: float = Field(30.0, gt=0, description="seconds a media server may go silent")
    max_redirects: int = Field(5, ge=0, description="redirects followed per media URL")
    decode_timeout: float = Field(
        120.0, gt=0, description="seconds one request may spend fetching and decoding"
    )

    decode_workers: int = Field(
        default_factory=usable_cores,
        ge=1,
        description="media decoded at once (default: one per core this process may use)",
    )
    decode_threads: int = Field(
        0, ge=0, description="FFmpeg threads per decode (0: share the cores among the decodes in flight)"
    )
    decode_device: Literal["cpu", "cuda"] = Field(
        "cpu",
        description="where videos decode: cpu, or cuda (NVDEC, where the codec and size allow; "
        "the CPU otherwise, with a log line saying why)",
    )
    decode_cache_bytes: int = Field(
        1024**3, ge=0, description="bytes of decoded media kept for reuse across requests (0: no cache)"
    )
    render_cache_bytes: int = Field(
        512 * 1024**2,
        ge=0,
        description="bytes of videos' vLLM-wire hashes and of items' encoded forms kept for media sent "
        "again (0: none)",
    )

    @field_validator("allowed_media_domains")
    @classmethod
    def _domains_are_hostnames(cls, domains: list[str]) -> list[str]:
        cleaned = [domain.strip().lower().strip(".") for domain in domains]
        for domain in cleaned:
            if not domain or "/" in domain or ":" in domain:
                raise ValueError(
                    f"{domain!r} is not a host name (give e.g. media.example.com, no scheme or port)"
                )
        return cleaned

    @field_validator("limit_mm_per_prompt")
    @classmethod
    def _limits_are_counts(cls, limits: dict[str, int | dict[str, Any]]) -> dict[str, int | dict[str, Any]]:
        for modality, limit in limits.items():
            count = limit.get("count", 999) if isinstance(limit, dict) else limit
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                raise ValueError(f"{modality}: {limit!r} is not a count of items (0 or more)")
        return limits

    def mm_limit(self, modality: str) -> int | None:
        """--limit-mm-per-prompt's count for `modality`, None if it sets none."""
        limit = self.limit_mm_per_prompt.get(modality)
        if isinstance(limit, dict):
            return limit.get("count")
        return limit

    @field_validator("allowed_local_media_path")
    @classmethod
    def _paths_are_directories(cls, paths: list[Path]) -> list[Path]:
        for path in paths:
            if not path.is_dir():
                raise ValueError(f"{str(path)!r} is not an existing directory")
        return [path.resolve() for path in paths]

    @model_validator(mode="after")
    def _limits_fit_together(self) -> Self:
        if self.max_request_bytes is None:
            # A bigger body could only hold a data URL the fetch limit refuses anyway.
            self.max_request_bytes = base64_size(self.max_fetch_bytes) + REQUEST_OVERHEAD_BYTES
        if self.default_max_frames > self.max_frames:
            raise ValueError(
                f"default_max_frames ({self.default_max_frames}) exceeds max_frames ({self.max_frames})"
            )
        return self
