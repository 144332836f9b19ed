"""Every setting of the service, from MMPREP_* environment variables or `mmprep serve` flags.

Checked at start: a setting that does not exist, a path that is not there, a limit that
makes no sense or an engine that maps to nothing stops the process with a message that
says which and why. Nothing silently falls back to a default. Grouped by concern
(ServerSettings, MediaSettings, ModelSettings, EngineSettings, DerenderSettings,
RaySettings); reading them loads nothing (app/mmprep/service.py's load_resources does, when the
service is built).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, Self
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .registry import Registry

ENV_PREFIX = "MMPREP_"
WORKER_ENV_PREFIX = "MMPREP_WORKER_"
# Variables an engine that mmprep ships reads itself (and checks itself): the transformers engine's.
ENGINE_ENV_PREFIXES = ("MMPREP_TRANSFORMERS_",)
# The --engine choices, each an engine module's factory from the settings, imported only when
# chosen (the transformers engine, an --engine-class, needs torch): the one list the CLI, these
# settings and engines.loading.build_engine read.
ENGINES: Registry[Callable[[Settings], Any]] = Registry(
    "engine",
    {
        "echo": "mmprep.engines.echo:from_settings",
        "workers": "mmprep.engines.workers:from_settings",
        "openai": "mmprep.engines.upstream:from_settings",
        "vllm-generate": "mmprep.engines.vllm_generate:from_settings",
    },
)
RAY_DEPLOYMENTS = ("FrontDoor", "Decode", "Engine")  # the Ray application's deployments (app/mmprep/rayserve)
DEFAULT_ENGINE_CLASS = "mmprep.engines.echo:EchoEngine"
REQUEST_OVERHEAD_BYTES = 16 * 1024**2  # a request's text and JSON around its data URLs
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


def usable_cores() -> int:
    """The cores this process may run on (taskset, a container's cpuset), not the machine's."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class SettingsGroup(BaseSettings):
    """One concern's settings. Each group reads the same flags and MMPREP_* variables as
    Settings (one flat namespace: `--max-frames`, MMPREP_MAX_FRAMES), so a room may take only
    the group it reads; checks within a group are the group's, checks across groups Settings'."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", cli_kebab_case=True)

    def _given(self, name: str) -> bool:
        """Whether setting `name` holds other than its default: a flag or variable set it."""
        return getattr(self, name) != type(self).model_fields[name].get_default(call_default_factory=True)


class ServerSettings(SettingsGroup):
    """Serving: where it listens, what it serves, how many requests and connections it holds."""

    host: str = Field("127.0.0.1", description="address to listen on")
    port: int = Field(8000, ge=0, le=65535, description="port to listen on (0: any free port)")
    served_model_name: list[str] = Field(
        ["mmprep-echo"],
        description="model names clients may ask for; the first is the one /v1/models lists first",
    )
    log_level: Literal["debug", "info", "warning", "error", "critical"] = Field(
        "info", description="log verbosity (vllm serve's --log-level, in either case)"
    )
    uvicorn_log_level: Literal["critical", "error", "warning", "info", "debug", "trace"] | None = Field(
        None,
        description="vllm serve's --uvicorn-log-level: the HTTP server's (uvicorn's) own log level "
        "(default: --log-level's)",
    )

    # -- who may call it, from where (app/mmprep/api/auth.py; vllm serve's flags of these names) --
    api_key: list[str] = Field(
        [],
        repr=False,  # a secret: never in a log line or a traceback's repr
        description="vllm serve's --api-key: keys a client must send (Authorization: Bearer KEY, or "
        "x-api-key: KEY); without one of them every route but /health, /ready, /metrics, /version and "
        "/load answers 401 (repeat the flag, or give several after it, for several keys; default: "
        "VLLM_API_KEY's value if set, else no key asked)",
    )
    allowed_origins: list[str] = Field(
        [], description="vllm serve's --allowed-origins: origins browsers may call from (CORS; none: no CORS)"
    )
    allowed_methods: list[str] = Field(["*"], description="vllm serve's --allowed-methods: CORS methods")
    allowed_headers: list[str] = Field(["*"], description="vllm serve's --allowed-headers: CORS headers")
    allow_credentials: bool = Field(False, description="vllm serve's --allow-credentials: CORS credentials")
    root_path: str = Field(
        "",
        description="vllm serve's --root-path: the path prefix a path-routing proxy serves mmprep under "
        "(ASGI root_path)",
    )
    ssl_keyfile: Path | None = Field(
        None, description="vllm serve's --ssl-keyfile: serve HTTPS with this key"
    )
    ssl_certfile: Path | None = Field(
        None, description="vllm serve's --ssl-certfile: serve HTTPS with this certificate"
    )
    ssl_ca_certs: Path | None = Field(
        None, description="vllm serve's --ssl-ca-certs: CA certificates to check client certificates with"
    )
    ssl_cert_reqs: int = Field(
        0,
        ge=0,
        le=2,
        description="vllm serve's --ssl-cert-reqs: client certificates (ssl.CERT_*: 0 none, 2 required)",
    )

    enable_force_include_usage: bool = Field(
        False,
        description="vllm serve's --enable-force-include-usage: every streamed chat and completion ends with "
        "its usage chunk, as if the client asked for stream_options.include_usage (vLLM's per-chunk "
        "continuous usage it also turns on is not served)",
    )
    enable_preview: bool = Field(
        False,
        description="serve GET /preview, a page that shows the frames sampled from a video URL or upload "
        "(off by default: it fetches any URL it is given, for whoever asks)",
    )
    processes: int = Field(
        1,
        ge=1,
        description="runtime=local: mmprep processes serving --port together (SO_REUSEPORT), for when one "
        "event loop is not enough; each has its own engine, decode pool and limits (vllm serve's "
        "--api-server-count, which mmprep serve also takes)",
    )
    runtime: Literal["local", "ray"] = Field(
        "local",
        description="local (one process) or ray (a Ray Serve application: front door, decode and engine "
        "replicas; needs the ray extra: pip install -e '.[ray]'; a local Ray cluster, or the one "
        "RAY_ADDRESS names)",
    )

    # -- admission (app/mmprep/core/admission.py) -------------------------------------------------
    max_concurrent_requests: int = Field(
        2048, ge=1, description="requests in flight; more wait in the queue, first come first served"
    )
    max_queued_requests: int = Field(
        2048,
        ge=0,
        description="requests waiting for a place in flight; past it 503 queue_full with Retry-After "
        "(0: no queue, refuse at once)",
    )
    max_queue_wait: float = Field(
        60.0,
        gt=0,
        description="seconds a request may wait in the queue; then 503 queue_timeout with Retry-After",
    )

    # -- connections (app/mmprep/transport/connections.py) ---------------------------------------------
    max_connections: int = Field(
        8192,
        ge=1,
        description="HTTP connections open at once; a request on one past it gets 503 with Retry-After",
    )
    backlog: int = Field(
        4096,
        ge=1,
        description="connections the kernel queues before they are accepted (capped by net.core.somaxconn)",
    )
    keep_alive_timeout: float = Field(
        620.0,
        gt=0,
        description="seconds an idle connection stays open, before its first request or between two: longer "
        "than clients and load balancers keep theirs (aiperf 300, Google's load balancers 610, AWS ALB 60 "
        "by default), so that they close idle connections, never racing a request mmprep closes under them",
    )
    header_timeout: float = Field(
        20.0,
        gt=0,
        description="seconds a request's line and headers may take to arrive once started, and that its "
        "body may stop arriving before its end; then 408 and close",
    )
    write_timeout: float = Field(
        30.0,
        gt=0,
        description="seconds a client may leave a full send buffer unread; then its connection is cut off, "
        "the request's work stopped and its slot given back",
    )
    send_buffer_bytes: int = Field(
        64 * 1024,
        ge=1024,
        description="unsent response bytes held per connection; past it the stream waits for the client",
    )

    @field_validator("served_model_name")
    @classmethod
    def _names_present(cls, names: list[str]) -> list[str]:
        if not names or any(not name.strip() for name in names):
            raise ValueError("give at least one non-empty model name")
        if len(set(names)) != len(names):
            raise ValueError(f"model names repeat: {names}")
        return names

    @field_validator("log_level", mode="before")
    @classmethod
    def _either_case(cls, level: object) -> object:
        return level.lower() if isinstance(level, str) else level  # vLLM spells them DEBUG, INFO, ...

    @field_validator("api_key")
    @classmethod
    def _keys_present(cls, keys: list[str]) -> list[str]:
        if any(not key.strip() for key in keys):
            raise ValueError("an API key is empty")
        return keys

    @field_validator("ssl_keyfile", "ssl_certfile", "ssl_ca_certs")
    @classmethod
    def _files_exist(cls, path: Path | None) -> Path | None:
        if path is not None and not path.is_file():
            raise ValueError(f"{str(path)!r} is not an existing file")
        return path

    @model_validator(mode="after")
    def _keys_from_vllms_variable(self) -> Self:
        """As vllm serve: --api-key (here also MMPREP_API_KEY) first, else VLLM_API_KEY."""
        if not self.api_key and os.environ.get("VLLM_API_KEY"):
            self.api_key = [os.environ["VLLM_API_KEY"]]
        if (self.ssl_keyfile is None) != (self.ssl_certfile is None):
            raise ValueError("HTTPS needs both --ssl-keyfile and --ssl-certfile")
        if self.root_path and not self.root_path.startswith("/"):
            raise ValueError(f"--root-path {self.root_path!r} must start with /")
        self.root_path = self.root_path.rstrip("/")
        return self

    @model_validator(mode="after")
    def _processes_share_a_port(self) -> Self:
        if self.processes > 1 and self.port == 0:
            raise ValueError("--processes above 1 needs a fixed --port: each process listens on it")
        if self.processes > 1 and self.runtime == "ray":
            raise ValueError("--processes is for runtime local; on Ray give --ray-front-door-replicas")
        return self


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
        description="bytes of encoded vLLM-wire items and video hashes kept for media sent again (0: none)",
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


class ModelSettings(SettingsGroup):
    """The model folder and the vision processor (mmprep.model, mmprep.render, mmprep.preprocess.vision)."""

    model: Path | None = Field(
        None,
        description="a Hugging Face model folder, or a Hub id resolved from the local Hugging Face cache as "
        "vllm serve resolves it (Qwen/Qwen3-VL-8B-Instruct; HF_HUB_OFFLINE=1: nothing fetched; online, "
        "its configs and tokenizer, no weights), what `vllm serve` takes: its tokenizer, chat template, "
        "config and processor. Each request's prompt is then rendered to token ids, images and videos "
        "expanded to the processor's count, for token-in engines; the served model name defaults to the "
        "folder's name, or the Hub id (default: none, engines get the messages)",
    )
    revision: str | None = Field(
        None,
        description="vllm serve's --revision: with a Hub id --model, the branch, tag or commit of its "
        "snapshot in the cache (default: main)",
    )
    generation_config: str = Field(
        "auto",
        description="vllm serve's --generation-config: with --model, where the sampling defaults of a "
        "request that leaves them unset come from, as vLLM reads them (temperature, top_p, top_k, min_p, the "
        "repetition, presence and frequency penalties, and max_new_tokens as the max_tokens default): auto "
        "(the --model folder's generation_config.json, else its config.json), vllm (none: vLLM's own, "
        "OpenAI's), or a folder with a generation_config.json. Applied where mmprep writes vLLM's "
        "SamplingParams (--engine vllm-generate, the render routes); an upstream of --engine openai "
        "applies its own",
    )
    override_generation_config: dict[str, Any] = Field(
        {},
        description="vllm serve's --override-generation-config: with --model, JSON laid over the "
        """--generation-config's sampling defaults, e.g. '{"temperature": 0.5}', as vLLM lays it""",
    )
    max_model_len: int | None = Field(
        None,
        ge=1,
        description="with --model: the model's context length, as vllm serve --max-model-len; a longer "
        "prompt is refused with a 400 as vLLM refuses it (default: derived from the folder's config.json as "
        "vLLM derives it: the text config's max_position_embeddings, RoPE scaling)",
    )

    chat_template: str | None = Field(
        None,
        description="vllm serve's --chat-template: with --model, the chat template every request renders "
        "with (those with tools too) in place of the folder's: a file's path, or the template itself "
        "(as vLLM, a value that is no file and holds {, } or a line break)",
    )
    chat_template_content_format: Literal["auto", "string", "openai"] = Field(
        "auto",
        description="vllm serve's --chat-template-content-format: with --model, message content as the "
        "template takes it: string (the parts' text joined), openai (the list of parts), or auto (detected "
        "from the template, as vLLM detects it)",
    )
    trust_request_chat_template: bool = Field(
        False,
        description="--model: render a request that brings its own chat_template (top-level, or in "
        "chat_template_kwargs) with it, as vLLM's flag of that name; without it such a request is a 400 "
        "(a template is code run on the server)",
    )

    # -- the vision processor ------------------------------------------------------
    processor: str | None = Field(
        None,
        description="process every image and video into the model's tensors (pixel_values, *_grid_thw): a "
        "family (qwen2_vl, qwen2_5_vl, qwen3_vl, llava_onevision, internvl), a preset model id "
        "(Qwen/Qwen2.5-VL-7B-Instruct) or a folder with its preprocessor config (default: the --model "
        "folder's, else none: engines get the decoded frames)",
    )
    processor_resize: Literal["exact", "ffmpeg"] = Field(
        "exact",
        description="--processor: how frames reach the model's size: exact (transformers' resize on the "
        "decoded frames) or ffmpeg (FFmpeg's scaler straight to it while decoding: faster, a few levels "
        "off; see docs/deployment.md)",
    )
    max_vision_tokens: int | None = Field(
        None,
        ge=1,
        description="--processor: refuse a request whose images and videos come to more placeholder tokens",
    )
    mm_device_do_normalize: bool | None = Field(
        None,
        description="--processor: leave the pixels uint8, unrescaled and unnormalized, for an engine that "
        "normalizes them on the device, as vLLM does by default for the Qwen-VL families (vllm serve "
        "--mm-device-do-normalize; give --no-mm-device-do-normalize where vLLM has it); the render route "
        "and --engine vllm-generate then send what vLLM's own renderer sends (default: as vLLM for the "
        "model with --model, except for --engine workers and --engine-class, whose engines take "
        "transformers' normalized float32)",
    )

    @field_validator("max_model_len", mode="before")
    @classmethod
    def _human_readable(cls, value: object) -> object:
        """As vllm serve's --max-model-len: 32k, 1m, 25.6k (powers of 1000; K, M, G, T powers of 1024),
        auto or -1 (derived from the folder)."""
        if not isinstance(value, str):
            return None if value == -1 else value
        text = value.strip()
        if text.lower() == "auto" or text == "-1":
            return None
        scale = {
            "k": 10**3,
            "m": 10**6,
            "g": 10**9,
            "t": 10**12,
            "K": 2**10,
            "M": 2**20,
            "G": 2**30,
            "T": 2**40,
        }.get(text[-1:])
        if scale is None:
            return text
        try:
            number = float(text[:-1])
        except ValueError:
            return text
        if text[-1].isupper() and number != int(number):
            raise ValueError(f"{value!r}: a binary multiple ({text[-1]}) takes a whole number")
        return int(number * scale)

    @model_validator(mode="after")
    def _processor_options_need_one(self) -> Self:
        if self.max_model_len is not None and self.model is None:
            raise ValueError("--max-model-len only applies with --model (the prompt's token ids)")
        if self.revision is not None and self.model is None:
            raise ValueError("--revision only applies with --model (a Hugging Face Hub id)")
        if self.override_generation_config and self.model is None:
            raise ValueError(
                "--override-generation-config only applies with --model (as --generation-config; without "
                "it give it to the vllm serve behind mmprep)"
            )
        if self.generation_config not in ("auto", "vllm"):
            if self.model is None:
                raise ValueError(
                    "--generation-config only applies with --model (mmprep writes the sampling defaults of "
                    "vLLM's SamplingParams only then; without it give it to the vllm serve behind mmprep)"
                )
            if not Path(self.generation_config).is_dir():
                said = repr(self.generation_config)
                raise ValueError(f"--generation-config {said} is neither auto, vllm nor an existing folder")
        if self.processor is None and self.model is None:
            given = [
                name
                for name in ("processor_resize", "max_vision_tokens", "mm_device_do_normalize")
                if self._given(name)
            ]
            if given:
                flags = ", ".join(f"--{name.replace('_', '-')}" for name in given)
                raise ValueError(f"{flags} only apply with --processor or --model")
        for name in ("chat_template", "chat_template_content_format"):
            if self._given(name) and self.model is None:
                raise ValueError(
                    f"--{name.replace('_', '-')} only applies with --model (mmprep renders the template only "
                    "then; without it give it to the engine that renders, e.g. the vllm serve behind mmprep)"
                )
        if self._given("trust_request_chat_template") and self.model is None:
            raise ValueError(
                "--trust-request-chat-template only applies with --model (mmprep renders the template "
                "only then; without it the engine reads the request's chat_template, if at all)"
            )
        return self


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
        "dtype vLLM's processor casts its floating outputs to; vLLM's engine reads a Qwen2.5-VL video's "
        "second_per_grid_ts as that value, so mmprep sends it so (auto: as vLLM resolves it, the folder's "
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
        ENGINES.check(engine)
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


