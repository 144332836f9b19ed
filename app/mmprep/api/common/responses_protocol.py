"""OpenAI's Responses request as the chat request vLLM 0.33 makes of it (its non-harmony
construct_input_messages), what /v1/responses serves and /v1/responses/render renders:
instructions as the system message; a string input as the user's turn; message items with
their text and image parts; function_call items as the assistant's tool calls, merged into
the turn before; function_call_output items as tool messages; reasoning items as the turn's
reasoning. Nothing is stored: `previous_response_id` and `background` are refused.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ...core.errors import ServiceError
from .chat_protocol import ChatCompletionRequest, parse_chat_request
from .translation import FieldError, FieldNames, body_object, invalid

# the content parts a message item may hold, as the chat part each becomes (mmprep's own
# image_url and video_url parts are taken too: a video has no Responses part of its own)
TEXT_PARTS = frozenset({"input_text", "output_text", "text"})
IMAGE_PARTS = frozenset({"input_image", "image_url"})


# OpenAI's fields about storage, caching and accounting that change nothing of the answer
# here: read and dropped, not passed on (an engine that takes only its own fields would refuse them)
DROPPED = frozenset({"include", "service_tier", "prompt_cache_key", "safety_identifier", "max_tool_calls"})


class FunctionTool(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["function"]
    name: str = Field(min_length=1)
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class NamedFunction(BaseModel):
    type: Literal["function"]
    name: str


class Reasoning(BaseModel):
    model_config = ConfigDict(extra="allow")

    effort: str | None = None
    summary: str | None = None


class ResponsesRequest(BaseModel):
    """The request as vLLM's ResponsesRequest types the fields mmprep serves; other fields
    go on to the chat request as they came, as a chat request's extra fields do."""

    model_config = ConfigDict(extra="allow")

    model: str
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    max_output_tokens: int | None = Field(None, ge=1)
    tools: list[FunctionTool] = []
    tool_choice: Literal["auto", "none", "required"] | NamedFunction = "auto"
    parallel_tool_calls: bool = True
    reasoning: Reasoning | None = None
    stream: bool = False
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    user: str | None = None
    metadata: dict[str, str] | None = None
    store: bool = True  # accepted, and nothing stored (vLLM's default, without its store)
    previous_response_id: str | None = None
    background: bool = False
    text: dict[str, Any] | None = None
    truncation: Literal["auto", "disabled"] = "disabled"
    chat_template_kwargs: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _served(self) -> ResponsesRequest:
        if self.previous_response_id is not None:
            raise FieldError(
                "previous_response_id",
                "this server stores no responses: send the whole conversation as input",
            )
        if self.background:
            raise FieldError(
                "background", "this server stores no responses, so it runs none in the background"
            )
        fmt = (self.text or {}).get("format")
        if isinstance(fmt, dict) and fmt.get("type", "text") != "text":
            raise FieldError("text.format", "structured outputs are not applied by this server: ask for text")
        return self


