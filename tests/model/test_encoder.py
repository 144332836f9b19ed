"""The prompt's encoder (app/mmprep/model/encoder.py): fastokens gives the tokenizers
library's ids on every preset's tokenizer.json, on thousands of strings of mixed scripts,
emoji, code and whitespace and on random text with the file's added tokens among it; the
library encodes where fastokens cannot read a file, or reads it otherwise."""

from __future__ import annotations

import json

import fastokens
import numpy as np
import pytest
from tokenizers import Tokenizer

from mmprep.model.encoder import prompt_encoder
from mmprep.processors import PRESETS
from tests.support.model_folder import tokenizer_file
from tests.support.texts import mixed_texts, strings

STRINGS = strings(3000)

# Every preset's tokenizer.json: the real Qwen vocabulary with each family's added tokens
# (Qwen-VL, InternVL, LLaVA-OneVision, Llama 4), the Gemma-shaped ones (byte fallback, a
# Replace normalizer) and the Tekken-shaped one (Mistral 3).
PRESET_FAMILIES = sorted(path.name for path in PRESETS.iterdir() if path.is_dir())
CHECKED: dict[bytes, list[str]] = {}  # a file's content -> the texts it mismatched (presets share files)


@pytest.mark.parametrize("family", PRESET_FAMILIES)
def test_fastokens_encodes_every_preset_tokenizer_as_the_tokenizers_library(family):
    path = tokenizer_file(family)
    content = path.read_bytes()
    if content not in CHECKED:
        CHECKED[content] = mismatches(path)
    mismatched = CHECKED[content]
    assert not mismatched, f"{len(mismatched)} differ, e.g. {mismatched[:3]!r}"


def mismatches(path) -> list[str]:
    tokenizer = Tokenizer.from_file(str(path))
    encode, fast = prompt_encoder(path, path.read_text(), tokenizer)
    assert fast, f"{path} should take fastokens"
    added = [token.content for token in tokenizer.get_added_tokens_decoder().values()]
    texts = (
        STRINGS
        + mixed_texts(added)
        + [
            "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>x<|im_end|><think>y</think>",
            # NFC would join a tag's ">" and a combining U+0338 into "≯" if the tag were not split out first
            "<|vision_start|><|image_pad|><|vision_end|>\u0338 what is this?<think>\u0338",
        ]
    )
    assert encode("x").dtype == np.uint32
    expected = [e.ids for e in tokenizer.encode_batch(texts, add_special_tokens=False)]
    return [text for text, ids in zip(texts, expected, strict=True) if encode(text).tolist() != ids]


def test_a_tokenizer_fastokens_cannot_read_is_encoded_by_the_tokenizers_library(tmp_path):
    spec = json.loads(tokenizer_file("qwen2_vl").read_text())
    spec["normalizer"] = {"type": "NFKC"}  # one fastokens lacks
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec, ensure_ascii=False))
    tokenizer = Tokenizer.from_file(str(path))
    encode, fast = prompt_encoder(path, path.read_text(), tokenizer)
    assert not fast
    text = "ﬁ ½ x² ① <|im_start|>"  # NFKC changes each
    assert encode(text).tolist() == tokenizer.encode(text, add_special_tokens=False).ids


def test_a_tokenizer_fastokens_reads_otherwise_is_encoded_by_the_tokenizers_library(tmp_path):
    """An added token that repeats a vocabulary entry under another id: the tokenizers library
    keeps the vocabulary's id, fastokens takes the added one; the probe of added tokens finds it."""
    spec = json.loads(tokenizer_file("qwen2_vl").read_text())
    spec["added_tokens"].append(
        {
            "id": 151700,
            "content": "user",
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": True,
            "special": False,
        }
    )
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec, ensure_ascii=False))
    tokenizer = Tokenizer.from_file(str(path))
    assert fastokens.Tokenizer.from_file(str(path)).encode("user").ids != tokenizer.encode("user").ids
    encode, fast = prompt_encoder(path, path.read_text(), tokenizer)
    assert not fast and encode("a user").tolist() == tokenizer.encode("a user", add_special_tokens=False).ids
