"""What a frontend and a remote worker say to each other.

The request is one safetensors file (the Hugging Face tensor format: 8 bytes of header
length, a JSON header, then the raw tensor bytes). Each distinct media tensor is one
tensor (with a vision processor, each of its tensors too: `media_0.pixel_values_videos`,
`media_0.video_grid_thw`); the messages, sampling parameters, per-item metadata and, with
--model, the token prompt (its ids, placeholders and text), and a completion's prompt as
given, are JSON strings in the header's `__metadata__`, as safetensors asks. The answer is
newline-delimited JSON: one EngineOutput per line (text, or a token-out engine's token ids
and their logprobs), or one error line.

Copies. The sender never builds the body: it sends the header, then memoryviews of the
frames themselves, a megabyte at a time. The receiver reads the body into one buffer and
takes numpy views of it. We do not call the `safetensors` package here: its numpy `save`
returns the whole file as one new bytes object (a second full copy of the frames) and its
`load` copies every tensor out of the buffer; the format itself is simple enough to write
and read directly, and the tests check both directions against the package.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from mmprep.processors import ProcessedMedia

from ..core.errors import ServiceError
from ..interface.engine import EngineHTTPError, EngineOutput, TokenLogprob
from ..interface.prepared import MediaItem, Placeholder, PreparedRequest, SamplingParams, TokenPrompt
from ..modalities import MODALITIES

FORMAT = "mmprep.tensor-request.v1"
REQUEST_CONTENT_TYPE = "application/octet-stream"
DELTA_CONTENT_TYPE = "application/x-ndjson"
CHUNK_BYTES = 1 << 20  # how much of a tensor each write hands the HTTP client
MAX_HEADER_BYTES = 100_000_000  # the limit safetensors itself sets

# safetensors dtype names and the little-endian numpy types they mean.
DTYPES = {
    "BOOL": np.dtype("?"),
    "U8": np.dtype("u1"),
    "I8": np.dtype("i1"),
    "U16": np.dtype("<u2"),
    "I16": np.dtype("<i2"),
    "F16": np.dtype("<f2"),
    "U32": np.dtype("<u4"),
    "I32": np.dtype("<i4"),
    "F32": np.dtype("<f4"),
    "U64": np.dtype("<u8"),
    "I64": np.dtype("<i8"),
    "F64": np.dtype("<f8"),
}
DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}


class WireError(ValueError):
    """A body or line that is not what this protocol says; the message says what is wrong."""


# -- the request ----------------------------------------------------------------------


@dataclass(frozen=True)
class TensorRequestBody:
    """A request ready to send: the safetensors header and the tensors it describes, in order."""

    header: bytes
    tensors: list[np.ndarray]

    @property
    def length(self) -> int:
        return len(self.header) + sum(tensor.nbytes for tensor in self.tensors)

    async def chunks(self):
        """The body as the HTTP client sends it: the header, then views into the tensors."""
        yield self.header
        for tensor in self.tensors:
            flat = tensor.reshape(-1).view(np.uint8).data  # a view of the frames: nothing copied
            for start in range(0, len(flat), CHUNK_BYTES):
                yield flat[start : start + CHUNK_BYTES]


def encode_request(request: PreparedRequest) -> TensorRequestBody:
    tensors = _TensorTable()
    media = [_describe_item(item, tensors) for item in request.media]
    metadata = {
        "format": FORMAT,
        "request_id": request.request_id,
        "model": request.model,
        "stream": json.dumps(request.stream),
        "messages": json.dumps(request.messages),
        "sampling": json.dumps(_sampling_fields(request.sampling)),
        "media": json.dumps(media),
        "mm_processor_kwargs": json.dumps(request.mm_processor_kwargs),
        "mm_processor_defaults": json.dumps(request.mm_processor_defaults),
        "extra": json.dumps(request.extra),
        "prompt": json.dumps(_prompt_fields(request.prompt)),
        "completion": json.dumps(
            list(request.completion) if isinstance(request.completion, tuple) else request.completion
        ),
    }
    header = json.dumps({"__metadata__": metadata, **tensors.entries}, separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)  # safetensors pads the header so the data starts 8-aligned
    return TensorRequestBody(struct.pack("<Q", len(header)) + header, tensors.tensors)


class _TensorTable:
    """The tensors of one request, each once: a tensor two parts share (the same video
    twice) is named and sent once."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.tensors: list[np.ndarray] = []
        self.entries: dict[str, dict] = {}
        self._offset = 0
        self._media = 0

    def add_media(self, frames: np.ndarray) -> str:
        """The name of a media item's decoded tensor: media_0, media_1, ... as they come."""
        if id(frames) not in self.names:
            self._media += 1
        return self.add(frames, f"media_{self._media - 1}")

    def add(self, tensor: np.ndarray, name: str) -> str:
        """The name `tensor` goes by: `name`, or the one it was given before."""
        if id(tensor) in self.names:
            return self.names[id(tensor)]
        self.names[id(tensor)] = name
        stored = _little_endian(tensor)
        self.entries[name] = {
            "dtype": DTYPE_NAMES[stored.dtype],
            "shape": list(stored.shape),
            "data_offsets": [self._offset, self._offset + stored.nbytes],
        }
        self._offset += stored.nbytes
        self.tensors.append(stored)
        return name


