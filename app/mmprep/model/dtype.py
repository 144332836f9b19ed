"""The dtype vLLM runs a model folder in (`vllm serve --dtype`), which its processor casts
every floating tensor it makes to (pixels, audio features, Qwen2.5-VL's seconds per temporal
block), so mmprep writes them in it where it speaks vLLM's wire (vllm 0.33.0:
config/model.py `_get_and_verify_dtype`; multimodal/processing/context.py
`_postprocess_output`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# vLLM's --dtype names (config/model.py _STR_DTYPE_TO_TORCH_DTYPE) -> torch's
DTYPE_NAMES = {
    "half": "float16",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "float": "float32",
    "float32": "float32",
}


def model_dtype(setting: str, config: Mapping[str, Any]) -> str:
    """The dtype `vllm serve --dtype SETTING` runs the model of `config` (its config.json) in.
    "auto": the config's `dtype` (or `torch_dtype`), else its text config's, else its vision
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
