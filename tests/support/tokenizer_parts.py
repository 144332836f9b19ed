"""What the test tokenizers (qwen_tokenizer.py, gemma_tokenizer.py, mistral_tokenizer.py)
share: the frame of a Hugging Face `tokenizer.json`, its added-token entries, its BPE model,
the template that puts a BOS token in front of a text, a small vocabulary of words spelled
letter by letter, and the file written once into the temp folder."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

# The BPE options every test tokenizer writes unless it says otherwise
BPE_DEFAULTS = {
    "dropout": None,
    "unk_token": None,
    "continuing_subword_prefix": None,
    "end_of_word_suffix": None,
    "fuse_unk": False,
    "byte_fallback": False,
    "ignore_merges": False,
}


def document(
    added: Iterable[tuple[int, str, bool]],
    normalizer: dict | None,
    pre_tokenizer: dict,
    post_processor: dict,
    decoder: dict,
    model: dict,
) -> dict:
    """A tokenizer.json: `added` (id, content, special) as its added tokens, none of them
    normalized or stripped."""
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
                "special": special,
            }
            for id_, content, special in added
        ],
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": post_processor,
        "decoder": decoder,
        "model": model,
    }


def bpe(vocab: dict[str, int], merges: list[list[str]], **options: object) -> dict:
    """A BPE model: `options` over BPE_DEFAULTS."""
    return {"type": "BPE", **BPE_DEFAULTS, **options, "vocab": vocab, "merges": merges}


def bos_template(bos: tuple[str, int] | None, pair_bos_type_id: int = 1) -> dict:
    """TemplateProcessing: each sequence as it is, or with `bos` (content, id) in front of it
    (before a pair's second one with `pair_bos_type_id`)."""
    first = [{"SpecialToken": {"id": bos[0], "type_id": 0}}] if bos else []
    second = [{"SpecialToken": {"id": bos[0], "type_id": pair_bos_type_id}}] if bos else []
    return {
        "type": "TemplateProcessing",
        "single": [*first, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [
            *first,
            {"Sequence": {"id": "A", "type_id": 0}},
            *second,
            {"Sequence": {"id": "B", "type_id": 1}},
        ],
        "special_tokens": {bos[0]: {"id": bos[0], "ids": [bos[1]], "tokens": [bos[0]]}} if bos else {},
    }


def spelled(words: Iterable[str], space: str, alphabet: Iterable[str]) -> list[str]:
    """The tokens that build `words` letter by letter (each word after `space` first, so those
    merges outrank a bare word's inside them): every prefix of two characters or more that
    `alphabet` lacks, in order, each its prefix joined with one more character."""
    words = list(words)
    seen = set(alphabet)
    tokens: list[str] = []
    for word in [space + word for word in words] + words:
        for end in range(2, len(word) + 1):
            if word[:end] not in seen:
                seen.add(word[:end])
                tokens.append(word[:end])
    return tokens


def merges_of(tokens: Iterable[str]) -> list[list[str]]:
    """The merge that makes each of `spelled`'s tokens: its prefix and its last character."""
    return [[token[:-1], token[-1]] for token in tokens]


def kept_file(name: str, build: Callable[[], dict], *keys: bytes) -> Path:
    """`build()` as a file in the temp folder, built once (a conversion takes seconds) and
    reused by every test session after: keyed by `keys` (the builder's own text among them)
    and this module's text, so a change to either builds a new one."""
    digest = hashlib.sha256(b"".join([Path(__file__).read_bytes(), *keys])).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / "mmprep-test-tokenizers" / f"{name}-{digest}.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(build(), ensure_ascii=False))
        partial.replace(path)  # whole or absent, whatever runs beside it
    return path