def decode_request(body: bytes | bytearray | memoryview) -> PreparedRequest:
    """The PreparedRequest in `body`. Its tensors are views into `body`, not copies:
    `np.frombuffer` over the byte ranges the header names, then a reshape."""
    header, data_start = _read_header(body)
    metadata = header.pop("__metadata__", None)
    tensors = _tensor_views(header, body, data_start)
    if not isinstance(metadata, dict) or metadata.get("format") != FORMAT:
        raise WireError(f"the header's __metadata__ must say format {FORMAT!r}")
    try:
        messages = _json_field(metadata, "messages", list)
        sampling = _json_field(metadata, "sampling", dict)
        media = [_media_item(entry, tensors) for entry in _json_field(metadata, "media", list)]
        return PreparedRequest(
            request_id=str(metadata["request_id"]),
            model=str(metadata["model"]),
            messages=messages,
            media=media,
            sampling=_sampling(sampling),
            stream=json.loads(metadata.get("stream", "false")) is True,
            mm_processor_kwargs=json.loads(metadata.get("mm_processor_kwargs", "null")),
            mm_processor_defaults=json.loads(metadata.get("mm_processor_defaults", "{}")),
            extra=json.loads(metadata.get("extra", "{}")),
            prompt=_prompt(json.loads(metadata.get("prompt", "null"))),
            completion=_completion(json.loads(metadata.get("completion", "null"))),
        )
    except WireError:
        raise
    except (KeyError, TypeError, ValueError) as error:
        raise WireError(f"malformed __metadata__: {type(error).__name__}: {error}") from error


def _little_endian(tensor: np.ndarray) -> np.ndarray:
    """The tensor as safetensors stores it: C-contiguous, little-endian. Decoded frames
    already are, so this returns the tensor itself, not a copy."""
    dtype = tensor.dtype.newbyteorder("<") if tensor.dtype.byteorder == ">" else tensor.dtype
    if dtype not in DTYPE_NAMES:
        raise WireError(f"a {tensor.dtype} tensor cannot go in a safetensors request")
    return np.ascontiguousarray(tensor, dtype=dtype)


def _describe_item(item: MediaItem, tensors: _TensorTable) -> dict[str, Any]:
    name = tensors.add_media(item.tensor)
    processed = None
    if item.processed is not None:  # the model's tensors, named after the frames they came from
        processed = {
            "num_tokens": item.processed.num_tokens,
            "tensors": {
                key: tensors.add(value, f"{name}.{key}") for key, value in item.processed.tensors.items()
            },
        }
    return {
        "kind": item.kind,
        "param": item.param,
        "tensor": name,
        "processed": processed,
        "metadata": item.metadata,
        "timestamps": None if item.timestamps is None else item.timestamps.tolist(),
        "indices": None if item.indices is None else item.indices.tolist(),
        "hf_metadata": item.hf_metadata,
    }


