"""What every settings group shares: one flat namespace of flags and MMPREP_* variables."""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict

ENV_PREFIX = "MMPREP_"


class SettingsGroup(BaseSettings):
    """One concern's settings. Each group reads the same flags and MMPREP_* variables as
    Settings (one flat namespace: `--max-frames`, MMPREP_MAX_FRAMES), so a room may take only
    the group it reads; checks within a group are the group's, checks across groups Settings'."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", cli_kebab_case=True)

    def _given(self, name: str) -> bool:
        """Whether setting `name` holds other than its default: a flag or variable set it."""
        return getattr(self, name) != type(self).model_fields[name].get_default(call_default_factory=True)
