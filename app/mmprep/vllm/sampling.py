"""OpenAI sampling fields -> vLLM's SamplingParams JSON (vllm 0.33.0: sampling_params.py,
a msgspec Struct serialized with omit_defaults: a field at its default is left out).

What is sent, as ChatCompletionRequest.to_sampling_params maps a chat request:
- temperature, top_p, top_k: the client's, else the server's defaults (sampling_defaults, as
  vllm serve --generation-config gives them: by default the model folder's
  generation_config.json), else left out (vLLM's defaults are OpenAI's); repetition_penalty,
  presence/frequency_penalty and min_p likewise.
  The generate endpoint applies no model defaults itself but max_tokens, so the render
  side must.
- seed, stop_token_ids, ignore_eos, min_tokens as asked.
- logprobs: top_logprobs when the client asked for logprobs (0: the sampled token's
  alone), else left out.
- max_tokens: as vLLM's render computes it (get_max_tokens): the smallest of what is left
  of the context (max_model_len - prompt length) and the client's max_tokens, else
  generation_config's max_new_tokens. A max_tokens above max_model_len, or no room left for
  one token, is a 400 with vLLM's message. Without a max_model_len (GenerateOptions), the
  client's, else left out for the generate endpoint to fill in.
- detokenize: false. mmprep detokenizes the token ids and applies stop strings itself, so
  `stop` is sent empty (vLLM refuses stop strings without detokenization).
- stop [], stop_token_ids (deduplicated), bad_words [], skip_reading_prefix_cache false,
  a greedy temperature's top_p/top_k/min_p reset and a tiny one raised to 0.01: what
  SamplingParams.__post_init__ makes of the request, so vLLM dumps the JSON back unchanged.
- output_kind: 1 (DELTA) streamed, 2 (FINAL_ONLY) not, and skip_clone, as vLLM's render
  writes them (the generate endpoint sets output_kind again from `stream`).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..interface.engine import EngineHTTPError
from ..interface.prepared import SamplingParams

OUTPUT_KIND_DELTA, OUTPUT_KIND_FINAL_ONLY = 1, 2

# vLLM's SamplingParams defaults for the fields mmprep may send, in its field order.
VLLM_DEFAULTS: dict[str, Any] = {
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "repetition_penalty": 1.0,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 0,
    "min_p": 0.0,
    "seed": None,
    "stop": None,
    "stop_token_ids": None,
    "ignore_eos": False,
    "max_tokens": 16,
    "min_tokens": 0,
    "logprobs": None,
    "detokenize": True,
    "skip_special_tokens": True,
    "output_kind": 0,
    "skip_clone": False,
    "bad_words": None,
    "skip_reading_prefix_cache": None,
}
SAMPLING_EPS, MIN_TEMPERATURE = 1e-5, 1e-2  # vLLM's _SAMPLING_EPS and _MAX_TEMP
# Fields __post_init__ always sets away from their None default (lists, a bool).
ALWAYS = frozenset({"stop", "stop_token_ids", "bad_words", "skip_reading_prefix_cache"})
# generation_config.json keys vLLM's ModelConfig.get_diff_sampling_param reads.
GENERATION_KEYS = (
    "repetition_penalty",
    "presence_penalty",
    "frequency_penalty",
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "max_new_tokens",
    "skip_special_tokens",  # read by the answer's detokenization (derender), not sent
)


# What transformers' GenerationConfig.from_model_config keeps of config.json (its own
# attributes: the penalties OpenAI names are not among them).
MODEL_CONFIG_KEYS = ("repetition_penalty", "temperature", "top_k", "top_p", "min_p", "max_new_tokens")


def sampling_defaults(
    generation_config: str, model_dir: Path, override: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The server's sampling defaults as vllm serve --generation-config and
    --override-generation-config give them (vLLM 0.33's ModelConfig.get_diff_sampling_param):
    auto, the model folder's; vllm, none; a folder, its generation_config.json (else its
    config.json's), read as the model folder's is; `override` laid over it."""
    config = (
        {}
        if generation_config == "vllm"
        else generation_file(model_dir if generation_config == "auto" else Path(generation_config))
    )
    return _sampling_keys({**config, **(override or {})})


