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

from .items import Field, FieldElem, Item

RAW_VIEW = 3  # vLLM's CUSTOM_TYPE_RAW_VIEW: an array's bytes, inline
_TORCH_DTYPES = {"float32", "float16", "bfloat16", "float64", "int64", "int32", "int16", "int8", "uint8", "bool"}


class ItemFormatError(ValueError):
    """Bytes that are not an encoded MultiModalKwargsItem."""


def encode_item(item: Item) -> str:
    """The base64 string vLLM's encode_mm_kwargs_item makes of this item."""
    document = {key: {"data": _tensor_or_list(elem.data), "field": [elem.field.kind, elem.field.keywords]}
                for key, elem in item.items()}
    return base64.b64encode(msgpack.packb(document, use_bin_type=True, default=_unsupported)).decode("ascii")


def _tensor_or_list(data: np.ndarray | list[float]) -> Any:
    if isinstance(data, np.ndarray):
        array = np.asarray(data)  # not ascontiguousarray: it makes a 0-d array 1-d
        dtype = str(array.dtype)
        if dtype not in _TORCH_DTYPES:
            raise TypeError(f"no torch dtype for numpy {dtype}")
        return [dtype, list(array.shape), msgpack.ExtType(RAW_VIEW, array.tobytes())]
    return [float(value) for value in data]


def _unsupported(value: Any) -> Any:
    raise TypeError(f"cannot encode {type(value).__name__}")


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
        if dtype not in _TORCH_DTYPES or dtype == "bfloat16" or not isinstance(raw, bytes):
            raise ItemFormatError(f"{key}: unreadable tensor of dtype {dtype!r}")
        array = np.frombuffer(raw, dtype=dtype)
        if array.size != int(np.prod(shape)):
            raise ItemFormatError(f"{key}: {array.size} values do not fill the shape {shape}")
        return array.reshape(shape)
    if isinstance(data, list) and all(isinstance(value, int | float) for value in data):
        return [float(value) for value in data]
    raise ItemFormatError(f"{key}: data is neither a tensor nor a list of numbers")
