"""The OpenAI chat-completions request, as far as this service reads it.

Message content stays loosely typed here (a string or a list of part objects): the
preprocessor walks the parts itself so that every error names the exact part. Fields this
service does not read itself (tools, response_format, top_k, ignore_eos, ...) are kept as
they came (`model_extra`) and go to the engine unchanged.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from ..core.errors import ServiceError
from ..derender import OutputOptions
from ..engines.prepared import SamplingParams

MAX_TOP_LOGPROBS = 20  # OpenAI's and vLLM's limit


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[Any] | None = None
    name: str | None = None


class StreamOptions(BaseModel):
    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    n: int = Field(1, ge=1)
    stop: str | list[str] | None = None
    seed: int | None = None
    user: str | None = None
    # vLLM's per-request media options: {"video": {"fps": ..., "num_frames": ..., "max_frames": ...}}
    media_io_kwargs: dict[str, Any] | None = None
    # vLLM's per-request processor options: sampling keys read as sampling, all passed on
    mm_processor_kwargs: dict[str, Any] | None = None
    _answer: AnswerFields | None = PrivateAttr(default=None)

    @property
    def answer(self) -> AnswerFields:
        """The fields about the answer's text that stay among the extra ones (an engine
        that forwards the request passes them on), checked."""
        if self._answer is None:
            self._answer = AnswerFields.model_validate(self.model_extra or {})
        return self._answer

    def sampling_params(self) -> SamplingParams:
        answer = self.answer
        return SamplingParams(
            max_tokens=self.max_completion_tokens or self.max_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            seed=self.seed,
            stop=tuple([self.stop] if isinstance(self.stop, str) else self.stop or ()),
            stop_token_ids=tuple(answer.stop_token_ids or ()),
            ignore_eos=answer.ignore_eos,
            min_tokens=answer.min_tokens,
            top_k=answer.top_k,
            logprobs=bool(answer.logprobs),
            top_logprobs=answer.top_logprobs or 0,
        )

    def output_options(self) -> OutputOptions:
        answer = self.answer
        kwargs = answer.chat_template_kwargs or {}
        return OutputOptions(
            include_stop_str_in_output=answer.include_stop_str_in_output,
            skip_special_tokens=answer.skip_special_tokens,
            spaces_between_special_tokens=answer.spaces_between_special_tokens,
            tools=tuple(tool.model_dump(exclude_none=True) for tool in answer.tools or ()),
            tool_choice=answer.tool_choice
            if isinstance(answer.tool_choice, str | None)
            else answer.tool_choice.model_dump(),
            enable_thinking=_enable_thinking(kwargs, (self.model_extra or {}).get("reasoning_effort")),
            chat_template_kwargs=dict(kwargs),
            include_reasoning=answer.include_reasoning,
            parallel_tool_calls=answer.parallel_tool_calls,
        )


class ToolFunction(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1)
    description: str | None = None
    parameters: dict[str, Any] | None = None


class Tool(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: Literal["function"] = "function"
    function: ToolFunction


class NamedFunction(BaseModel):
    name: str


class NamedToolChoice(BaseModel):
    type: Literal["function"] = "function"
    function: NamedFunction


def _enable_thinking(kwargs: dict[str, Any], reasoning_effort: Any) -> bool:
    """Whether the template was told to think, as vLLM's merged chat_template_kwargs say: the
    request's enable_thinking, else false for reasoning_effort "none" (app/render applies both)."""
    if kwargs.get("enable_thinking") is not None:
        return kwargs["enable_thinking"] is not False
    return reasoning_effort != "none"


class AnswerFields(BaseModel):
    """vLLM's and OpenAI's fields about the answer's text (app/derender applies them to
    token-out engines' answers). Kept in the request's extra fields as well: an engine
    that forwards the request passes them on."""

    model_config = ConfigDict(extra="ignore")

    stop_token_ids: list[int] | None = None
    include_stop_str_in_output: bool = False
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    ignore_eos: bool = False
    min_tokens: int = Field(0, ge=0)
    top_k: int | None = Field(None, ge=-1)
    logprobs: bool | None = None
    top_logprobs: int | None = Field(None, ge=0, le=MAX_TOP_LOGPROBS)
    tools: list[Tool] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    include_reasoning: bool = True
    parallel_tool_calls: bool = True

    @model_validator(mode="after")
    def _consistent(self) -> AnswerFields:
        if self.top_logprobs and not self.logprobs:
            raise _FieldError("top_logprobs", "top_logprobs needs logprobs: true")
        if any(token_id < 0 for token_id in self.stop_token_ids or ()):
            raise _FieldError("stop_token_ids", "token ids are 0 or more")
        if isinstance(self.tool_choice, NamedToolChoice):
            names = {tool.function.name for tool in self.tools or ()}
            if self.tool_choice.function.name not in names:
                raise _FieldError(
                    "tool_choice",
                    f"names the tool {self.tool_choice.function.name!r}, which tools does not hold",
                )
        elif self.tool_choice == "required" and not self.tools:
            raise _FieldError("tool_choice", '"required" needs tools')
        return self


# With --model, fields mmprep applies itself (the answer's, through app/derender; the
# template's, through app/render): an engine gets them as SamplingParams and the prompt, so
# its accepted_fields do not refuse them.
READ_WITH_MODEL = frozenset(AnswerFields.model_fields) | {
    "chat_template",
    "documents",
    "reasoning_effort",
    "add_generation_prompt",
    "continue_final_message",
}


class _FieldError(ValueError):
    """A check across fields that names the one at fault."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


def parse_chat_request(document: Any) -> ChatCompletionRequest:
    """The parsed JSON body as a ChatCompletionRequest, or a ServiceError naming the field."""
    if not isinstance(document, dict):
        raise ServiceError(
            f"the request body must be a JSON object (a chat request), not a JSON {_json_type(document)}",
            "invalid_request",
        )
    try:
        request = ChatCompletionRequest.model_validate(document)
        request.answer  # noqa: B018 - checks the answer's fields
    except ValidationError as error:
        first = error.errors()[0]
        cause = (first.get("ctx") or {}).get("error")
        if isinstance(cause, _FieldError):
            raise ServiceError(f"{cause.field}: {cause}", "invalid_request", cause.field) from None
        param = _param(first["loc"])
        raise ServiceError(
            f"{param}: {first['msg']}" if param else first["msg"], "invalid_request", param
        ) from None
    max_tokens = request.max_completion_tokens or request.max_tokens
    if max_tokens is not None and request.answer.min_tokens > max_tokens:
        raise ServiceError(
            f"min_tokens: {request.answer.min_tokens} is more than max_tokens ({max_tokens})",
            "invalid_request",
            "min_tokens",
        )
    return request


def _param(location: tuple) -> str | None:
    """A pydantic location as OpenAI names a field: messages[0].content."""
    text = ""
    for part in location:
        if isinstance(part, str) and not part.isidentifier():
            break  # a member of a union (literal['none','auto']): the field is named already
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or None


def _json_type(value: Any) -> str:
    return {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")
