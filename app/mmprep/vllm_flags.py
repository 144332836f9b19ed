"""`vllm serve`'s command line on `mmprep serve`: what each of vLLM's flags becomes.

vLLM 0.33's flags are read from its own parser by scripts/vllm_serve_flags.py into
core/vllm_serve_flags.json (committed: vLLM is no dependency). Each is one of:

- **taken**: a setting of `mmprep serve` of the same name, with vLLM's meaning (`TAKEN`);
  vLLM's negative spellings (`--disable-log-requests`) are read as mmprep's (`--no-...`);
- **taken, always so**: mmprep already behaves as the flag asks; accepted, nothing to set (`ALWAYS`);
- **mmprep's name**: the same knob under mmprep's own name, both spellings work (`RENAMED`);
- **the engine's**: it configures the model's engine (parallelism, memory, quantization, KV
  cache, scheduling, ...): refused, naming the flag and where it belongs, the `vllm serve`
  behind mmprep;
- **vLLM's front door only**: a flag of vLLM's own server that mmprep has no counterpart
  for (`FRONT_DOOR` says why, else a line naming it): refused the same way.

`from_vllm` rewrites a command line accordingly (and `vllm serve MODEL`'s positional model
into `--model MODEL`) before the settings read it, so nothing ends as argparse's
"unrecognized arguments". `flag_table` writes docs/vllm-flags.md.
"""

from __future__ import annotations

import json
import typing
from collections import Counter
from pathlib import Path

from .core.config import Settings

VLLM_FLAGS: dict = json.loads((Path(__file__).parent / "core" / "vllm_serve_flags.json").read_text())

TAKEN = frozenset(
    {
        # ModelConfig, MultiModalConfig, StructuredOutputsConfig, LoggingConfig
        "--model",
        "--revision",
        "--served-model-name",
        "--max-model-len",
        "--allowed-local-media-path",
        "--allowed-media-domains",
        "--limit-mm-per-prompt",
        "--media-io-kwargs",
        "--mm-processor-kwargs",
        "--mm-device-do-normalize",
        "--dtype",
        "--reasoning-parser",
        "--generation-config",
        "--override-generation-config",
        "--log-level",
        # Frontend
        "--chat-template",
        "--chat-template-content-format",
        "--trust-request-chat-template",
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "--enable-force-include-usage",
        "--return-tokens-as-token-ids",
        "--host",
        "--port",
        "--uvicorn-log-level",
        "--allow-credentials",
        "--allowed-origins",
        "--allowed-methods",
        "--allowed-headers",
        "--api-key",
        "--ssl-keyfile",
        "--ssl-certfile",
        "--ssl-ca-certs",
        "--ssl-cert-reqs",
        "--root-path",
    }
)
ALWAYS = {
    "--trust-request-mm-kwargs": "mmprep always honours a request's media_io_kwargs and mm_processor_kwargs, "
    "within its limits",
    "--enable-prompt-tokens-details": "nothing to do: mmprep's usage has no cached-token details",
    "--enable-log-requests": "mmprep logs each request at info (its id, media, timing), not its prompt",
}
# What a taken flag's table row adds, where mmprep's reading differs in a detail.
NOTES = {
    "--model": "a model folder, or a Hugging Face Hub id resolved from the local cache as vLLM resolves it",
    "--revision": "the Hub id's snapshot in the cache",
    "--generation-config": "with --model: the sampling defaults of vLLM's SamplingParams mmprep writes",
    "--override-generation-config": "with --model: laid over --generation-config's sampling defaults",
    "--return-tokens-as-token-ids": "with --model, where mmprep writes the logprobs",
    "--enable-force-include-usage": "the final usage chunk; not vLLM's per-chunk usage",
    "--allowed-local-media-path": "several directories may be given",
    "--limit-mm-per-prompt": "image and video",
    "--mm-processor-kwargs": "the processor's defaults, a request's own over them, as vLLM merges them",
    "--dtype": "with --model: the dtype of every floating tensor mmprep writes on vLLM's wire "
    "(host-normalized pixels, audio features, Qwen2.5-VL's second_per_grid_ts, which the engine "
    "reads into its positions), as vLLM's processor casts them; auto as vLLM resolves it, a "
    "float32 config as bfloat16",
}
RENAMED = {
    "--api-server-count": "--processes",
    "--mm-hasher-algorithm": "--upstream-mm-hasher",
}
FRONT_DOOR = {
    "--config": "a YAML file of flags: give the flags themselves",
    "--grpc": "mmprep serves HTTP only",
    "--lora-modules": "LoRA adapters are the engine's: give them to the vllm serve behind mmprep",
    "--tool-server": "built-in tools are served by vLLM's Responses API only",
    "--middleware": "mmprep's app takes no extra middleware",
    "--tokens-only": "mmprep serves its scale-out routes with --model",
    "--enable-scale-out": "mmprep serves its scale-out routes with --model",
    "--uds": "mmprep listens on TCP (--host, --port)",
}
ENGINES_OWN = (
    "mmprep runs no model; give it to the vllm serve behind mmprep "
    "(mmprep serve --engine openai or --engine vllm-generate --upstream-url http://VLLM:8000/v1)"
)


