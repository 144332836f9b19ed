"""Serving: where it listens, what it serves, who may call it, how many requests and
connections it holds (app/mmprep/transport, app/mmprep/api/auth.py, app/mmprep/core/admission.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, Self

from pydantic import Field, field_validator, model_validator

from .group import SettingsGroup


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
