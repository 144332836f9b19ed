"""PreparedRequest: what preprocessing hands an engine. One object flows forward.

The chat's text stays where the client put it; each image or video part is replaced by a
placeholder part that points into `media`, which holds the decoded tensor and its metadata
(and, with a vision processor, the model's tensors made from it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mmprep.families import Kind, SampledVideo
from mmprep.processors import ProcessedMedia


@dataclass(frozen=True)
class SamplingParams:
    """How to generate: the OpenAI request's knobs, as an engine reads them."""

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()
    # Token-out engines (with --model). mmprep itself applies stop strings, stop token ids,
    # the model's EOS ids and min_tokens to what an engine returns, and closes the engine's
    # generation on a stop; an engine may apply them too, to stop sooner.
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    min_tokens: int = 0
    top_k: int | None = None
    logprobs: bool = False  # one TokenLogprob per output token
    top_logprobs: int = 0  # alternatives per token in each TokenLogprob.top


@dataclass(frozen=True)
class MediaItem:
    kind: Kind  # a modality's name (mmprep.modalities)
    tensor: np.ndarray  # uint8; video (T, H, W, 3), image (H, W, 3); RGB
    metadata: dict[str, Any]  # source metadata (VideoMetadata or ImageMetadata fields)
    param: str  # where the client put it, e.g. "messages[0].content[1].video_url"
    timestamps: np.ndarray | None = None  # video: seconds from the first frame, per frame
    indices: np.ndarray | None = None  # video: round(timestamp * fps), per frame
    hf_metadata: dict[str, Any] | None = None  # video: transformers' VideoMetadata fields
    # With --processor: the model's tensors for this item, named as transformers names them
    # (pixel_values_videos float32 + video_grid_thw int64, or pixel_values + image_grid_thw),
    # and the placeholder tokens it stands for. `tensor` holds the frames they were made from.
    processed: ProcessedMedia | None = None
    # An image's file as fetched, kept when its pixels are exactly what vLLM's own loader
    # makes of it (not scaled down by --max-pixels): vLLM keys such an image by its bytes.
    source: SourceImage | None = None

    def sampled_video(self) -> SampledVideo:
        """What the model family's rules read of this video: its frames' source indices
        (the metadata's, else `indices`, else their positions) and the source's rate."""
        meta = self.hf_metadata or {}
        given = meta.get("frames_indices")
        if given is not None:
            indices = [int(index) for index in given]
        elif self.indices is not None:
            indices = [int(index) for index in self.indices.tolist()]
        else:
            indices = list(range(len(self.tensor)))
        return SampledVideo(
            indices=tuple(indices),
            fps=meta.get("fps"),
            frames_indices=tuple(int(index) for index in given) if given is not None else None,
            total_num_frames=meta.get("total_num_frames"),
        )


@dataclass(frozen=True)
class SourceImage:
    """The bytes of an image file, and whether its pixels were `converted` to RGB (another
    mode, or transparency composited on white), which vLLM's hash records too."""

    data: bytes
    converted: bool


@dataclass(frozen=True)
class Placeholder:
    """Where one image or video sits in the prompt's token ids (vLLM's PlaceholderRange):
    `length` tokens from `offset`, standing for PreparedRequest.media[media_index]."""

    modality: Kind
    media_index: int
    offset: int
    length: int


# The dtype of a prompt's token ids: ids are never negative, and no vocabulary nears 2**32.
TOKEN_ID = np.dtype(np.uint32)


@dataclass(frozen=True, eq=False, init=False)
class TokenPrompt:
    """The prompt as a token-in engine takes it (with --model): the chat template rendered,
    tokenized, each image and video placeholder expanded to its processor's count.

    `token_ids` is a read-only 1-D uint32 array (any sequence of ints given is made one): a
    long prompt's ids go from the tokenizer's buffer to the answer's JSON without a Python
    int per token. `.tolist()` gives them as ints (`list()` would give numpy scalars)."""

    token_ids: np.ndarray
    placeholders: tuple[Placeholder, ...] = ()
    text: str = ""  # the rendered template, before the placeholders were expanded

    def __init__(
        self,
        token_ids: np.ndarray | Sequence[int],
        placeholders: tuple[Placeholder, ...] = (),
        text: str = "",
    ) -> None:
        ids = np.asarray(token_ids, dtype=TOKEN_ID)
        if ids.ndim != 1:
            raise ValueError(f"token_ids must be one sequence of ids, not of shape {ids.shape}")
        if ids.flags.writeable:  # a view, so that a caller's own array stays writable
            ids = ids.view()
            ids.flags.writeable = False
        object.__setattr__(self, "token_ids", ids)
        object.__setattr__(self, "placeholders", placeholders)
        object.__setattr__(self, "text", text)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TokenPrompt):
            return NotImplemented
        return (
            np.array_equal(self.token_ids, other.token_ids)
            and self.placeholders == other.placeholders
            and self.text == other.text
        )

    __hash__ = None  # type: ignore[assignment]  # equal prompts hold equal arrays: not hashable