class VllmFlagRefused(ValueError):
    """vLLM flags that `mmprep serve` does not take: one line each, naming the flag."""

    def __init__(self, lines: list[str]):
        super().__init__("\n".join(lines))
        self.lines = lines


def _entries() -> dict[str, dict]:
    """Each spelling of each vLLM flag (long and short) -> its entry."""
    spellings: dict[str, dict] = {}
    for entry in VLLM_FLAGS["flags"]:
        for spelling in (*entry["flags"], *entry["short"]):
            spellings[spelling] = entry
    return spellings


SPELLINGS = _entries()


def disposition(entry: dict) -> str:
    """taken, always, renamed, engine or front door: what mmprep serve does with vLLM's flag."""
    flag = entry["flags"][0]
    if flag in TAKEN:
        return "taken"
    if flag in ALWAYS:
        return "always"
    if flag in RENAMED:
        return "renamed"
    if flag in FRONT_DOOR or entry["group"] == "Frontend":
        return "front door"
    return "engine"


def _refusal(spelling: str, entry: dict) -> str:
    kind = disposition(entry)
    if kind == "engine":
        where = "vllm serve" if entry["group"] == "serve" else f"vLLM's {entry['group']}"
        return f"mmprep serve: {spelling} is the engine's ({where}): {ENGINES_OWN}"
    why = FRONT_DOOR.get(entry["flags"][0], "mmprep serve has no such setting (docs/vllm-flags.md)")
    return f"mmprep serve: {spelling} is a flag of vllm serve's own front door, not mmprep's: {why}"


def _negative(entry: dict, spelling: str) -> str | None:
    """mmprep's --no-X for vLLM's second spelling of a taken boolean (--disable-X, --no-X)."""
    if len(entry["flags"]) > 1 and spelling == entry["flags"][1]:
        return "--no-" + entry["flags"][0][2:]
    return None


def _mmprep_kind(flag: str) -> str:
    """How mmprep serve's flag takes values: 'none' (a boolean), 'list' (several) or 'one'."""
    name = flag[2:].removeprefix("no-").replace("-", "_")
    field = Settings.model_fields.get(name)
    if field is None:
        return "one"
    annotation = field.annotation
    if annotation is bool or annotation == (bool | None):
        return "none"
    return "list" if typing.get_origin(annotation) is list else "one"


