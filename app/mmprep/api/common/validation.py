"""A JSON body validated by a pydantic model, or a 400 naming the field at fault: the
completion request's, the render server's bodies (the chat request has its own reader,
chat_protocol.py, which names a field as field_name does)."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ...core.errors import ServiceError

Model = TypeVar("Model", bound=BaseModel)


def validated(model: type[Model], document: Any, what: str) -> Model:
    """`document` as `model`; `what` names the request in the message for a body that is not
    a JSON object."""
    if not isinstance(document, dict):
        raise ServiceError(f"the request body must be a JSON object ({what})", "invalid_request")
    try:
        return model.model_validate(document)
    except ValidationError as error:
        first = error.errors()[0]
        param = field_name(first["loc"])
        message = f"{param}: {first['msg']}" if param else first["msg"]
        raise ServiceError(message, "invalid_request", param) from None


def field_name(location: tuple) -> str | None:
    """A pydantic location as OpenAI names a field: prompt[1][0]. The members of a union
    (`list[int]`, `function-after[...]`) are not fields: the name stops before them."""
    text = ""
    for part in location:
        if isinstance(part, str) and not part.isidentifier():
            break
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or None
