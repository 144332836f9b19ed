"""What `mmprep bench` and `mmprep bench-decode` take: flags, checked before anything runs.

Plain pydantic models, not settings: a benchmark's flags must not be picked up from the
environment (a stray URL or MODEL variable would silently change the target).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import CliPositionalArg

from .synthetic import CODECS

DEFAULT_REQUESTS = 20


class SyntheticOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    synthetic: int = Field(
        0,
        ge=0,
        description="generate this many camera-like videos (each a different scene) as inputs; they are "
        "kept for later runs in $XDG_CACHE_HOME/mmprep/synthetic (else ~/.cache/mmprep/synthetic)",
    )
    synthetic_size: str = Field("640x360", description="WIDTHxHEIGHT of generated videos")
    synthetic_duration: float = Field(5.0, gt=0, description="seconds of each generated video")
    synthetic_fps: int = Field(30, ge=1, description="frame rate of generated videos")
    synthetic_codec: Literal[tuple(CODECS)] = Field(  # type: ignore[valid-type]
        "h264", description="codec of generated videos: h264 and hevc in MP4, vp9 and av1 in WebM"
    )

    @field_validator("synthetic_size")
    @classmethod
    def _size_is_width_x_height(cls, size: str) -> str:
        match = re.fullmatch(r"(\d+)x(\d+)", size)
        if not match or min(int(match[1]), int(match[2])) < 16 or int(match[1]) % 2 or int(match[2]) % 2:
            raise ValueError(f"{size!r} is not WIDTHxHEIGHT with even sides of at least 16, e.g. 640x360")
        return size

    def synthetic_dimensions(self) -> tuple[int, int]:
        width, height = self.synthetic_size.split("x")
        return int(width), int(height)


class BenchConfig(SyntheticOptions):
    """Send chat requests with video and image inputs to an OpenAI-compatible server, and
    report where the time goes."""

    # -- target ------------------------------------------------------------------------
    url: str = Field(
        "http://127.0.0.1:8000", description="base URL of the OpenAI-compatible server (with or without /v1)"
    )
    model: str | None = Field(None, description="model to ask for (default: the first one /v1/models lists)")
    api_key: str | None = Field(None, description="sent as 'Authorization: Bearer KEY'")
    ready_timeout: float = Field(
        60.0, ge=0, description="seconds to wait for the server to answer before giving up"
    )
    timeout: float = Field(600.0, gt=0, description="seconds one request may take")

    # -- inputs ------------------------------------------------------------------------
    video: list[str] = Field([], description="video file, folder of videos, or http(s) URL (repeat for more)")
    image: list[str] = Field([], description="image file, folder of images, or http(s) URL (repeat for more)")
    media_as: Literal["url", "data"] = Field(
        "url",
        description="send local media as http URLs of a loopback file server bench starts (an mmprep "
        "target fetches them only if started with --allow-private-networks), or inline as data URLs",
    )
    media_host: str = Field(
        "127.0.0.1",
        description="address the file server listens on and puts in URLs: the target must reach it",
    )
    unique_media: bool = Field(
        False,
        description="give every request video bytes of its own (container padding), so no cache can hide "
        "the decode",
    )

    # -- load --------------------------------------------------------------------------
    concurrency: list[int] = Field(
        [1], description="requests in flight at most; a comma list (1,2,4) runs a sweep"
    )
    request_rate: float | None = Field(
        None,
        gt=0,
        description="requests per second, Poisson arrivals, capped by --concurrency (default: as fast as it "
        "allows)",
    )
    requests: int | None = Field(
        None,
        ge=1,
        description=f"requests per run (default: {DEFAULT_REQUESTS}, or unlimited with --duration)",
    )
    duration: float | None = Field(None, gt=0, description="seconds per run: no request starts after that")
    warmup: int = Field(0, ge=0, description="requests sent before each run, left out of its figures")
    stream: bool = Field(True, description="ask for a streamed (SSE) answer")
    max_tokens: int | None = Field(128, ge=1, description="max_tokens of each request")
    prompt: str = Field("Describe what happens in this video.", description="the text part of each request")
    prompt_words: int | None = Field(
        None,
        ge=1,
        description="add this many words to each request's prompt (a benchmark's input length, as aiperf's "
        "--isl), different in every request; with no --video, --image or --synthetic, requests are text only",
    )
    fps: float | None = Field(None, gt=0, description="frames per second to sample, sent as media_io_kwargs")
    num_frames: int | None = Field(
        None, ge=1, description="frames to sample per video, sent as media_io_kwargs"
    )
    extra_body: str | None = Field(
        None, description="JSON object merged into every request body, e.g. '{\"temperature\": 0}'"
    )
    seed: int = Field(0, description="seed of the Poisson arrivals and of the generated videos")
    client_processes: int | None = Field(
        None,
        ge=1,
        le=256,
        description="processes that send the requests (default: one per 256 of the largest --concurrency, "
        "at most one per core)",
    )

    client_keep_alive: float = Field(
        300.0,
        gt=0,
        description="seconds bench keeps an idle connection to reuse it (aiperf's default: 300; httpx's: "
        "5): a server that closes idle connections sooner races the client's next request on them, and "
        "bench sees the failures",
    )

    # -- output ------------------------------------------------------------------------
    output: Path | None = Field(
        None, description="write the results (config, figures per run) to this JSON file"
    )
    save_records: bool = Field(False, description="put every request's record in the JSON results too")
    plot: Path | None = Field(
        None, description="draw latency percentiles and throughput against concurrency into this PNG"
    )
    quiet: bool = Field(False, description="no progress bar and no notes; the summary only")
    max_failure_rate: float = Field(
        0.0, ge=0, le=1, description="exit with status 1 if a run's failed share of requests is above this"
    )

    @field_validator("url")
    @classmethod
    def _url_is_http(cls, url: str) -> str:
        if not re.match(r"https?://[^/]+", url):
            raise ValueError(f"{url!r} is not an http(s) URL, e.g. http://127.0.0.1:8000")
        return url.rstrip("/").removesuffix("/v1")

    @field_validator("concurrency")
    @classmethod
    def _concurrency_positive(cls, values: list[int]) -> list[int]:
        if not values or min(values) < 1:
            raise ValueError("give one or more concurrency levels of at least 1")
        return values

    @field_validator("extra_body")
    @classmethod
    def _extra_body_is_json_object(cls, text: str | None) -> str | None:
        if text is not None:
            try:
                value = json.loads(text)
            except json.JSONDecodeError as error:
                raise ValueError(f"not JSON: {error}") from None
            if not isinstance(value, dict):
                raise ValueError("must be a JSON object, e.g. '{\"temperature\": 0}'")
        return text

    @model_validator(mode="after")
    def _options_fit_together(self) -> BenchConfig:
        if self.fps is not None and self.num_frames is not None:
            raise ValueError("give --fps or --num-frames, not both")
        if not (self.video or self.image or self.synthetic or self.prompt_words):
            raise ValueError(
                "no inputs: give --video, --image or --synthetic N (or --prompt-words N for text only)"
            )
        return self

    def extra_body_fields(self) -> dict[str, Any]:
        return json.loads(self.extra_body) if self.extra_body else {}

    def request_limit(self) -> int | None:
        """Requests per run; None: as many as --duration allows."""
        if self.requests is not None:
            return self.requests
        return None if self.duration is not None else DEFAULT_REQUESTS


class DecodeBenchConfig(SyntheticOptions):
    """Time mmprep.decoders.decode_video against the usual ways to load a video's frames, in
    this process, on the same files."""

    videos: CliPositionalArg[list[Path]] = Field(
        [], description="video files to decode (or none, with --synthetic N)"
    )
    num_frames: int = Field(32, ge=1, description="frames each loader returns, spread evenly over the video")
    repeats: int = Field(3, ge=1, description="timed runs per loader and file; the median is reported")
    output: Path | None = Field(None, description="also write the timings to this JSON file")

    @model_validator(mode="after")
    def _has_inputs(self) -> DecodeBenchConfig:
        if not self.videos and not self.synthetic:
            raise ValueError("no videos: give files, or --synthetic N")
        return self