class DerenderSettings(SettingsGroup):
    """The answer's text (app/mmprep/derender): the parsers."""

    reasoning_parser: str | None = Field(
        None,
        # the names are app/mmprep/derender's registry's: checked, and listed in --help, by the
        # command (app/mmprep/cli.py) and where the service is built (core cannot import derender)
        description="split the model's thinking from its answer, as vLLM's parser of that name "
        "(message.reasoning and reasoning_content)",
    )
    enable_auto_tool_choice: bool = Field(
        False, description="turn the tool calls a model writes into tool_calls (needs --tool-call-parser)"
    )
    tool_call_parser: str | None = Field(
        None,
        description="the format of the model's tool calls, as vLLM's parser of that name",
    )
    stream_partial_tool_calls: bool = Field(
        False,
        description="stream a tool call argument by argument as the model writes it (each piece valid "
        "JSON so far), not whole once it has ended and parsed; a call that then breaks (malformed, cut "
        "by max_tokens) stays a call with the arguments sent, closed, and its text is content too. Off: "
        "a call that does not parse is content, as vLLM answers",
    )
    return_tokens_as_token_ids: bool = Field(
        False,
        description="vllm serve's --return-tokens-as-token-ids: with --model, logprobs name each token "
        "token_id:N instead of its text (tokens that are not valid text stay identifiable), as vLLM; a "
        "request's own return_tokens_as_token_ids wins",
    )

    @model_validator(mode="after")
    def _auto_tool_choice_has_a_parser(self) -> Self:
        if self.enable_auto_tool_choice and self.tool_call_parser is None:
            raise ValueError("--enable-auto-tool-choice needs --tool-call-parser")
        if self.stream_partial_tool_calls and not self.enable_auto_tool_choice:
            raise ValueError("--stream-partial-tool-calls needs --enable-auto-tool-choice --tool-call-parser")
        return self


