"""The model's context length as vLLM derives it from config.json when `vllm serve` gets no
--max-model-len (vllm 0.33.0: config/model.py `_get_and_verify_max_len`, the arch config's
`derive_max_model_len_and_key`), so mmprep refuses the prompts vLLM would refuse.

1. The text config (config.json's `text_config`, else its top level's max_position_embeddings,
   which transformers moves into the text config): the smallest of the length keys it has,
   `model_max_length` winning over them all; max_position_embeddings, if it lacks it, is
   transformers' class default (as vLLM reads it from transformers' config).
2. RoPE scaling: each rope parameter set's `factor` multiplies it, except for the types
   whose max_position_embeddings is already scaled (YaRN, LongRoPE, Llama 3); LongRoPE
   defaults to original_max_position_embeddings instead.
"""

from __future__ import annotations

import os
from typing import Any

from mmprep import families

# derive_max_model_len_and_key's keys, in its order
LENGTH_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
# rope types whose max_position_embeddings already includes the scaling
PRESCALED = frozenset({"su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling"})
# rope_parameters nested by layer type (transformers' ALLOWED_LAYER_TYPES, DeepSeek-V4's)
LAYER_TYPES = frozenset(
    {
        "full_attention",
        "sliding_attention",
        "chunked_attention",
        "linear_attention",
        "hybrid",
        "main",
        "compress",
    }
)
DEFAULT_MAX_LEN = 2048  # vLLM's when no key is found at all


def text_config(config: dict[str, Any]) -> dict[str, Any]:
    """The text config as transformers builds it: config.json's `text_config`, else the
    attributes of its top level that the text config class knows (the length keys other
    than max_position_embeddings stay on the outer config, where vLLM does not look)."""
    nested = config.get("text_config")
    if isinstance(nested, dict):
        return nested
    return {key: value for key, value in config.items() if key not in LENGTH_KEYS[1:]}


def derive_max_model_len(config: dict[str, Any]) -> tuple[int, str]:
    """(the context length vLLM uses by default, the key it came from) for config.json."""
    text = text_config(config)
    found = {key: text[key] for key in LENGTH_KEYS if text.get(key) is not None}
    family = families.for_model_type(config.get("model_type"))
    if "max_position_embeddings" not in found and family is not None and family.max_position_embeddings:
        # transformers' text-config default (5.x), for a config.json that does not give it
        found["max_position_embeddings"] = family.max_position_embeddings
    if found.get("model_max_length"):
        length, key = found["model_max_length"], "model_max_length"
    elif found:
        key = min(found, key=lambda name: (found[name], LENGTH_KEYS.index(name)))
        length = found[key]
    else:
        length, key = DEFAULT_MAX_LEN, "default"
    ropes = rope_parameters(text)
    factor = 1.0
    for rope in ropes:
        if rope_type(rope) not in PRESCALED:
            factor = rope.get("factor", factor)
    length *= 1.0 if factor is None else factor  # a null factor: vLLM falls back to 1.0
    if any(rope_type(rope) == "longrope" for rope in ropes):
        length = text.get("original_max_position_embeddings", length)
    return int(length), key


def rope_parameters(text: dict[str, Any]) -> list[dict[str, Any]]:
    """The config's rope parameter sets (transformers 5 renames rope_scaling to rope_parameters)."""
    rope = text.get("rope_parameters") or text.get("rope_scaling")
    if not isinstance(rope, dict) or not rope:
        return []
    if set(rope) <= LAYER_TYPES:
        return [value for value in rope.values() if isinstance(value, dict) and value]
    return [rope]


def rope_type(rope: dict[str, Any]) -> str:
    # transformers standardizes the legacy "type"; Qwen-VL's "mrope" is its "default"
    kind = rope.get("rope_type") or rope.get("type") or "default"
    return "default" if kind == "mrope" else kind


def check_max_model_len(asked: int, config: dict[str, Any]) -> None:
    """A --max-model-len above the derived one is refused as vLLM refuses it (ValueError),
    unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, vLLM's own opt-out, is set."""
    derived, key = derive_max_model_len(config)
    if asked <= derived:
        return
    model_max_length = text_config(config).get("model_max_length")
    if model_max_length is not None and asked <= model_max_length:
        return
    if os.environ.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "0").strip().lower() in ("1", "true"):
        return
    raise ValueError(
        f"User-specified max_model_len ({asked}) is greater than the derived max_model_len "
        f"({key}={derived} or model_max_length={model_max_length} in model's config.json). To allow "
        "overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (for vllm serve and "
        "mmprep alike)"
    )
