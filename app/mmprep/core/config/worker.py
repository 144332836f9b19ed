"""`mmprep worker`'s settings: a process that hosts one engine behind HTTP."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

WORKER_ENV_PREFIX = "MMPREP_WORKER_"
DEFAULT_ENGINE_CLASS = "mmprep.engines.echo:EchoEngine"


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
