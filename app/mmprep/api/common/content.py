"""A chat request's message content, typed once at the edge: each part text or a media part
of a modality (mmprep.modalities: its content part type, and the keys such a part may carry),
every error naming the exact part. What goes inward is the messages with each media part
replaced by a placeholder (`{"type": "video", "media_index": i}`) and the media parts
themselves, in order; preprocessing fetches and decodes them."""

from __future__ import annotations

from typing import Any

from ...core.errors import ServiceError
from ...modalities import BY_PART_TYPE, Modality
from ...preprocess import MediaPart


def typed_content(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], tuple[MediaPart, ...]]:
    """The messages with their media parts replaced by placeholders, and those parts.
    A long data URL stays the DataURL app/mmprep/transport/json_body.py made of it."""
    typed: list[dict[str, Any]] = []
    media: list[MediaPart] = []
    for i, message in enumerate(messages):
        content = message.get("content")
        if not isinstance(content, list):
            typed.append(message)
            continue
        parts: list[dict[str, Any]] = []
        for j, part in enumerate(content):
            where = f"messages[{i}].content[{j}]"
            modality = _modality_of(part, where)
            if modality is None:
                parts.append({"type": "text", "text": _text_of(part, where)})
                continue
            param = f"{where}.{part['type']}"
            url, options = modality.part_source(part["type"], part.get(part["type"]), param)
            parts.append({"type": modality.name, "media_index": len(media)})
            media.append(MediaPart(modality.name, url, options, param))
        typed.append({**message, "content": parts})
    return typed, tuple(media)


def _modality_of(part: Any, where: str) -> Modality[object] | None:
    """The modality a media part carries; None for a text part."""
    if not isinstance(part, dict) or not isinstance(part.get("type"), str):
        raise ServiceError(f"{where} must be an object with a 'type'", "invalid_content_part", where)
    kind = part["type"]
    if kind == "text":
        return None
    if kind in BY_PART_TYPE:
        return BY_PART_TYPE[kind]
    raise ServiceError(
        f"{where} has type {kind!r}; this server takes {', '.join(['text', *BY_PART_TYPE])} parts",
        "unsupported_content_type",
        f"{where}.type",
    )


def _text_of(part: dict, where: str) -> str:
    text = part.get("text")
    if not isinstance(text, str):
        raise ServiceError(f"{where}.text must be a string", "invalid_content_part", f"{where}.text")
    return text
