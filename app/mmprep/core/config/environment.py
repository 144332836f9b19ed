"""The typo guard: an MMPREP_* variable that nothing reads stops the command, naming it."""

from __future__ import annotations

import os
from collections.abc import Mapping

from .group import ENV_PREFIX
from .settings import Settings
from .worker import WORKER_ENV_PREFIX, WorkerSettings

# The variables of the transformers engine (an --engine-class: mmprep.engines.transformers_engine,
# which takes its prefix from here and checks its own variables, since importing it imports torch).
TRANSFORMERS_ENV_PREFIX = ENV_PREFIX + "TRANSFORMERS_"
ENGINE_ENV_PREFIXES = (TRANSFORMERS_ENV_PREFIX,)


def unknown_environment_settings(environ: Mapping[str, str] = os.environ) -> list[str]:
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
