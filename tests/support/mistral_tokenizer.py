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

from pathlib import Path

from mmprep.model.byte_level import byte_to_unicode
from tests.support.tokenizer_parts import bos_template, bpe, document, kept_file, merges_of, spelled

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


def tokenizer_json() -> dict:
    """The tokenizer.json as a dict."""
    control = {id_: CONTROL_TOKENS.get(id_, f"<SPECIAL_{id_}>") for id_ in range(NUM_CONTROL)}
    vocab = {content: id_ for id_, content in control.items()}
    bytes_ = byte_to_unicode()  # as ByteLevel writes each byte
    for byte, char in bytes_.items():
        vocab[char] = NUM_CONTROL + byte
    words = spelled(WORDS, bytes_[ord(" ")], bytes_.values())
    for offset, token in enumerate(words):
        vocab[token] = NUM_CONTROL + 256 + offset
    return document(
        [(id_, content, True) for id_, content in control.items()],
        normalizer=None,
        pre_tokenizer={
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": PATTERN}, "behavior": "Isolated", "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
            ],
        },
        post_processor=bos_template(("<s>", 1)),
        decoder={"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        model=bpe(vocab, merges_of(words), ignore_merges=True),
    )


def tokenizer_file() -> Path:
    """The tokenizer.json on disk, built once and kept in the temp folder (keyed by this
    module's text, so a change to it builds a new one)."""
    return kept_file("mistral-mistral3", tokenizer_json, Path(__file__).read_bytes())
