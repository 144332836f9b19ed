"""The floating dtypes of vLLM's tensors as numpy holds them, bfloat16 included.

numpy has no bfloat16: a bfloat16 tensor is held as its raw 16-bit patterns, a uint16
array whose dtype carries `{"torch": "bfloat16"}` as metadata (`BFLOAT16`); serde.py writes
it as torch's "bfloat16" and reads it back so. `cast` rounds float values to a torch dtype
as `tensor.to(dtype)` does (bfloat16: to nearest, ties to even); `values` gives them back as
float32, exactly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mmprep.processors import round_to_bfloat16

BFLOAT16 = np.dtype(np.uint16, metadata={"torch": "bfloat16"})
# vLLM's --dtype names (vllm/config/model.py _STR_DTYPE_TO_TORCH_DTYPE) -> torch's
DTYPE_NAMES = {
    "half": "float16",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "float": "float32",
    "float32": "float32",
}


def torch_name(array: np.ndarray) -> str:
    """The torch dtype name of `array` ("float32", "bfloat16", "int64", ...)."""
    metadata = array.dtype.metadata
    if metadata and "torch" in metadata:
        return str(metadata["torch"])
    return str(array.dtype)


def cast(array: np.ndarray, dtype: str) -> np.ndarray:
    """`array`'s values as torch's `tensor.to(dtype)` makes them, for a floating `dtype`
    (float32, float16 or bfloat16): bfloat16 as BFLOAT16 bit patterns."""
    if dtype != "bfloat16":
        return np.asarray(array, dtype=dtype)
    values = np.array(array, dtype=np.float32, order="C")  # a copy; a 0-d stays 0-d
    nan = np.isnan(values)
    round_to_bfloat16(values)  # the processors' own rounding (Llama 4's), torch's
    rounded = (values.view(np.uint32) >> 16).astype(np.uint16)
    return np.where(nan, np.uint16(0x7FC0), rounded).view(BFLOAT16)


def values(array: np.ndarray) -> np.ndarray:
    """A floating array's values as float32 (a bfloat16 one's exactly: its bits shifted up)."""
    if torch_name(array) == "bfloat16":
        shifted = np.asarray(array).astype(np.uint32) << np.uint32(16)
        return np.asarray(shifted).view(np.float32)  # a 0-d stays an array
    return np.asarray(array, dtype=np.float32)


def model_dtype(setting: str, config: Mapping[str, Any]) -> str:
    """The dtype `vllm serve --dtype SETTING` runs the model of `config` (its config.json) in,
    which its processor casts every floating output to (vLLM 0.33: config/model.py
    _get_and_verify_dtype; multimodal/processing/context.py _postprocess_output). "auto":
    the config's `dtype` (or `torch_dtype`), else its text config's, else its vision
    config's, else float32; float32 is served as the platform's first choice, bfloat16 on
    every GPU since Ampere and on x86/Arm CPUs (an older GPU's float16 has to be named)."""
    if setting != "auto":
        return DTYPE_NAMES[setting]
    found = None
    for part in (config, config.get("text_config") or {}, config.get("vision_config") or {}):
        found = part.get("dtype") or part.get("torch_dtype")
        if found:
            break
    name = DTYPE_NAMES.get(str(found).removeprefix("torch."), "float32")
    return "bfloat16" if name == "float32" else name