class ResponsesToChat:
    """One Responses request as a chat request: the request as typed (`request`, once read),
    the chat request's field names kept in the client's (`names`)."""

    def __init__(self) -> None:
        self.names = FieldNames()
        self.request: ResponsesRequest | None = None

    def chat_request(self, document: Any) -> ChatCompletionRequest:
        return parse_chat_request(self.chat_document_of(document))

    def chat_document_of(self, document: Any) -> dict[str, Any]:
        """The JSON body as the chat request's JSON (what /v1/responses/render renders too)."""
        try:
            request = ResponsesRequest.model_validate(body_object(document, "a responses request"))
        except ValidationError as error:
            raise invalid(error) from None
        self.request = request
        return self.chat_document(request)

    def chat_document(self, request: ResponsesRequest) -> dict[str, Any]:
        extra = {name: value for name, value in (request.model_extra or {}).items() if name not in DROPPED}
        chat: dict[str, Any] = {
            **extra,
            "model": request.model,
            "messages": self._messages(request),
            "stream": request.stream,
        }
        if request.stream:
            chat["stream_options"] = {"include_usage": True}  # response.completed carries the usage
        if request.max_output_tokens is not None:
            chat["max_tokens"] = request.max_output_tokens
            self.names.add("max_completion_tokens", "max_output_tokens")
            self.names.add("max_tokens", "max_output_tokens")
        for field in ("temperature", "top_p", "top_k", "user", "chat_template_kwargs"):
            if getattr(request, field) is not None:
                chat[field] = getattr(request, field)
        if request.reasoning is not None and request.reasoning.effort is not None:
            chat["reasoning_effort"] = request.reasoning.effort
            self.names.add("reasoning_effort", "reasoning.effort")
        if request.tools:
            chat["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                }
                for tool in request.tools
            ]
            for i in range(len(request.tools)):
                self.names.add(f"tools[{i}].function", f"tools[{i}]")
            choice = request.tool_choice
            chat["tool_choice"] = (
                choice if isinstance(choice, str) else {"type": "function", "function": {"name": choice.name}}
            )
            chat["parallel_tool_calls"] = request.parallel_tool_calls
        return chat

    def _messages(self, request: ResponsesRequest) -> list[dict[str, Any]]:
        chat: list[dict[str, Any]] = []
        if request.instructions:
            chat.append({"role": "system", "content": request.instructions})
        if isinstance(request.input, str):
            self.names.add(f"messages[{len(chat)}]", "input")
            chat.append({"role": "user", "content": request.input})
            return chat
        for i, item in enumerate(request.input):
            self._item(item, f"input[{i}]", chat)
        if not chat:
            raise ServiceError("input: must hold at least one message", "invalid_request", "input")
        return chat

    def _item(self, item: dict[str, Any], where: str, chat: list[dict[str, Any]]) -> None:
        """One input item into the chat messages, as vLLM's _construct_message_from_response_item."""
        kind = item.get("type", "message" if "role" in item else None)
        last = chat[-1] if chat and chat[-1]["role"] == "assistant" else None
        if kind == "function_call":
            call = {
                "id": _string(item, "call_id", where),
                "type": "function",
                "function": {
                    "name": _string(item, "name", where),
                    "arguments": _string(item, "arguments", where),
                },
            }
            if last is not None:
                last.setdefault("tool_calls", []).append(call)
            else:
                chat.append({"role": "assistant", "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            text = output if isinstance(output, str) else _texts(output, f"{where}.output")
            chat.append({"role": "tool", "tool_call_id": _string(item, "call_id", where), "content": text})
        elif kind == "reasoning":
            parts = item.get("content") or item.get("summary") or []
            reasoning = _texts(parts[:1], f"{where}.content") if isinstance(parts, list) else ""
            if last is not None and "reasoning" not in last:
                last["reasoning"] = reasoning
            else:
                chat.append({"role": "assistant", "reasoning": reasoning})
        elif kind == "message":
            self._message(item, where, chat, last)
        else:
            raise ServiceError(
                f"{where}.type: {kind!r} is not an input item this server takes "
                "(message, function_call, function_call_output, reasoning)",
                "invalid_request",
                f"{where}.type",
            )

    def _message(
        self, item: dict[str, Any], where: str, chat: list[dict[str, Any]], last: dict[str, Any] | None
    ) -> None:
        role = item.get("role")
        if role not in ("user", "system", "developer", "assistant"):
            raise ServiceError(
                f"{where}.role: must be user, system, developer or assistant",
                "invalid_request",
                f"{where}.role",
            )
        content = item.get("content")
        if role == "assistant":  # its text (vLLM keeps the first part's), merged into the turn before
            text = content if isinstance(content, str) else _texts(content, f"{where}.content")
            if last is not None and last.get("content") is None:
                last["content"] = text
            else:
                chat.append({"role": "assistant", "content": text})
            return
        self.names.add(f"messages[{len(chat)}]", where)
        if isinstance(content, str):
            chat.append({"role": role, "content": content})
            return
        if not isinstance(content, list):
            raise ServiceError(
                f"{where}.content: must be a string or a list of parts", "invalid_request", f"{where}.content"
            )
        chat.append(
            {
                "role": role,
                "content": [self._part(part, f"{where}.content[{j}]") for j, part in enumerate(content)],
            }
        )

    def _part(self, part: Any, where: str) -> dict[str, Any]:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in TEXT_PARTS and isinstance(part.get("text"), str):
            return {"type": "text", "text": part["text"]}
        if kind == "input_image":
            url = part.get("image_url")
            if not isinstance(url, str) or not url:
                what = (
                    "file_id images are not taken (nothing is uploaded here)"
                    if "file_id" in part
                    else "needs its image_url"
                )
                raise ServiceError(f"{where}.image_url: {what}", "invalid_content_part", f"{where}.image_url")
            return {"type": "image_url", "image_url": {"url": url}}
        if kind in ("image_url", "video_url"):
            return part
        raise ServiceError(
            f"{where}: a part of type {kind!r} is not taken here (input_text, input_image)",
            "invalid_content_part",
            where,
        )


def _string(item: dict[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str):
        raise ServiceError(f"{where}.{key}: must be a string", "invalid_request", f"{where}.{key}")
    return value


def _texts(parts: Any, where: str) -> str:
    """The text of a list of text parts, joined."""
    if not isinstance(parts, list):
        raise ServiceError(f"{where}: must be a string or a list of text parts", "invalid_request", where)
    texts = []
    for j, part in enumerate(parts):
        if not isinstance(part, dict) or not isinstance(part.get("text"), str):
            raise ServiceError(f"{where}[{j}]: must be a text part", "invalid_content_part", f"{where}[{j}]")
        texts.append(part["text"])
    return "".join(texts)
