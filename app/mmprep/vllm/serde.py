"""An item's wire form, byte for byte as vLLM's `encode_mm_kwargs_item` writes it
(vllm 0.33.0: entrypoints/scale_out/token_in_token_out/mm_serde.py over v1/serial_utils.py's
MsgpackEncoder with every tensor inline), and its reader.

The msgpack document is a map, key -> {"data": ..., "field": [factory, keywords]}:
- a tensor is [dtype, shape, ext 3 (raw bytes)], dtype as torch names it ("float32",
  "int64"), the bytes C-ordered;
- a list of numbers (Qwen3-VL's timestamps) is a msgpack array of floats;
- the field is MultiModalFieldConfig's factory name ("flat", "batched", "shared") and the
  field's dataclass values; a slice is [start, stop, step].
The whole is base64 (standard alphabet, padded). vLLM's MsgpackDecoder rebuilds the
MultiModalKwargsItem from it: tensors of the same dtype and shape, fields of the same type.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import msgpack
import numpy as np
import pybase64

from mmprep.processors import BFLOAT16, torch_name

from .items import Field, FieldElem, Item

RAW_VIEW = 3  # vLLM's CUSTOM_TYPE_RAW_VIEW: an array's bytes, inline
_TORCH_DTYPES = {
    "float32",
    "float16",
    "bfloat16",
    "float64",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "bool",
}


class ItemFormatError(ValueError):
    """Bytes that are not an encoded MultiModalKwargsItem."""


def encode_item(item: Item) -> str:
    """The base64 string vLLM's encode_mm_kwargs_item makes of this item."""
    return encode_item_bytes(item).decode("ascii")


def encode_item_bytes(item: Item) -> bytes:
    """encode_item as ASCII bytes."""
    return b"".join(encode_item_pieces(item))


def encode_item_pieces(item: Item) -> list[bytes]:
    """encode_item as ASCII pieces to be sent one after another. The msgpack is written
    piece by piece and base64'd as it goes, each tensor straight from its array, so its
    bytes (most of it: a 32-frame 720p video is some 360 MB of float32) are read once and
    never copied into one msgpack buffer first."""
    pack = msgpack.Packer(use_bin_type=True, autoreset=True)
    out = _Base64Writer()
    out.write(pack.pack_map_header(len(item)))
    for key, elem in item.items():
        out.write(pack.pack(key) + pack.pack_map_header(2) + pack.pack("data"))
        data = elem.data
        if isinstance(data, np.ndarray):
            dtype = torch_name(data)  # bfloat16: its bit patterns (dtypes.py)
            if dtype not in _TORCH_DTYPES:
                raise TypeError(f"no torch dtype for numpy {dtype}")
            raw = memoryview(np.ascontiguousarray(data).reshape(-1)).cast("B")  # C order, as torch's bytes
            # [dtype, shape, ext 3]: shape () for a 0-d array, as vLLM writes torch.Size([])
            out.write(pack.pack_array_header(3) + pack.pack(dtype) + pack.pack(list(data.shape)))
            out.write(ext_header(RAW_VIEW, raw.nbytes))
            out.write(raw)
        else:  # a list of Python numbers (Qwen3-VL's times; Gemma 4's token counts are ints)
            out.write(pack.pack([value if isinstance(value, int) else float(value) for value in data]))
        out.write(pack.pack("field") + pack.pack([elem.field.kind, elem.field.keywords]))
    return out.finish()


class _Base64Writer:
    """Base64 of everything written, in pieces: small writes wait in a buffer, a large one
    is encoded from its own memory, whole 3-byte groups at a time (base64 of a
    concatenation is the concatenation of base64s cut at multiples of 3 bytes). pybase64's
    SIMD encoder, the same bytes as the standard library's: a 720p image's 5.6 MB of
    patches in 0.7 ms against binascii's 8 to 19."""

    LARGE = 1 << 16

    def __init__(self) -> None:
        self.pending = bytearray()
        self.pieces: list[bytes] = []

    def write(self, data: bytes | memoryview) -> None:
        if len(data) < self.LARGE:
            self.pending += data
            return
        head = (-len(self.pending)) % 3  # what completes the pending bytes' last group
        self.pending += data[:head]
        self.pieces.append(pybase64.b64encode(self.pending))
        whole = head + (len(data) - head) // 3 * 3
        self.pieces.append(pybase64.b64encode(data[head:whole]))
        self.pending = bytearray(data[whole:])

    def finish(self) -> list[bytes]:
        self.pieces.append(pybase64.b64encode(self.pending))
        return [piece for piece in self.pieces if piece]


def ext_header(code: int, size: int) -> bytes:
    """msgpack's smallest ext header for `size` bytes, as msgspec (vLLM's encoder) writes it."""
    fixed = {1: 0xD4, 2: 0xD5, 4: 0xD6, 8: 0xD7, 16: 0xD8}
    if size in fixed:
        return bytes([fixed[size], code])
    if size < 2**8:
        return bytes([0xC7, size, code])
    if size < 2**16:
        return b"\xc8" + size.to_bytes(2, "big") + bytes([code])
    return b"\xc9" + size.to_bytes(4, "big") + bytes([code])


def decode_item(text: str) -> Item:
    """The item an encode_item string holds, as vLLM's decode_mm_kwargs_item would read it
    (for tests and vLLM-like servers: mmprep itself only writes)."""
    try:
        document = msgpack.unpackb(base64.b64decode(text, validate=True), ext_hook=_raw, strict_map_key=True)
    except (binascii.Error, ValueError, msgpack.UnpackException) as error:
        raise ItemFormatError(f"not a base64 msgpack item: {error}") from error
    if not isinstance(document, dict):
        raise ItemFormatError("an item must be a map of keys to elements")
    return {key: _elem(key, value) for key, value in document.items()}


def _raw(code: int, data: bytes) -> bytes:
    if code != RAW_VIEW:
        raise ItemFormatError(f"extension type {code} is not an inline tensor")
    return data


def _elem(key: str, value: Any) -> FieldElem:
    if not isinstance(value, dict) or set(value) != {"data", "field"}:
        raise ItemFormatError(f"{key}: an element is a map of data and field")
    kind, keywords = value["field"]
    if kind not in ("flat", "batched", "shared") or not isinstance(keywords, dict):
        raise ItemFormatError(f"{key}: unknown field {kind!r}")
    if kind == "flat":
        keywords = {**keywords, "slices": [tuple(tuple(s) for s in entry) for entry in keywords["slices"]]}
    return FieldElem(_data(key, value["data"]), Field(kind, keywords))


def _data(key: str, data: Any) -> np.ndarray | list[float]:
    if isinstance(data, list) and len(data) == 3 and isinstance(data[0], str):
        dtype, shape, raw = data
        if dtype not in _TORCH_DTYPES or not isinstance(raw, bytes):
            raise ItemFormatError(f"{key}: unreadable tensor of dtype {dtype!r}")
        array = np.frombuffer(raw, dtype=BFLOAT16 if dtype == "bfloat16" else dtype)
        if array.size != int(np.prod(shape)):
            raise ItemFormatError(f"{key}: {array.size} values do not fill the shape {shape}")
        return array.reshape(shape)
    if isinstance(data, list) and all(isinstance(value, int | float) for value in data):
        return [float(value) for value in data]
    raise ItemFormatError(f"{key}: data is neither a tensor nor a list of numbers")
