"""`ChatInput`: a chat request as preprocessing takes it, typed once at the edge (app/mmprep/api
checks every field and names the one at fault): the messages as plain objects, the sampling,
the template's options, the media options. Nothing here is checked again; only what depends
on this deployment (its limits, its processor) and the media themselves can still be refused."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..interface.prepared import SamplingParams
from ..render import TemplateOptions


@dataclass(frozen=True)
class ChatInput:
    model: str
    # OpenAI-shaped messages as the client sent them; a list content's parts are walked by the
    # preprocessor, which names the exact part in every error (a part is a media URL to fetch).
    messages: list[dict[str, Any]]
    sampling: SamplingParams = field(default_factory=SamplingParams)
    stream: bool = False
    template: TemplateOptions = field(default_factory=TemplateOptions)
    # media_io_kwargs.video (an object), and mm_processor_kwargs (an object whose
    # images_kwargs and videos_kwargs are objects), as sent.
    video_options: dict[str, Any] = field(default_factory=dict)
    mm_processor_kwargs: dict[str, Any] | None = None
    # Every other field the client sent that mmprep does not read itself, unchanged.
    extra: dict[str, Any] = field(default_factory=dict)
