"""A Tekken shaped `tokenizer.json` (Mistral 3's, in Hugging Face's format), built offline for tests.

Mistral's Tekken vocabulary (131,072 tokens) is published only with the checkpoints
(tekken.json, and its conversion in tokenizer.json), and no package carries it, so this is
not the real vocabulary. It is the converted tokenizer's shape: byte-level BPE (a Split on
Tekken's pattern, then ByteLevel without its own regex; the ByteLevel decoder), its 1,000
control tokens at their published ids (`<unk>` 0, `<s>` 1, `</s>` 2, `[INST]` 3, `[/INST]` 4,
`[IMG]` 10, `<pad>` 11, `[IMG_BREAK]` 12, `[IMG_END]` 13, `[SYSTEM_PROMPT]` 17,
`[/SYSTEM_PROMPT]` 18, ... `<SPECIAL_999>`; all special), then the 256 bytes at 1,000 to 1,255
as Tekken puts them, then a small text vocabulary of our own: the words of `WORDS` merged
letter by letter. So text gets other ids than the real model gives it, but transformers,
vLLM and mmprep all read this one file, and every control token is the real one at its real
id. The post-processor puts `<s>` in front of a text tokenized with special tokens, as the
published one does.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

# Tekken's named control tokens (mistral-common's SpecialTokens, as the HF conversions list
# them); every other id under 1,000 is <SPECIAL_id>
CONTROL_TOKENS = {
    0: "<unk>",
    1: "<s>",
    2: "</s>",
    3: "[INST]",
    4: "[/INST]",
    5: "[AVAILABLE_TOOLS]",
    6: "[/AVAILABLE_TOOLS]",
    7: "[TOOL_RESULTS]",
    8: "[/TOOL_RESULTS]",
    9: "[TOOL_CALLS]",
    10: "[IMG]",
    11: "<pad>",
    12: "[IMG_BREAK]",
    13: "[IMG_END]",
    14: "[PREFIX]",
    15: "[MIDDLE]",
    16: "[SUFFIX]",
    17: "[SYSTEM_PROMPT]",
    18: "[/SYSTEM_PROMPT]",
    19: "[TOOL_CONTENT]",
}
NUM_CONTROL = 1000
# Tekken's pre-tokenizer pattern (the converted tokenizer.json's Split)
PATTERN = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|"
    r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# Words merged into one token each (with and without a leading space): words the tests'
# chats and the template's default system prompt use, so prompts are not all letters
WORDS = (
    "You are Mistral Small a Large Language Model created by AI the image picture describe "
    "Describe this what What is and of to in it that please answer Compare brief Be"
).split()


def _byte_chars() -> list[str]:
    """GPT-2's byte-to-unicode table: the character ByteLevel writes for each byte 0..255."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    chars, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            chars[byte] = chr(byte)
        else:
            chars[byte] = chr(256 + extra)
            extra += 1
    return [chars[byte] for byte in range(256)]


def _merged() -> list[str]:
    """The text tokens after the bytes, in id order: each word's prefixes, a space first."""
    space = _byte_chars()[ord(" ")]
    seen = set(_byte_chars())
    merged: list[str] = []
    for spelled in [space + word for word in WORDS] + list(WORDS):
        for end in range(2, len(spelled) + 1):
            if spelled[:end] not in seen:
                seen.add(spelled[:end])
                merged.append(spelled[:end])
    return merged


def tokenizer_json() -> dict:
    """The tokenizer.json as a dict."""
    control = {id_: CONTROL_TOKENS.get(id_, f"<SPECIAL_{id_}>") for id_ in range(NUM_CONTROL)}
    vocab = {content: id_ for id_, content in control.items()}
    for byte, char in enumerate(_byte_chars()):
        vocab[char] = NUM_CONTROL + byte
    merged = _merged()
    for offset, token in enumerate(merged):
        vocab[token] = NUM_CONTROL + 256 + offset
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": id_,
                "content": content,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for id_, content in control.items()
        ],
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": PATTERN}, "behavior": "Isolated", "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
            ],
        },
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [
                {"SpecialToken": {"id": "<s>", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
            ],
            "pair": [
                {"SpecialToken": {"id": "<s>", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": "<s>", "type_id": 1}},
                {"Sequence": {"id": "B", "type_id": 1}},
            ],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}},
        },
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": True,
            "vocab": vocab,
            "merges": [[token[:-1], token[-1]] for token in merged],
        },
    }


def tokenizer_file() -> Path:
    """The tokenizer.json on disk, built once and kept in the temp folder (keyed by this
    module's text, so a change to it builds a new one)."""
    digest = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / "mmprep-mistral-tokenizer" / f"mistral3-{digest}.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(tokenizer_json(), ensure_ascii=False))
        partial.replace(path)  # whole or absent, whatever runs beside it
    return path