class RaySettings(SettingsGroup):
    """runtime=ray (app/mmprep/rayserve)."""

    ray_front_door_replicas: int = Field(1, ge=1, description="runtime=ray: front door (HTTP) replicas")
    ray_decode_replicas: int = Field(
        1, ge=1, description="runtime=ray: decode replicas (each fetches and decodes with --decode-workers)"
    )
    ray_max_decode_replicas: int = Field(
        0,
        ge=0,
        description="runtime=ray: above --ray-decode-replicas, autoscale decode replicas up to this many, "
        "aiming at --decode-workers requests in flight per replica (0: a fixed count)",
    )
    ray_engine_replicas: int = Field(1, ge=1, description="runtime=ray: engine replicas")
    ray_max_engine_replicas: int = Field(
        0,
        ge=0,
        description="runtime=ray: above --ray-engine-replicas, autoscale engine replicas up to this many, "
        "by requests in flight (0: a fixed count)",
    )
    ray_deployment_options: dict[str, dict] = Field(
        {},
        description="runtime=ray: Ray Serve options per deployment (FrontDoor, Decode, Engine), as in Ray's "
        """config file and laid over the above, e.g. '{"Engine": {"ray_actor_options": {"num_gpus": 1}}}'""",
    )

    @field_validator("ray_deployment_options")
    @classmethod
    def _deployments_known(cls, options: dict[str, dict]) -> dict[str, dict]:
        unknown = sorted(set(options) - set(RAY_DEPLOYMENTS))
        if unknown:
            raise ValueError(
                f"no deployment is named {', '.join(unknown)}: they are {', '.join(RAY_DEPLOYMENTS)}"
            )
        return options