def from_vllm(args: list[str]) -> list[str]:
    """`mmprep serve`'s arguments (after `serve`) with vLLM's spellings made mmprep's; raises
    VllmFlagRefused naming every vLLM flag that mmprep serve does not take."""
    out: list[str] = []
    refused: list[str] = []
    expecting = "none"  # what the tokens after the last flag are: none, one value, or a list
    skip = False
    for arg in args:
        if skip:  # a refused flag's value
            skip = False
            continue
        if not arg.startswith("-") or arg == "-":
            if expecting == "one":
                expecting = "none"
            elif expecting == "none":
                out.append("--model")  # vllm serve MODEL
            out.append(arg)
            continue
        name, equals, value = arg.partition("=")
        if name.startswith("--"):
            name = name.split(".")[0].replace("_", "-")  # vLLM's --x.y=1 and --max_model_len
        elif name.startswith("-O") and name != "-O":  # vLLM's -O3
            name, equals, value = "--optimization-level", "=", name[2:]
        elif name == "-O":
            name = "--optimization-level"
        entry = SPELLINGS.get(name)
        if entry is None:  # mmprep's own flag (or a mistake argparse will name)
            out.append(arg)
            expecting = "none" if equals else _mmprep_kind(name)
            continue
        kind = disposition(entry)
        if kind in ("engine", "front door"):
            refused.append(_refusal(name, entry))
            skip = entry["value"] and not equals
            expecting = "list" if entry["value"] and not equals else "none"  # its values, if several
            continue
        if kind == "always":
            expecting = "none"
            continue
        if kind == "renamed":
            name = RENAMED[entry["flags"][0]]
        elif name in entry["short"]:
            name = entry["flags"][0]
        name = _negative(entry, name) or name
        out.append(name + equals + value)
        expecting = "none" if equals else _mmprep_kind(name)
    if refused:
        raise VllmFlagRefused(refused)
    return out


def counts() -> Counter:
    return Counter(disposition(entry) for entry in VLLM_FLAGS["flags"])


def flag_table() -> str:
    """docs/vllm-flags.md: every `vllm serve` flag and what `mmprep serve` does with it."""
    tally = counts()
    lines = [
        "# `vllm serve`'s flags on `mmprep serve`",
        "",
        f"Every flag of `vllm serve` {VLLM_FLAGS['vllm']} ({sum(tally.values())}, read from vLLM's own "
        "parser by `scripts/vllm_serve_flags.py`, which writes this page; do not edit it by hand) and what "
        "`mmprep serve` does with it, so that a `vllm serve` command line moves to mmprep with its "
        "flags ([deployment.md](deployment.md#vllm-serves-command-line)):",
        "",
        f"- **taken** ({tally['taken']}): the same flag, with vLLM's meaning;",
        f"- **taken, always so** ({tally['always']}): accepted; mmprep already does what it asks;",
        f"- **mmprep's name** ({tally['renamed']}): the same knob, also spelled as mmprep spells it;",
        f"- **the engine's** ({tally['engine']}): it configures the model's engine (parallelism, memory, "
        "quantization, KV cache, scheduling, ...); refused with a message naming it: give it to the "
        "`vllm serve` behind mmprep (`--engine openai` or `--engine vllm-generate`);",
        f"- **vLLM's front door only** ({tally['front door']}): a flag of vLLM's own HTTP server that "
        "mmprep has no counterpart for; refused with a message naming it.",
        "",
        "`vllm serve MODEL`'s positional model is `--model MODEL`. vLLM's negative spellings of a taken "
        "flag (`--disable-log-requests`, `--no-trust-request-chat-template`) are mmprep's `--no-` ones.",
        "",
        "| `vllm serve` flag | vLLM's group | `mmprep serve` |",
        "|---|---|---|",
    ]
    said = {
        "taken": "taken",
        "always": "taken, always so",
        "engine": "the engine's",
        "front door": "vLLM's front door only",
    }
    for entry in VLLM_FLAGS["flags"]:
        kind = disposition(entry)
        spellings = ", ".join(f"`{flag}`" for flag in (*entry["flags"], *entry["short"]))
        what = f"mmprep's `{RENAMED[entry['flags'][0]]}`" if kind == "renamed" else said[kind]
        if kind == "taken" and entry["flags"][0] in NOTES:
            what += f": {NOTES[entry['flags'][0]]}"
        if kind == "always":
            what += f": {ALWAYS[entry['flags'][0]]}"
        elif kind == "front door" and entry["flags"][0] in FRONT_DOOR:
            what += f": {FRONT_DOOR[entry['flags'][0]]}"
        lines.append(f"| {spellings} | {entry['group']} | {what} |")
    return "\n".join(lines) + "\n"
