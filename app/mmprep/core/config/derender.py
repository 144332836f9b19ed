"""The answer's text (app/mmprep/derender): the parsers."""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator

from .group import SettingsGroup


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