# Listed last to first: pydantic (and so --help) orders the fields from the last base to the first.
class Settings(RaySettings, DerenderSettings, EngineSettings, ModelSettings, MediaSettings, ServerSettings):
    """Every setting of `mmprep serve`, by concern (the groups above), with the checks that
    span groups. Reading settings does no I/O beyond the paths' existence: what they name (the
    model folder, the processor, the engine class) is loaded where the service is built
    (app/mmprep/service.py load_resources)."""

    @model_validator(mode="after")
    def _token_ids_need_a_model(self) -> Settings:
        if self.return_tokens_as_token_ids and self.model is None:
            raise ValueError(
                "--return-tokens-as-token-ids only applies with --model (mmprep writes the logprobs only "
                "then; without it give it to the vllm serve behind mmprep)"
            )
        return self

    @model_validator(mode="after")
    def _parsers_fit(self) -> Settings:
        given = [
            flag
            for flag, value in (
                ("--reasoning-parser", self.reasoning_parser),
                ("--tool-call-parser", self.tool_call_parser),
            )
            if value
        ]
        if given and self.engine == "openai":
            raise ValueError(
                f"{', '.join(given)} mean nothing with engine 'openai': the upstream parses its own answers "
                "(give it these flags)"
            )
        return self

    @model_validator(mode="after")
    def _ray_settings_fit(self) -> Settings:
        if self.runtime == "ray" and importlib.util.find_spec("ray") is None:
            raise ValueError("runtime 'ray' needs Ray: pip install -e '.[ray]' in mmprep's checkout")
        if self.runtime != "ray":  # else a --ray-* setting would be silently ignored
            for name in RaySettings.model_fields:
                if name.startswith("ray_") and self._given(name):
                    raise ValueError(f"--{name.replace('_', '-')} only applies with --runtime ray")
        return self

    @model_validator(mode="after")
    def _engine_has_what_it_needs(self) -> Settings:
        if self.engine_class is not None and "engine" in self.model_fields_set and self.engine != "echo":
            raise ValueError(f"give --engine {self.engine} or --engine-class, not both")
        if self.engine == "workers" and not self.worker_url:
            raise ValueError("engine 'workers' needs at least one worker_url (--worker-url URL)")
        if self.engine in ("openai", "vllm-generate"):
            missing = [name for name in ("upstream_url", "upstream_model") if not getattr(self, name)]
            if self.engine == "vllm-generate" and self.model is None:
                missing.append("model")  # vLLM's generate endpoint takes token ids and processed tensors
            if missing:
                flags = " and ".join(f"{name} (--{name.replace('_', '-')})" for name in missing)
                raise ValueError(f"engine {self.engine!r} needs {flags}")
            if "served_model_name" not in self.model_fields_set and self.model is None:
                # Clients then ask for the upstream's model by its own name.
                assert self.upstream_model is not None  # else `missing` named it above
                self.served_model_name = [self.upstream_model]
        for name in VLLM_REQUEST_SETTINGS:
            if self._given(name) and self.model is None:
                raise ValueError(
                    f"--{name.replace('_', '-')} only applies with --model (vLLM's GenerateRequests)"
                )
        engine = "an --engine-class" if self.engine_class is not None else f"--engine {self.engine}"
        for name, engines in ENGINE_SETTINGS.items():
            if self._given(name) and (self.engine not in engines or self.engine_class is not None):
                raise ValueError(
                    f"--{name.replace('_', '-')} only applies with --engine {' or '.join(engines)}, "
                    f"not with {engine}"
                )
        return self


