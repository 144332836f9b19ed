"""`TemplateOptions`: what a request says of its prompt's rendering, typed once at the edge
(app/mmprep/api/common/chat_protocol.py checks every type and names the field); the renderer
reads them as vLLM merges them and checks only what depends on this deployment (a request's
own template)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# vLLM's ReasoningEffort, the values reasoning_effort may take.
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")


@dataclass(frozen=True)
class TemplateOptions:
    """The request's fields the chat template reads, as the client sent them (types checked):
    tools and documents as lists of objects, the kwargs as an object (their own `tools` and
    `documents` lists of objects where given, their `chat_template` a string)."""

    tools: list[dict[str, Any]] | None = None
    documents: list[dict[str, Any]] | None = None
    add_generation_prompt: bool = True
    continue_final_message: bool = False  # never with add_generation_prompt (the edge refuses both)
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    chat_template: str | None = None
    reasoning_effort: str | None = None  # one of REASONING_EFFORTS
