"""The OpenAI chat-completions request, typed once: every field mmprep reads is checked here
and a wrong one is a 400 naming it; the rooms inside take typed options (`ChatInput`,
`TemplateOptions`, `OutputOptions`, `SamplingParams`) and never check them again.

Message content is a string or a list of part objects here; `chat_input` types the parts
(content.py: text, or a media part of a modality, each error naming the exact part) and hands
preprocessing the media parts beside messages that hold a placeholder for each.
Fields vLLM defines that the engine may read too (tools, chat_template_kwargs, top_k,
ignore_eos, ...) are typed by AnswerFields and PromptFields but kept as they came
(`model_extra`): an engine that forwards the request passes them on unchanged.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)

from ...core.errors import ServiceError
from ...derender import OutputOptions
from ...interface.prepared import SamplingParams
from ...preprocess import ChatInput
from ...preprocess.options import PROCESSOR_SCOPES
from ...render import REASONING_EFFORTS, TemplateOptions
from .content import typed_content
from .validation import field_name

MAX_TOP_LOGPROBS = 20  # OpenAI's and vLLM's limit


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[Any] | None = None
    name: str | None = None

    def as_sent(self) -> dict[str, Any]:
        """The message as a plain object; a list content's parts as they came (a long data
        URL stays the DataURL app/mmprep/transport/json_body.py made of it)."""
        dumped = self.model_dump(exclude_none=True)
        if isinstance(self.content, list):
            dumped["content"] = self.content
        return dumped

    @model_validator(mode="after")
    def _calls_shaped(self) -> ChatMessage:
        """An assistant turn's tool calls, shaped as OpenAI's (what a template reads), as
        vLLM's message models check them; they stay among the extra fields, as sent."""
        calls = (self.model_extra or {}).get("tool_calls")
        if self.role == "assistant" and calls is not None:
            _check_tool_calls(calls)
        return self


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
    _prompt: PromptFields | None = PrivateAttr(default=None)

    @field_validator("media_io_kwargs")
    @classmethod
    def _video_an_object(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and value.get("video") is not None and not isinstance(value["video"], dict):
            raise _FieldError("media_io_kwargs.video", "must be an object", "invalid_sampling")
        return value

    @field_validator("mm_processor_kwargs")
    @classmethod
    def _scopes_objects(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        for scope in PROCESSOR_SCOPES:
            if (value or {}).get(scope) is not None and not isinstance((value or {})[scope], dict):
                raise _FieldError(f"mm_processor_kwargs.{scope}", "must be an object", "invalid_sampling")
        return value

    @property
    def answer(self) -> AnswerFields:
        """The fields about the answer's text that stay among the extra ones (an engine
        that forwards the request passes them on), checked."""
        if self._answer is None:
            self._answer = AnswerFields.model_validate(self.model_extra or {})
        return self._answer

    @property
    def prompt(self) -> PromptFields:
        """The fields the chat template reads that stay among the extra ones, checked."""
        if self._prompt is None:
            self._prompt = PromptFields.model_validate(self.model_extra or {})
        return self._prompt

    def chat_input(self) -> ChatInput:
        """The request as preprocessing takes it: typed, nothing left to check."""
        messages, media = typed_content([message.as_sent() for message in self.messages])
        return ChatInput(
            model=self.model,
            messages=messages,
            media=media,
            sampling=self.sampling_params(),
            stream=self.stream,
            template=self.template_options(),
            video_options=dict((self.media_io_kwargs or {}).get("video") or {}),
            mm_processor_kwargs=self.mm_processor_kwargs,
            extra=dict(self.model_extra or {}),
        )

    def template_options(self) -> TemplateOptions:
        """What the chat template reads (app/mmprep/render merges it as vLLM does). Tools and
        documents go as the client sent them: the renderer writes them as vLLM dumps them."""
        extra, prompt = self.model_extra or {}, self.prompt
        return TemplateOptions(
            tools=extra.get("tools"),
            documents=extra.get("documents"),
            add_generation_prompt=prompt.add_generation_prompt,
            continue_final_message=prompt.continue_final_message,
            chat_template_kwargs=dict(prompt.chat_template_kwargs or {}),
            chat_template=prompt.chat_template,
            reasoning_effort=prompt.reasoning_effort,
        )

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

    def output_options(self, tokens_as_ids: bool = False) -> OutputOptions:
        """`tokens_as_ids`: the server's --return-tokens-as-token-ids, under the request's own."""
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
            return_tokens_as_token_ids=_or(answer.return_tokens_as_token_ids, tokens_as_ids),
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


def _or(asked: bool | None, default: bool) -> bool:
    """The request's own choice, else the server's."""
    return default if asked is None else asked


def _enable_thinking(kwargs: dict[str, Any], reasoning_effort: Any) -> bool:
    """Whether the template was told to think, as vLLM's merged chat_template_kwargs say: the
    request's enable_thinking, else false for reasoning_effort "none" (app/mmprep/render applies both)."""
    if kwargs.get("enable_thinking") is not None:
        return kwargs["enable_thinking"] is not False
    return reasoning_effort != "none"


class AnswerFields(BaseModel):
    """vLLM's and OpenAI's fields about the answer's text (app/mmprep/derender applies them to
    token-out engines' answers). Kept in the request's extra fields as well: an engine
    that forwards the request passes them on."""

    model_config = ConfigDict(extra="ignore")

    stop_token_ids: list[int] | None = None
    include_stop_str_in_output: bool = False
    skip_special_tokens: bool | None = None  # None: the server's (its generation config's, else true)
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
    return_tokens_as_token_ids: bool | None = None  # vLLM's: logprobs' tokens as token_id:N

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


class PromptFields(BaseModel):
    """The fields the chat template reads (app/mmprep/render applies them with --model), as vLLM's
    request model types them. Kept in the request's extra fields as well, as AnswerFields."""

    model_config = ConfigDict(extra="ignore")

    documents: list[Any] | None = None
    add_generation_prompt: StrictBool = True
    continue_final_message: StrictBool = False
    chat_template: StrictStr | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    reasoning_effort: str | None = None

    @field_validator("documents")
    @classmethod
    def _documents_objects(cls, value: list[Any] | None) -> list[Any] | None:
        return _objects(value, "documents")

    @field_validator("reasoning_effort")
    @classmethod
    def _known_effort(cls, value: str | None) -> str | None:
        if value is not None and value not in REASONING_EFFORTS:
            raise _FieldError("reasoning_effort", f"must be one of {', '.join(REASONING_EFFORTS)}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> PromptFields:
        if self.add_generation_prompt and self.continue_final_message:
            raise _FieldError(
                "continue_final_message",
                "add_generation_prompt and continue_final_message cannot both be true (the first starts "
                "a new assistant turn, the second continues the last message); "
                "set add_generation_prompt to false",
            )
        # the kwargs' own tools, documents and template, where they count (null and "auto" do
        # not: vLLM's merge), as the request's; their documents only where the request has none
        kwargs = {k: v for k, v in (self.chat_template_kwargs or {}).items() if v is not None and v != "auto"}
        _objects(kwargs.get("tools"), "chat_template_kwargs.tools")
        if self.documents is None:
            _objects(kwargs.get("documents"), "documents")
        if not isinstance(kwargs.get("chat_template", ""), str):
            raise _FieldError(
                "chat_template_kwargs.chat_template", "must be a string (a Jinja chat template)"
            )
        return self


def _objects(value: Any, field: str) -> Any:
    if value is not None and not (isinstance(value, list) and all(isinstance(item, dict) for item in value)):
        raise _FieldError(field, "must be a list of objects")
    return value


def _check_tool_calls(calls: Any) -> None:
    """An assistant turn's calls, shaped as OpenAI's, or a _FieldError naming the first field
    that is not (relative to the message)."""
    if not isinstance(calls, list):
        raise _FieldError("tool_calls", "must be a list of tool calls")
    for j, call in enumerate(calls):
        here = f"tool_calls[{j}]"
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(call, dict) and call.get("type") != "function":  # vLLM's models require it
            raise _FieldError(
                f"{here}.type", "must be 'function' (the only tool calls chat completions have)"
            )
        if isinstance(call, dict) and not isinstance(call.get("id"), str):
            raise _FieldError(f"{here}.id", "must be a string (the call's id)")
        if not isinstance(function, dict):
            raise _FieldError(f"{here}.function", "must be an object with a name and arguments")
        for key in ("name", "arguments"):
            if not isinstance(function.get(key), str):
                raise _FieldError(f"{here}.function.{key}", "must be a string")


# With --model, fields mmprep applies itself (the answer's, through app/mmprep/derender; the
# template's, through app/mmprep/render): an engine gets them as SamplingParams and the prompt, so
# its accepted_fields do not refuse them.
READ_WITH_MODEL = frozenset(AnswerFields.model_fields) | frozenset(PromptFields.model_fields)


class _FieldError(ValueError):
    """A check that names the field at fault (relative to the model it checks), and the
    OpenAI error code of the answer."""

    def __init__(self, field: str, message: str, code: str = "invalid_request"):
        super().__init__(message)
        self.field, self.code = field, code


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
        request.prompt  # noqa: B018 - and the template's
    except ValidationError as error:
        first = error.errors()[0]
        cause = (first.get("ctx") or {}).get("error")
        if isinstance(cause, _FieldError):
            # a field of the top level, or of the message at `loc` (messages[1].tool_calls)
            within = field_name(_model_location(first["loc"]))
            field = f"{within}.{cause.field}" if within else cause.field
            raise ServiceError(f"{field}: {cause}", cause.code, field) from None
        param = field_name(first["loc"])
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


def _model_location(location: tuple) -> tuple:
    """Where the model whose validator failed sits: () at the top level, ("messages", 1) for a
    message; a field validator's own field name (the last part) is not part of it."""
    return location[:2] if location[:1] == ("messages",) else ()


def _json_type(value: Any) -> str:
    return {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")
