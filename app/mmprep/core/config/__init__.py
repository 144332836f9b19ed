"""Every setting of the service, from MMPREP_* environment variables or `mmprep serve` flags.

Checked at start: a setting that does not exist, a path that is not there, a limit that
makes no sense or an engine that maps to nothing stops the process with a message that
says which and why. Nothing silently falls back to a default. A module per concern, as
vLLM's vllm/config/ (server.py, media.py, model.py, engine.py, derender.py, ray.py; worker.py
for `mmprep worker`), the groups together with the checks across them in settings.py, the
guard against mistyped variables in environment.py. Reading them loads nothing
(app/mmprep/service.py's load_resources does, when the service is built).
"""

from .derender import DerenderSettings
from .engine import ENGINE_NAMES, ENGINE_SETTINGS, VLLM_REQUEST_SETTINGS, EngineSettings
from .environment import ENGINE_ENV_PREFIXES, TRANSFORMERS_ENV_PREFIX, unknown_environment_settings
from .group import ENV_PREFIX, SettingsGroup
from .media import REQUEST_OVERHEAD_BYTES, MediaSettings, base64_size, usable_cores
from .model import ModelSettings
from .ray import RAY_DEPLOYMENTS, RaySettings
from .server import ServerSettings
from .settings import Settings
from .worker import DEFAULT_ENGINE_CLASS, WORKER_ENV_PREFIX, WorkerSettings

__all__ = [
    "DEFAULT_ENGINE_CLASS",
    "ENGINE_ENV_PREFIXES",
    "ENGINE_NAMES",
    "ENGINE_SETTINGS",
    "ENV_PREFIX",
    "RAY_DEPLOYMENTS",
    "REQUEST_OVERHEAD_BYTES",
    "TRANSFORMERS_ENV_PREFIX",
    "VLLM_REQUEST_SETTINGS",
    "WORKER_ENV_PREFIX",
    "DerenderSettings",
    "EngineSettings",
    "MediaSettings",
    "ModelSettings",
    "RaySettings",
    "ServerSettings",
    "Settings",
    "SettingsGroup",
    "WorkerSettings",
    "base64_size",
    "unknown_environment_settings",
    "usable_cores",
]