@dataclass(frozen=True)
class PreparedRequest:
    request_id: str
    model: str
    # OpenAI-shaped messages; media parts are {"type": "image" | "video", "media_index": i}.
    messages: list[dict[str, Any]]
    media: list[MediaItem]
    sampling: SamplingParams = field(default_factory=SamplingParams)
    # Whether the client asked for a stream. Engines may ignore it (the service streams or
    # not either way); one that forwards the request, like the OpenAI upstream, mirrors it.
    stream: bool = False
    # The client's mm_processor_kwargs, unchanged: options for the model's processor (and
    # what vLLM hashes an item with). processor_kwargs() lays them over the server's.
    mm_processor_kwargs: dict[str, Any] | None = None
    # Every other field the client sent that mmprep does not read itself (tools,
    # response_format, top_k, ignore_eos, chat_template_kwargs, ...), unchanged.
    extra: dict[str, Any] = field(default_factory=dict)
    # With --model: the rendered prompt's token ids (media expanded); None otherwise.
    prompt: TokenPrompt | None = None
    # /v1/completions: the prompt as the client gave it (text, or token ids), with no chat
    # template and no messages; None for a chat. A token engine reads `prompt` (its ids) as
    # for a chat; an engine that forwards requests sends it as a completion.
    completion: str | tuple[int, ...] | None = None
    # The server's --mm-processor-kwargs: the processor's defaults, under the client's.
    mm_processor_defaults: dict[str, Any] = field(default_factory=dict)

    def processor_kwargs(self) -> dict[str, Any] | None:
        """The options the model's processor runs with: the client's mm_processor_kwargs over
        the server's, merged as vLLM merges them (merge_processor_kwargs); mmprep's own
        processor (--processor, --model) made the tensors with them. An engine that forwards
        the request sends these."""
        return merge_processor_kwargs(self.mm_processor_defaults, self.mm_processor_kwargs)

    def text(self) -> str:
        """All text parts in order, media shown as <image_i> / <video_i>; a completion's
        prompt (its ids' text with --model)."""
        if self.completion is not None:
            if isinstance(self.completion, str):
                return self.completion
            return self.prompt.text if self.prompt is not None else ""
        pieces = []
        for message in self.messages:
            content = message.get("content")
            if isinstance(content, str):
                pieces.append(content)
                continue
            for part in content or []:
                if part["type"] == "text":
                    pieces.append(part["text"])
                else:
                    pieces.append(f"<{part['type']}_{part['media_index']}>")
        return "\n".join(pieces)


# mm_processor_kwargs' scopes, each for one modality's processor, as vLLM 0.33 knows them.
PROCESSOR_KWARG_SCOPES = ("text_kwargs", "images_kwargs", "videos_kwargs", "audio_kwargs")


def merge_processor_kwargs(server: dict[str, Any], requested: dict[str, Any] | None) -> dict[str, Any] | None:
    """A request's mm_processor_kwargs over the server's, as vLLM 0.33 merges them before its
    processor runs (MultiModalConfig.merge_mm_processor_kwargs): the flat keys recursively (an
    object's keys merged, any other value replaced); within each scope (videos_kwargs, ...),
    for the keys either side's scope names, the server's flat key < the server's scoped < the
    request's flat < the request's scoped. The request's own when the server sets none."""
    if not server:
        return requested
    requested = requested or {}
    merged = _merged(
        {k: v for k, v in server.items() if k not in PROCESSOR_KWARG_SCOPES},
        {k: v for k, v in requested.items() if k not in PROCESSOR_KWARG_SCOPES},
    )
    for scope in PROCESSOR_KWARG_SCOPES:
        mine, theirs = server.get(scope), requested.get(scope)
        mine, theirs = (None if value == {} else value for value in (mine, theirs))  # empty: absent
        if mine is None and theirs is None:
            continue
        if theirs is not None and not isinstance(theirs, dict):  # no object to merge: replaced
            merged[scope] = theirs
            continue
        if not isinstance(mine, dict) and theirs is None:
            merged[scope] = mine
            continue
        mine, theirs = mine if isinstance(mine, dict) else {}, theirs or {}
        keys = mine.keys() | theirs.keys()
        value = _merged({k: v for k, v in server.items() if k in keys}, mine)
        value = _merged(value, {k: v for k, v in requested.items() if k in keys})
        merged[scope] = _merged(value, theirs)
    return merged


def _merged(under: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` laid on `under`: objects merged key by key, anything else replaced."""
    out = dict(under)
    for key, value in over.items():
        below = out.get(key)
        out[key] = _merged(below, value) if isinstance(below, dict) and isinstance(value, dict) else value
    return out
