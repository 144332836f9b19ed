"""What the client APIs beyond chat (/v1/messages, /v1/responses) share: their request
models' errors as 400s naming the field, and the chat request's field names said back in
the API's own (an image that fails to fetch is `messages[1].content[0].image_url` to the
pipeline and `messages[0].content[0].source` to an Anthropic client)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ...core.errors import ServiceError


class FieldError(ValueError):
    """A model validator's complaint about one field of the model it checks."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


def invalid(error: ValidationError) -> ServiceError:
    """A pydantic error of a client API's request model as the 400 that names its field: of
    a union's errors (one per member) the one that went deepest, the member that was meant."""
    first = max(error.errors(), key=lambda found: len(found["loc"]))
    place = location(first["loc"])
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, FieldError):
        field = f"{place}.{cause.field}" if place else cause.field
        return ServiceError(f"{field}: {cause}", "invalid_request", field)
    return ServiceError(f"{place}: {first['msg']}" if place else first["msg"], "invalid_request", place)


def location(parts: tuple) -> str | None:
    """A pydantic location as the APIs name a field (messages[0].content[1].source); the
    names pydantic gives union members (`str`, `list[Block]`, `literal['auto']`) are skipped."""
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part.isidentifier() and part not in _TYPE_NAMES:
            text += f".{part}" if text else part
    return text or None


_TYPE_NAMES = frozenset({"str", "int", "float", "bool", "dict", "list", "none"})


def body_object(document: Any, what: str) -> dict:
    if not isinstance(document, dict):
        raise ServiceError(f"the request body must be a JSON object ({what})", "invalid_request")
    return document


class FieldNames:
    """The chat request's field names that came from another name in the client's request."""

    def __init__(self) -> None:
        self._names: dict[str, str] = {}

    def add(self, chat: str, own: str) -> None:
        self._names[chat] = own

    def own(self, chat_param: str | None) -> str | None:
        """`chat_param` in the client's names: the longest known prefix replaced."""
        if chat_param is None:
            return None
        for chat in sorted(self._names, key=len, reverse=True):
            if chat_param == chat or chat_param.startswith((chat + ".", chat + "[")):
                return self._names[chat] + chat_param[len(chat) :]
        return chat_param

    def said_back(self, failure: ServiceError) -> tuple[str, str | None]:
        """The failure's message and param in the client's names."""
        param = self.own(failure.param)
        message = failure.message
        if failure.param and param != failure.param:
            message = message.replace(failure.param, param or "")
        return message, param
