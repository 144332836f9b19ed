"""The floating dtypes a processor's tensors come in, as numpy holds them, bfloat16 included.

vLLM's processor casts every floating tensor transformers' processor returns to the model's
dtype (as `BatchFeature.to(dtype)`; vllm/multimodal/processing/context.py
`_postprocess_output`), so a processor made for vLLM's wire writes its tensors in that dtype
(`Processor.in_dtype`). numpy has no bfloat16: a bfloat16 tensor is held as its raw 16-bit
patterns, a uint16 array whose dtype carries `{"torch": "bfloat16"}` as metadata
(`BFLOAT16`); numpy keeps that dtype through views, copies, `np.zeros` and assignment, not
through `np.concatenate`. `cast` rounds float values to a torch dtype as `tensor.to(dtype)`
does (bfloat16: to nearest, ties to even); `as_float32` gives them back as float32, exactly.
"""

from __future__ import annotations

import numpy as np

BFLOAT16 = np.dtype(np.uint16, metadata={"torch": "bfloat16"})
FLOAT_DTYPES = ("float32", "float16", "bfloat16")  # the dtypes a model runs in (vLLM's --dtype)


def torch_name(array: np.ndarray) -> str:
    """The torch dtype name of `array` ("float32", "bfloat16", "int64", ...)."""
    metadata = array.dtype.metadata
    if metadata and "torch" in metadata:
        return str(metadata["torch"])
    return str(array.dtype)


def is_float(array: np.ndarray) -> bool:
    """Whether `array` holds floating values (torch's is_floating_point), bfloat16 included."""
    return array.dtype.kind == "f" or torch_name(array) == "bfloat16"


def cast(array: np.ndarray, dtype: str) -> np.ndarray:
    """`array`'s values as torch's `tensor.to(dtype)` makes them, for a floating `dtype` (one
    of FLOAT_DTYPES): bfloat16 as BFLOAT16 bit patterns. An array already in `dtype` is returned
    as it is."""
    if torch_name(array) == dtype:
        return array
    if dtype != "bfloat16":
        return np.asarray(as_float32(array) if torch_name(array) == "bfloat16" else array, dtype=dtype)
    numbers = np.array(array, dtype=np.float32, order="C")  # a copy; a 0-d stays 0-d
    nan = np.isnan(numbers)
    round_to_bfloat16(numbers)
    rounded = (numbers.view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    return np.where(nan, np.uint16(0x7FC0), rounded).view(BFLOAT16)


def as_float32(array: np.ndarray) -> np.ndarray:
    """A floating array's values as float32 (a bfloat16 one's exactly: its bits shifted up)."""
    if torch_name(array) == "bfloat16":
        shifted = np.asarray(array).astype(np.uint32) << np.uint32(16)
        return np.asarray(shifted).view(np.float32)  # a 0-d stays an array
    return np.asarray(array, dtype=np.float32)


def round_to_bfloat16(numbers: np.ndarray) -> None:
    """float32 `numbers` rounded, in place, to the nearest bfloat16 (ties to even), as torch
    casts: the top 16 bits of each kept, so each is still a float32 of the same value."""
    bits = numbers.view(np.uint32)
    # every operand uint32: numpy 1.x would widen a 0-d array's shift by a Python int to int64
    bits += np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    bits &= np.uint32(0xFFFF0000)
