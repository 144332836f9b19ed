"""Every setting of `mmprep serve`: the groups together, and the checks that span them."""

from __future__ import annotations

import importlib.util

from pydantic import model_validator

from .derender import DerenderSettings
from .engine import ENGINE_SETTINGS, VLLM_REQUEST_SETTINGS, EngineSettings
from .media import MediaSettings
from .model import ModelSettings
from .ray import RaySettings
from .server import ServerSettings


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