class WorkerSettings(BaseSettings):
    """Settings of `mmprep worker`: a process that hosts one engine behind HTTP."""

    model_config = SettingsConfigDict(env_prefix=WORKER_ENV_PREFIX, extra="forbid", cli_kebab_case=True)

    host: str = Field("127.0.0.1", description="address to listen on")
    port: int = Field(8100, ge=0, le=65535, description="port to listen on")
    engine_class: str = Field(
        DEFAULT_ENGINE_CLASS,
        description="the engine to host, as package.module:ClassName; made with no arguments",
    )
    max_request_bytes: int = Field(
        4 * 1024**3, ge=1, description="largest request (tensors and header) the worker accepts"
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="log verbosity")


def base64_size(size: int) -> int:
    return (size + 2) // 3 * 4


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


def unknown_environment_settings(environ=os.environ) -> list[str]:
    """MMPREP_* variables that name no setting (of `serve` or of `worker`) nor belong to an
    engine of ours: most likely a typo the operator would otherwise never notice."""
    known = {ENV_PREFIX + name.upper() for name in Settings.model_fields}
    known |= {WORKER_ENV_PREFIX + name.upper() for name in WorkerSettings.model_fields}
    return sorted(
        key
        for key in environ
        if key.upper().startswith(ENV_PREFIX)
        and key.upper() not in known
        and not key.upper().startswith(ENGINE_ENV_PREFIXES)
    )