def generation_defaults(model_dir: Path) -> dict[str, Any]:
    """The model's sampling defaults as vLLM's --generation-config auto reads them, named as
    SamplingParams names them (max_new_tokens -> max_tokens); {} when the folder says nothing."""
    return _sampling_keys(generation_file(model_dir))


def generation_file(model_dir: Path) -> dict[str, Any]:
    """The folder's generation_config.json, else what transformers makes of config.json (its
    top level, then its decoder's config for what that leaves unset); {} with neither."""
    path, model_config = Path(model_dir) / "generation_config.json", Path(model_dir) / "config.json"
    if path.is_file():
        config = json.loads(path.read_text())
        return config if isinstance(config, dict) else {}
    if model_config.is_file():
        return _from_model_config(json.loads(model_config.read_text()))
    return {}


def _sampling_keys(config: dict[str, Any]) -> dict[str, Any]:
    """The keys of a generation config vLLM reads, set (not null), max_new_tokens as max_tokens."""
    defaults = {key: config[key] for key in GENERATION_KEYS if config.get(key) is not None}
    if "max_new_tokens" in defaults:
        defaults["max_tokens"] = defaults.pop("max_new_tokens")
    return defaults


def _from_model_config(config: dict[str, Any]) -> dict[str, Any]:
    """GenerationConfig.from_model_config's sampling fields for a config.json with no
    generation_config.json beside it."""
    if not isinstance(config, dict):
        return {}
    chosen = {key: config[key] for key in MODEL_CONFIG_KEYS if config.get(key) is not None}
    decoder: Any = next(
        (config[name] for name in ("decoder", "generator", "text_config") if config.get(name)), {}
    )
    if isinstance(decoder, dict):
        chosen |= {key: decoder[key] for key in MODEL_CONFIG_KEYS if key in decoder and key not in chosen}
    return chosen


def max_tokens_cap(
    generation_config: str, defaults: dict[str, Any], override: dict[str, Any] | None = None
) -> int | None:
    """vLLM's override_max_tokens, a cap on every request's max_tokens, the client's too:
    a --generation-config folder's max_new_tokens, else --override-generation-config's."""
    if generation_config not in ("auto", "vllm"):
        return defaults.get("max_tokens")
    return (override or {}).get("max_new_tokens")


def max_tokens(
    asked: int | None, prompt_len: int, max_model_len: int, defaults: dict[str, Any], cap: int | None = None
) -> int:
    """vLLM's max_tokens for a prompt of `prompt_len` tokens (get_max_tokens, after
    TokenizeParams' check of the client's); `cap`: max_tokens_cap."""
    if asked is not None and asked > max_model_len:
        raise EngineHTTPError(
            f"max_tokens={asked} cannot be greater than max_model_len={max_model_len}. "
            "Please request fewer output tokens.",
            400,
            "invalid_request",
            "max_tokens",
        )
    fallback = asked if asked is not None else defaults.get("max_tokens")
    chosen = min(value for value in (max_model_len - prompt_len, fallback, cap) if value is not None)
    if chosen < 1:  # SamplingParams refuses it
        raise EngineHTTPError(
            f"max_tokens must be at least 1, got {chosen}.", 400, "invalid_request", "max_tokens"
        )
    return chosen


PENALTY_FIELDS = ("presence_penalty", "frequency_penalty", "repetition_penalty", "min_p")
# Token-out fields SamplingParams holds; one still in the client's other fields (a parser
# that does not read it) is taken from there rather than dropped.
TOKEN_FIELDS = {
    "top_k": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= -1,
    "min_tokens": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
    "ignore_eos": lambda v: isinstance(v, bool),
    "stop_token_ids": lambda v: (
        isinstance(v, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in v)
    ),
    "logprobs": lambda v: isinstance(v, bool),
    "top_logprobs": lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 20,
}


