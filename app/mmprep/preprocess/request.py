"""`ChatInput`: a chat request as preprocessing takes it, typed once at the edge (app/mmprep/api
checks every field and names the one at fault): the messages as plain objects with a
placeholder where each media part was, the media parts (`MediaPart`: a modality's URL and the
keys its part carries), the sampling, the template's options, the media options. Nothing here
is checked again; only what depends on this deployment (its limits, its processor) and the
media themselves can still be refused."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mmprep.families import Kind

from ..interface.prepared import SamplingParams
from ..media.data_url import DataURL
from ..render import TemplateOptions


@dataclass(frozen=True)
class MediaPart:
    """One media part of a request, typed at the edge."""

    kind: Kind  # its modality's name (mmprep.modalities)
    url: str | DataURL  # a long data URL arrives parsed (app/mmprep/transport/json_body.py)
    options: dict[str, Any]  # the keys the part carries besides its URL, checked by its modality
    param: str  # where the client put it, e.g. messages[0].content[1].video_url


@dataclass(frozen=True)
class ChatInput:
    model: str
    # OpenAI-shaped messages as the client sent them, each media part replaced by a placeholder
    # part, {"type": <its modality's name>, "media_index": <its index in `media`>}.
    messages: list[dict[str, Any]]
    media: tuple[MediaPart, ...] = ()
    sampling: SamplingParams = field(default_factory=SamplingParams)
    stream: bool = False
    template: TemplateOptions = field(default_factory=TemplateOptions)
    # media_io_kwargs.video (an object), and mm_processor_kwargs (an object whose
    # images_kwargs and videos_kwargs are objects), as sent.
    video_options: dict[str, Any] = field(default_factory=dict)
    mm_processor_kwargs: dict[str, Any] | None = None
    # Every other field the client sent that mmprep does not read itself, unchanged.
    extra: dict[str, Any] = field(default_factory=dict)
