"""A PreparedRequest with a token prompt -> vLLM's GenerateRequest JSON (vllm 0.33.0:
entrypoints/scale_out/token_in_token_out/protocol.py), every field as its pydantic model
dumps it, so the body is what vLLM's own /v1/chat/completions/render would answer.

`features` carries, per modality (in the order the modalities first appear) and per item
in prompt order: `mm_hashes` (hashing.py), `mm_placeholders` ({offset, length}: vLLM's
PlaceholderRangeInfo has nothing more), `kwargs_data` (each item encoded, serde.py) and
`mm_metadata` (each item's keep-on-CPU keys alone, the grids and times, as vLLM's render
adds them for a prefill that takes its embeddings from elsewhere; _metadata_or_none).

vLLM 0.33.0 carries no is_embed mask: the generate endpoint takes every token of a range
for an embedding. A range that holds its embeddings as one run between markers goes as
that run (_embed_range). One whose embeddings are split by other tokens goes as one image
item per run where the family's model reads each run as an image (Family.vllm_image_runs:
a Qwen3-VL / Qwen3.5 video's temporal blocks, an InternVL or Gemma 4 video's frames, a
Llama 4 image's tiles, a Gemma 3 image's pan-and-scan views, the time stamps, labels and
words between them plain prompt tokens), each with its own hash derived from the item's
(hashing.run_hash); the render route (GenerateOptions.for_generate off) answers the one
item as vLLM's render does. A request with any other split range (Mistral 3's rows, which
Pixtral's encoder reads as one image) goes with its images as files instead
(content_parts.py: GenerateRequest.content_parts, processed by vLLM as its chat processes
them); the render route answers such an item whole, as vLLM's render does.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import orjson

from mmprep import families
from mmprep.processors import ProcessedMedia

from ..interface.engine import EngineError, EngineHTTPError
from ..interface.prepared import MediaItem, Placeholder, PreparedRequest, TokenPrompt
from .content_parts import media_parts
from .hashing import mm_hash, run_hash
from .items import Item, kwargs_items
from .options import GenerateOptions
from .sampling import sampling_params
from .serde import encode_item, encode_item_pieces
from .wire_cache import item_parts


def generate_request_body(
    request: PreparedRequest, options: GenerateOptions, changes: dict[str, Any] | None = None
) -> list[bytes]:
    """generate_request (with `changes` made to its fields) as JSON bytes, written as vLLM's
    render writes its answer (json_bytes), in pieces to send one after another (small ones
    joined, big ones as they were made: `coalesced`). The prompt's ids go from their array
    to the bytes; the encoded items (nearly all of a media request) are never made str nor
    scanned by json: each stands in the document as a placeholder string while it is
    dumped, then is put in its place."""
    items: list[list[bytes]] = []
    nonce = uuid.uuid4().hex

    def placeholder(item: Item) -> str:
        if options.wire_cache is None:
            items.append(encode_item_pieces(item))
        else:  # an item sent again: its pieces as written the last time (kept from the second)
            parts = ["item", *item_parts(item)]
            encode = functools.partial(encode_item_pieces, item)
            items.append(options.wire_cache.get_or_make(parts, encode, _pieces_bytes, keep_first=False))
        return f"{nonce}:{len(items) - 1}"

    body = {**_generate_request(request, options, placeholder), **(changes or {})}
    text = json_bytes(body)
    if not items:
        return [text]
    pieces: list[bytes] = []
    for index, part in enumerate(text.split(f'"{nonce}:'.encode())):
        if index:
            number, _, part = part.partition(b'"')
            pieces += [b'"', *items[int(number)], b'"']
        pieces.append(part)
    return list(coalesced(pieces))


def json_bytes(document: Any) -> bytes:
    """`document` as vLLM 0.33's render writes an answer (create_json_response): orjson, with
    numpy arrays as lists and non-string keys as strings. So non-ASCII text is UTF-8, not
    \\u-escaped, small floats are written as orjson writes them (1e-7, not 1e-07) and NaN as
    null, as vLLM's own answer has them. An integer past 64 bits, which orjson refuses, goes
    through the standard library as vLLM then writes it (Starlette's JSONResponse)."""
    try:
        return orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return json.dumps(
            document, default=_as_list, ensure_ascii=False, allow_nan=False, separators=(",", ":")
        ).encode()


def _as_list(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


# Runs of pieces smaller than this are joined into one (JSON punctuation, the headers of a
# tensor's encoding): a write per quote mark would cost more than the copy it saves.
SMALL_PIECE_BYTES = 64 * 1024


def coalesced(pieces: Iterable[bytes]) -> Iterator[bytes]:
    """The pieces with each run of small ones joined; big ones as they are, not copied."""
    run: list[bytes] = []
    for piece in pieces:
        if len(piece) < SMALL_PIECE_BYTES:
            run.append(piece)
            continue
        if run:
            yield b"".join(run)
            run = []
        yield piece
    if run:
        yield b"".join(run)


def generate_request(
    request: PreparedRequest, options: GenerateOptions, encode: Callable[[Item], str] = encode_item
) -> dict[str, Any]:
    """The GenerateRequest body for this request, as JSON values (CPU work: hashing and
    encoding the tensors). `encode`: how each item is written (serde.encode_item)."""
    body = _generate_request(request, options, encode)
    return {**body, "token_ids": body["token_ids"].tolist()}


def _generate_request(
    request: PreparedRequest, options: GenerateOptions, encode: Callable[[Item], str]
) -> dict[str, Any]:
    """generate_request, the prompt's ids left as their array."""
    prompt = _token_prompt(request)
    extra = request.extra
    chat = request.completion is None
    token_ids, parts = prompt.token_ids, None
    try:
        media = features(request, options, encode)
    except _SplitItem:  # no features can say it: the images as files, for vLLM to process
        media = None
        token_ids, parts = media_parts(request, prompt, options)
    return {
        "request_id": vllm_request_id(request.request_id),
        "token_ids": token_ids,
        "token_offsets": None,
        "features": media,
        "content_parts": parts,
        "sampling_params": sampling_params(
            request.sampling,
            request.stream,
            options.generation_defaults,
            extra,
            prompt_len=len(prompt.token_ids),
            max_model_len=options.max_model_len,
            max_tokens_cap=options.max_tokens_cap,
        ),
        "model": options.served_model,
        # vLLM's resolve_reasoning_ended without a reasoning parser: a request that hides the
        # reasoning has it ended from the first token (a completion's has none)
        "reasoning_ended": True if extra.get("include_reasoning") is False and chat else None,
        "reasoning_parser_kwargs": None,
        "return_token_ids": None,
        "output_mode": "tokens",
        "parse_context": parse_context(request) if chat else None,
        "stream": request.stream,
        # Usage comes in a last chunk; mmprep reports it.
        "stream_options": {"include_usage": True, "continuous_usage_stats": False}
        if request.stream
        else None,
        "cache_salt": _cache_salt(extra.get("cache_salt")),
        "priority": _priority(extra.get("priority", 0)),
        "kv_transfer_params": None,
        "ec_transfer_params": None,
    }


def completion_generate_request(
    request: PreparedRequest, options: GenerateOptions, request_id: str, stream_options: dict | None
) -> dict[str, Any]:
    """The GenerateRequest of one prompt of a completion request (a text prompt: no media),
    as vLLM's render_completion_request writes it: its own id ("cmpl-..."), the client's
    stream_options when streamed, and none of a chat's parse context."""
    body = generate_request(request, options)
    body.update(request_id=request_id, stream_options=stream_options if request.stream else None)
    return body


def vllm_request_id(request_id: str) -> str:
    """GenerateRequest.request_id as vLLM's render writes it: "chatcmpl-" and the client's
    X-Request-Id (or the request's own id), which mmprep's ids already start with."""
    return request_id if request_id.startswith(("chatcmpl-", "cmpl-")) else f"chatcmpl-{request_id}"


def random_request_id() -> str:
    """vLLM's random_uuid(): 16 hex digits, the low 64 bits of a UUID4."""
    return f"{uuid.uuid4().int & (2**64 - 1):016x}"


def parse_context(request: PreparedRequest) -> dict[str, Any]:
    """vLLM 0.33's ParseContext, as its render builds it from the chat request and dumps it:
    what a generate server with output_mode "derender" needs to parse the answer (0.32 has
    no such field and ignores it)."""
    extra = request.extra
    tools = extra.get("tools")
    if "tool_choice" in extra:
        tool_choice = extra["tool_choice"]
    else:  # vLLM's check_tool_usage: "auto" when tools are given, else its default "none"
        tool_choice = "auto" if tools else "none"
    if isinstance(tool_choice, dict):
        tool_choice = {"function": {"name": tool_choice["function"]["name"]}, "type": "function"}
    return {
        "tools": None if tools is None else [_tool(tool) for tool in tools],
        "tool_choice": tool_choice,
        "parallel_tool_calls": extra.get("parallel_tool_calls", True),
        "include_reasoning": extra.get("include_reasoning", True),
        "chat_template_kwargs": effective_template_kwargs(extra),
        "history_tool_call_cnt": sum(
            _count_calls(message.get("tool_calls"))
            for message in request.messages
            if isinstance(message, dict) and message.get("role") == "assistant"
        ),
    }


def effective_template_kwargs(extra: dict[str, Any]) -> dict[str, Any]:
    """vLLM's effective_chat_template_kwargs (build_chat_params, merge_kwargs): the client's
    chat_template_kwargs, then the template options it set that are not None or "auto"."""
    effort = extra.get("reasoning_effort")
    given = extra.get("chat_template_kwargs") or {}
    options = {
        "add_generation_prompt": extra.get("add_generation_prompt", True),
        "continue_final_message": extra.get("continue_final_message", False),
        "documents": extra.get("documents"),
        "reasoning_effort": effort,
    }
    if effort is not None and "enable_thinking" not in given:
        options["enable_thinking"] = effort != "none"
    return {**given, **{key: value for key, value in options.items() if value not in (None, "auto")}}


def _tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool as vLLM's ChatCompletionToolsParam dumps it: its own fields alone, strict and
    defer_loading only when set."""
    function = tool["function"]
    defer = tool.get("defer_loading")
    dumped = {
        "name": function["name"],
        "description": function.get("description"),
        "parameters": function.get("parameters"),
    }
    if function.get("strict") is not None:
        dumped["strict"] = function["strict"]
    function_defer = function.get("defer_loading")
    if function_defer is None:
        function_defer = defer  # vLLM's _propagate_defer_loading
    if function_defer is not None:
        dumped["defer_loading"] = function_defer
    out = {"type": "function", "function": dumped}
    if defer is not None:
        out["defer_loading"] = defer
    return out


def _count_calls(calls: Any) -> int:
    """vLLM's count_tool_calls."""
    if calls is None:
        return 0
    if isinstance(calls, str | bytes | dict):
        return 1
    return len(calls) if isinstance(calls, list | tuple) else 1


def features(
    request: PreparedRequest, options: GenerateOptions, encode: Callable[[Item], str] = encode_item
) -> dict[str, Any] | None:
    """MultiModalFeatures for the prompt's media, None for a text-only prompt."""
    prompt = _token_prompt(request)
    placeholders = sorted(prompt.placeholders, key=lambda placeholder: placeholder.offset)
    if not placeholders:
        return None
    entries = [
        entry
        for placeholder in placeholders
        for entry in _entries(placeholder, _media(request, placeholder), prompt.token_ids, options)
    ]
    entries.sort(key=lambda entry: entry.placeholder.offset)  # a video's runs among the images
    by_modality: dict[families.Kind, list[_Entry]] = {}
    for entry in entries:
        by_modality.setdefault(entry.placeholder.modality, []).append(entry)
    hashes: dict[str, list[str]] = {}
    ranges: dict[str, list[dict[str, int]]] = {}
    kwargs_data: dict[str, list[str]] = {}
    metadata: dict[str, list[str | None]] = {}
    for modality, group in by_modality.items():
        media = [entry.item for entry in group]
        items = kwargs_items(
            media, options.family or "", options.temporal_patch_size, options.vision_token_ids, options.dtype
        )
        hashes[modality] = _hashes(group, request, options)
        ranges[modality] = [{"offset": e.placeholder.offset, "length": e.placeholder.length} for e in group]
        kwargs_data[modality] = [encode(item) for item in items]
        metadata[modality] = [encode(kept) if (kept := _on_cpu(item)) else None for item in items]
    return {
        "mm_hashes": hashes,
        "mm_placeholders": ranges,
        "kwargs_data": kwargs_data,
        "mm_metadata": _metadata_or_none(metadata),
    }


def _metadata_or_none(metadata: dict[str, list[str | None]]) -> dict[str, list[str | None]] | None:
    """mm_metadata as vLLM 0.33's render writes it where that is valid: None when no item keeps
    anything on the CPU, each item without such keys None. vLLM's render leaves out a modality
    whose items keep nothing, which its own MultiModalFeatures refuses beside a modality that
    keeps something ("mm_metadata must use the same modalities as mm_hashes": a Gemma 4 video
    beside an image or an audio); mmprep lists every modality then."""
    if all(text is None for texts in metadata.values() for text in texts):
        return None
    return metadata


@dataclass(frozen=True)
class _Entry:
    """One item as it goes on the wire: its range, what is written for it, and for one run
    of an item sent as several (Family.vllm_image_runs) the run's index; `source` is the
    request's item, whose hash the entry's comes from."""

    placeholder: Placeholder
    item: MediaItem
    source: MediaItem
    run: int | None = None


def _entries(
    placeholder: Placeholder, item: MediaItem, token_ids: np.ndarray, options: GenerateOptions
) -> list[_Entry]:
    """The item whole (its range narrowed to its embeddings' run where that is one run), or
    one image item per run of its embeddings where its family says how vLLM's model reads
    them. An item split otherwise: for the render route whole, as vLLM's render answers it;
    for the generate endpoint _SplitItem (the request then goes as content_parts.py writes
    it), or a 400 where its runs are not the family's."""
    assert item.processed is not None  # _media refuses an item without processed tensors
    token = _pad_token(options, placeholder.modality)
    rules = families.find(options.family)
    runs = None if rules is None else rules.vllm_image_runs(rules.sides[item.kind], item.processed.tensors)
    if runs is None or placeholder.length == item.processed.num_tokens:  # nothing but embeddings
        narrowed = _embed_range(placeholder, item, token_ids, token)
        if narrowed is not None:
            return [_Entry(narrowed, item, item)]
        if options.for_generate:
            raise _SplitItem(item.param)
        return [_Entry(placeholder, item, item)]
    if not options.for_generate:  # the render route: the one item, as vLLM's render answers
        return [_Entry(placeholder, item, item)]
    assert rules is not None
    kind = rules.image.modality
    # the embeddings' token: the item's own (Qwen3-VL's video pads, Gemma 4's <|video|>), or
    # the image's where the prompt writes that in the item's frames (InternVL's <IMG_CONTEXT>)
    span = token_ids[placeholder.offset : placeholder.offset + placeholder.length]
    spans = _runs_of(span, token)
    if not spans:
        spans = _runs_of(span, _pad_token(options, kind))
    if len(spans) != len(runs) or sum(length for _, length in spans) != item.processed.num_tokens:
        raise _unsupported(placeholder, item)
    return [
        _Entry(
            Placeholder(kind, placeholder.media_index, placeholder.offset + start, length),
            replace(item, kind=kind, processed=ProcessedMedia(tensors, length), source=None),
            item,
            index,
        )
        for index, ((start, length), tensors) in enumerate(zip(spans, runs, strict=True))
    ]


def _token_prompt(request: PreparedRequest) -> TokenPrompt:
    if request.prompt is None:
        raise EngineError(
            "vLLM's generate endpoint takes token ids: start mmprep with --model, so requests are rendered"
        )
    return request.prompt


def _media(request: PreparedRequest, placeholder: Placeholder) -> MediaItem:
    if not 0 <= placeholder.media_index < len(request.media):
        raise EngineError(
            f"a placeholder points at media item {placeholder.media_index}, which the request lacks"
        )
    item = request.media[placeholder.media_index]
    if item.processed is None:
        raise EngineHTTPError(
            f"{item.param}: vLLM's generate endpoint takes processed tensors; start mmprep with --processor",
            400,
            "processor_needed",
            item.param,
        )
    return item


def _pad_token(options: GenerateOptions, modality: families.Kind) -> int | None:
    """The token that stands for one embedding of `modality` in this model's prompts."""
    if options.family is None:
        return None
    key = families.get(options.family).sides[modality].token_key
    return options.vision_token_ids.get(key)


class _SplitItem(Exception):
    """An item whose embeddings other tokens split where its family gives no image runs
    (Mistral 3's rows): no features vLLM 0.33.0's generate endpoint takes can say it."""


def _embed_range(
    placeholder: Placeholder, item: MediaItem, token_ids: np.ndarray, token: int | None
) -> Placeholder | None:
    """The range vLLM 0.33.0's generate endpoint can take for the item: it has no is_embed
    mask, so it takes every token of a range for an embedding. A range that holds its
    embeddings as one run between other tokens (Gemma 4's and InternVL's begin and end
    markers) goes as that run alone: vLLM's runner finds the same run in its own range
    (PlaceholderRange.extract_embeds_range), so the engine merges and attends alike. None
    for a range whose embeddings are split (Mistral 3's rows)."""
    assert item.processed is not None  # _media refuses an item without processed tensors
    embeddings = item.processed.num_tokens
    if placeholder.length == embeddings:
        return placeholder
    span = token_ids[placeholder.offset : placeholder.offset + placeholder.length]
    runs = _runs_of(span, token)
    if len(runs) == 1 and runs[0][1] == embeddings:
        start, length = runs[0]
        return replace(placeholder, offset=placeholder.offset + start, length=length)
    return None


def _unsupported(placeholder: Placeholder, item: MediaItem) -> EngineHTTPError:
    assert item.processed is not None
    return EngineHTTPError(
        f"{item.param}: its {placeholder.length} prompt tokens hold {item.processed.num_tokens} {item.kind} "
        "embeddings split among other tokens, and vLLM's generate protocol (0.33.0) carries no is_embed "
        f"mask to say which: a vLLM upstream cannot take this {item.kind} as tokens (--engine openai takes "
        "it, with --upstream-frame-format png for exact frames: docs/deployment.md)",
        400,
        "unsupported_placeholder",
        item.param,
    )


def _runs_of(span: np.ndarray, token: int | None) -> list[tuple[int, int]]:
    """(start, length) of each run of `token` in `span`."""
    if token is None:
        return []
    hits = np.concatenate(([False], span == token, [False]))
    edges = np.flatnonzero(hits[1:] != hits[:-1]).tolist()  # each run's start, then its end
    return [(start, end - start) for start, end in zip(edges[::2], edges[1::2], strict=True)]


def _hashes(group: list[_Entry], request: PreparedRequest, options: GenerateOptions) -> list[str]:
    """One hash per entry: its item's, or for one run of an item sent as several the run's,
    derived from the item's (run_hash); the same media twice is hashed once; media hashed
    before (the same cached tensors, the same metadata and options) not again (wire_cache.py)."""
    done: dict[int, str] = {}
    for item in (entry.source for entry in group):
        if id(item.tensor) not in done:

            def digest(item: MediaItem = item) -> str:
                return mm_hash(
                    item,
                    options.model_id,
                    request.mm_processor_kwargs,
                    options.hash_algorithm,
                    options.family,
                )

            if options.wire_cache is None:
                done[id(item.tensor)] = digest()
            else:
                factors = (
                    options.model_id,
                    options.family,
                    repr(request.mm_processor_kwargs),
                    options.hash_algorithm,
                )
                parts = ["mm_hash", item.tensor, repr(item.hf_metadata), repr(item.metadata), *factors]
                done[id(item.tensor)] = options.wire_cache.get_or_make(parts, digest, len)
    return [
        done[id(entry.source.tensor)]
        if entry.run is None
        else run_hash(done[id(entry.source.tensor)], entry.run, options.hash_algorithm)
        for entry in group
    ]


def _pieces_bytes(pieces: list[bytes]) -> int:
    return sum(len(piece) for piece in pieces)


def _on_cpu(item: Item) -> Item:
    """The keys vLLM's render puts in mm_metadata: those kept on the CPU."""
    return {key: elem for key, elem in item.items() if elem.field.keywords.get("keep_on_cpu")}


def _cache_salt(salt: Any) -> str | None:
    if salt is None:
        return None
    if not isinstance(salt, str) or not salt or len(salt) > 128 or any(char in salt for char in "@/\\\0"):
        raise EngineHTTPError(
            "cache_salt must be a non-empty string of at most 128 characters without '@', '/', '\\' or NUL",
            400,
            "invalid_request",
            "cache_salt",
        )
    return salt


def _priority(priority: Any) -> int:
    if isinstance(priority, bool) or not isinstance(priority, int) or not -(2**63) <= priority < 2**63:
        raise EngineHTTPError("priority must be a 64-bit integer", 400, "invalid_request", "priority")
    return priority