def with_extra_fields(sampling: SamplingParams, extra: dict[str, Any]) -> SamplingParams:
    """`sampling` with the token-out fields the client sent that are still in `extra`."""
    given = {key: extra[key] for key in TOKEN_FIELDS if extra.get(key) is not None}
    for key, value in given.items():
        if not TOKEN_FIELDS[key](value):
            raise EngineHTTPError(f"{key} has an invalid value: {value!r}", 400, "invalid_request", key)
    if "stop_token_ids" in given:
        given["stop_token_ids"] = tuple(given["stop_token_ids"])
    return replace(sampling, **given)


def sampling_params(
    sampling: SamplingParams,
    stream: bool,
    defaults: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
    prompt_len: int = 0,
    max_model_len: int | None = None,
    max_tokens_cap: int | None = None,
) -> dict[str, Any]:
    """The `sampling_params` object of a GenerateRequest. `extra`: the client's other
    fields, of which the penalties and min_p (vLLM's chat fields) are read; `prompt_len`
    and `max_model_len` give max_tokens its default."""
    defaults, extra = defaults or {}, extra or {}
    sampling = with_extra_fields(sampling, extra)
    if max_model_len is not None:
        sampling = replace(
            sampling,
            max_tokens=max_tokens(sampling.max_tokens, prompt_len, max_model_len, defaults, max_tokens_cap),
        )
    chosen: dict[str, Any] = {}
    for key in PENALTY_FIELDS:
        value = extra.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise EngineHTTPError(f"{key} must be a number, got {value!r}", 400, "invalid_request", key)
        chosen[key] = value if value is not None else defaults.get(key)
    for key in ("temperature", "top_p", "top_k"):
        value = getattr(sampling, key)
        chosen[key] = value if value is not None else defaults.get(key)
    # mmprep detokenizes, but vLLM's render writes it: the client's, else the generation config's
    skip = extra.get("skip_special_tokens")
    chosen["skip_special_tokens"] = skip if isinstance(skip, bool) else defaults.get("skip_special_tokens")
    temperature = chosen["temperature"]
    if temperature is not None and 0 < temperature < MIN_TEMPERATURE:
        chosen["temperature"] = MIN_TEMPERATURE  # as vLLM raises it
    elif temperature is not None and temperature < SAMPLING_EPS:
        chosen.update(top_p=None, top_k=None, min_p=None)  # greedy: vLLM resets them
    chosen.update(
        seed=None if sampling.seed == -1 else sampling.seed,
        # As SamplingParams.__post_init__ leaves them, so the JSON is what vLLM dumps back.
        stop=[],
        stop_token_ids=list(dict.fromkeys(sampling.stop_token_ids)),
        bad_words=[],
        skip_reading_prefix_cache=False,
        ignore_eos=sampling.ignore_eos,
        max_tokens=sampling.max_tokens,  # None: left out, the endpoint fills it in
        min_tokens=sampling.min_tokens,
        logprobs=sampling.top_logprobs if sampling.logprobs else None,
        detokenize=False,
        output_kind=OUTPUT_KIND_DELTA if stream else OUTPUT_KIND_FINAL_ONLY,
        skip_clone=True,
    )
    return {
        key: chosen[key]
        for key in VLLM_DEFAULTS
        if key in chosen and (chosen[key] is not None and not _is_default(key, chosen[key]) or key in ALWAYS)
    }


def _is_default(key: str, value: Any) -> bool:
    if key == "max_tokens":
        return False  # a max_tokens left out means "the rest of the context" to the endpoint
    default = VLLM_DEFAULTS[key]
    return type(value) is type(default) and value == default