def _sampling_fields(sampling: SamplingParams) -> dict[str, Any]:
    fields = asdict(sampling)
    return fields | {"stop": list(sampling.stop), "stop_token_ids": list(sampling.stop_token_ids)}


def _sampling(fields: dict) -> SamplingParams:
    tuples = {key: tuple(fields[key]) for key in ("stop", "stop_token_ids") if key in fields}
    return SamplingParams(**{**fields, **tuples})


def _completion(value: Any) -> str | tuple[int, ...] | None:
    """A completion's prompt (/v1/completions): its text, or its token ids."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return tuple(value)
    raise WireError("completion must be a string, a list of token ids or null")


def _prompt_fields(prompt: TokenPrompt | None) -> dict[str, Any] | None:
    if prompt is None:
        return None
    return {
        "token_ids": prompt.token_ids.tolist(),
        "placeholders": [[p.modality, p.media_index, p.offset, p.length] for p in prompt.placeholders],
        "text": prompt.text,
    }


def _prompt(fields: dict | None) -> TokenPrompt | None:
    if fields is None:
        return None
    placeholders = tuple(
        Placeholder(modality, int(index), int(offset), int(length))
        for modality, index, offset, length in fields["placeholders"]
    )
    return TokenPrompt([int(token) for token in fields["token_ids"]], placeholders, str(fields["text"]))


def _read_header(body) -> tuple[dict, int]:
    if len(body) < 8:
        raise WireError(
            f"the body has {len(body)} bytes; a safetensors file starts with an 8-byte header length"
        )
    (size,) = struct.unpack_from("<Q", body, 0)
    if size > MAX_HEADER_BYTES or 8 + size > len(body):
        raise WireError(f"the header claims {size} bytes, but the body has {len(body) - 8} after the length")
    try:
        header = json.loads(bytes(body[8 : 8 + size]))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise WireError(f"the safetensors header is not JSON: {error}") from error
    if not isinstance(header, dict):
        raise WireError("the safetensors header must be a JSON object")
    return header, 8 + size


def _tensor_views(entries: dict, body, data_start: int) -> dict[str, np.ndarray]:
    """Views of every tensor the header names; their byte ranges must tile the data exactly,
    as safetensors requires (no gaps, no overlaps, nothing after the last)."""
    data_length = len(body) - data_start
    views, spans = {}, []
    for name, entry in entries.items():
        dtype, shape, begin, end = _tensor_entry(name, entry)
        count = math.prod(shape)
        if end - begin != count * dtype.itemsize or end > data_length:
            raise WireError(
                f"tensor {name!r}: bytes {begin}..{end} do not hold a {dtype} tensor of shape {shape} "
                f"within the {data_length} data bytes"
            )
        views[name] = np.frombuffer(body, dtype=dtype, count=count, offset=data_start + begin).reshape(shape)
        spans.append((begin, end))
    position = 0
    for begin, end in sorted(spans):
        if begin != position:
            raise WireError(f"the tensors' byte ranges leave a gap or overlap at byte {position}")
        position = end
    if position != data_length:
        raise WireError(f"the tensors cover {position} bytes, but {data_length} follow the header")
    return views


def _tensor_entry(name: str, entry: Any) -> tuple[np.dtype, list[int], int, int]:
    if not isinstance(entry, dict) or entry.get("dtype") not in DTYPES:
        raise WireError(f"tensor {name!r} needs a dtype, one of {', '.join(DTYPES)}")
    shape, offsets = entry.get("shape"), entry.get("data_offsets")
    if not isinstance(shape, list) or not all(isinstance(n, int) and n >= 0 for n in shape):
        raise WireError(f"tensor {name!r}: shape must be a list of non-negative integers")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(n, int) for n in offsets)):
        raise WireError(f"tensor {name!r}: data_offsets must be [begin, end]")
    begin, end = offsets
    if not 0 <= begin <= end:
        raise WireError(f"tensor {name!r}: data_offsets {offsets} go backwards")
    return DTYPES[entry["dtype"]], shape, begin, end


def _json_field(metadata: dict, key: str, kind: type):
    value = json.loads(metadata[key])
    if not isinstance(value, kind):
        raise WireError(f"__metadata__[{key!r}] must be a JSON {kind.__name__}")
    return value


def _media_item(entry: dict, tensors: dict[str, np.ndarray]) -> MediaItem:
    if entry["kind"] not in MODALITIES:
        raise WireError(
            f"media item {entry.get('param')!r} has kind {entry['kind']!r}; "
            f"expected one of {', '.join(MODALITIES)}"
        )
    processed = entry.get("processed")
    if processed is not None:
        named = {key: _named_tensor(entry, name, tensors) for key, name in processed["tensors"].items()}
        processed = ProcessedMedia(named, int(processed["num_tokens"]))
    return MediaItem(
        kind=entry["kind"],
        tensor=_named_tensor(entry, entry["tensor"], tensors),
        metadata=entry["metadata"],
        param=entry["param"],
        timestamps=None if entry["timestamps"] is None else np.asarray(entry["timestamps"], dtype=np.float64),
        indices=None if entry["indices"] is None else np.asarray(entry["indices"], dtype=np.int64),
        hf_metadata=entry["hf_metadata"],
        processed=processed,
    )


def _named_tensor(entry: dict, name: str, tensors: dict[str, np.ndarray]) -> np.ndarray:
    if name not in tensors:
        raise WireError(f"media item {entry.get('param')!r} names tensor {name!r}, which the body lacks")
    return tensors[name]


# -- the answer -----------------------------------------------------------------------


def encode_output(output: EngineOutput) -> bytes:
    """One line; fields left at their defaults are left out. A logprob is
    [token id, logprob, [[id, logprob], ...]]."""
    fields = {
        "text": output.text,
        "token_ids": list(output.token_ids),
        "logprobs": [[lp.token_id, lp.logprob, [list(pair) for pair in lp.top]] for lp in output.logprobs],
        "finish_reason": output.finish_reason,
        "prompt_tokens": output.prompt_tokens,
        "completion_tokens": output.completion_tokens,
    }
    return json.dumps({k: v for k, v in fields.items() if v not in (None, "", [])}).encode() + b"\n"


def _logprob(entry: list) -> TokenLogprob:
    token, logprob, top = entry
    return TokenLogprob(int(token), float(logprob), tuple((int(t), float(lp)) for t, lp in top))


def encode_error(error: ServiceError) -> bytes:
    return (
        json.dumps(
            {
                "error": {
                    "status": error.status,
                    "message": error.message,
                    "code": error.code,
                    "param": error.param,
                }
            }
        ).encode()
        + b"\n"
    )


def decode_line(line: str) -> EngineOutput:
    """One answer line: an EngineOutput, or the worker's error raised as EngineHTTPError."""
    try:
        fields = json.loads(line)
        if not isinstance(fields, dict):
            raise TypeError("not an object")
        if "error" in fields:
            error = fields["error"]
            raise EngineHTTPError(
                str(error["message"]), int(error["status"]), str(error["code"]), error.get("param")
            )
        return EngineOutput(
            text=str(fields.get("text", "")),
            token_ids=tuple(int(token) for token in fields.get("token_ids", ())),
            logprobs=tuple(_logprob(entry) for entry in fields.get("logprobs", ())),
            finish_reason=fields.get("finish_reason"),
            prompt_tokens=fields.get("prompt_tokens"),
            completion_tokens=fields.get("completion_tokens"),
        )
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        raise WireError(f"not an answer line ({error}): {line[:200]!r}") from error
