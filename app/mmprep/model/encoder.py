"""The prompt's encoder: text -> token ids exactly as the tokenizers library gives them
(`tokenizer.encode(text, add_special_tokens=False).ids`), by fastokens where it agrees.

fastokens (the tokenizer vLLM's Rust renderer loads) reads the same tokenizer.json and
encodes a chat 10-90x faster than the tokenizers library (16k tokens: 0.17 ms against 15.7),
without holding the GIL, and hands the ids over as one buffer of uint32: they stay a numpy
array through the render and into the answer, never a Python int per token. It is used only
if it loads the file and then encodes a probe exactly as the tokenizers library does: mixed
scripts, emoji, code, whitespace, and every added token of the file, alone and between
text (a tokenizer.json whose added token repeats a vocabulary entry under another id is
one fastokens reads otherwise). Otherwise (a normalizer or pre-tokenizer it lacks: it
refuses to load) the tokenizers library encodes, and the folder says so
(ModelFolder.fast_encode).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import fastokens
import numpy as np
from tokenizers import Tokenizer

log = logging.getLogger("mmprep.model")

# fastokens hands a long text's BPE to a worker thread that spins, waiting for the next, for
# a while after each: CPU burnt while a server waits on its sockets (a 64k-token prompt took
# 1.66 CPU-ms with the spin, 1.21 without, and no longer). An operator's own setting stands.
os.environ.setdefault("FASTOKENS_SPIN_US", "0")

# text -> its token ids, a 1-D uint32 array (TokenPrompt's type), no special tokens added
Encoder = Callable[[str], np.ndarray]

_PROBE = [
    "Hello, world! It's a test: don't WE'LL they've 12345 3.14 0x1F",
    "東京は晴れ。中文分词测试 한국어 русский العربية हिन्दी ภาษาไทย Ελληνικά עברית",
    "naïve café Zürich straße İstanbul e\u0301 n\u0303 \u212b ﬁ ①② ½ x² —«»",
    "😀👍🏽👨‍👩‍👧‍👦🏳️‍🌈🇨🇭❤️🤖🤖",
    "def f(x):\n    return {'a': [1, 2]}  # comment\n\n\tif (a && b) { c++; }\r\n</div>",
    "  leading and trailing spaces   \n\n\n  \u00a0\u3000 ...!!! ''\"\"",
    "<|im_start|>user\n<|vision_start|><|video_pad|><|vision_end|>hi<|im_end|>\n"
    '<tool_call>\n{"a": 1}\n</tool_call>',
    "<|vision_end|>\u0338 <think>\u0338 a\u0338",  # a combining mark after a tag stays apart from it
    "\n" * 40 + " " * 33 + "\t" * 9 + "a" * 300 + "1" * 40,
]


def prompt_encoder(source: Path, text: str, tokenizer: Tokenizer) -> tuple[Encoder, bool]:
    """The encoder of the tokenizer.json `text` (read from `source`, named in the log), of
    which `tokenizer` was made: fastokens' where it gives `tokenizer`'s ids on the probe, else
    the tokenizers library's. And whether it is fastokens'."""
    try:
        fast = fastokens.Tokenizer.from_json_str(text)
    except Exception as error:  # fastokens' own refusal (ValueError today) of what it lacks
        log.info("%s: fastokens cannot read it (%s); the tokenizers library encodes prompts", source, error)
        return _library_encoder(tokenizer), False

    def encode(text: str) -> np.ndarray:
        ids, _ = fast.encode_batch_flat([text])  # uint32, little-endian: no int objects made
        return np.frombuffer(ids, dtype="<u4")

    for probe in _probe(tokenizer):
        if encode(probe).tolist() != tokenizer.encode(probe, add_special_tokens=False).ids:
            log.info(
                "%s: fastokens encodes %r otherwise than the tokenizers library; the tokenizers "
                "library encodes prompts",
                source,
                probe[:80],
            )
            return _library_encoder(tokenizer), False
    return encode, True


def _library_encoder(tokenizer: Tokenizer) -> Encoder:
    def encode(text: str) -> np.ndarray:
        return np.array(tokenizer.encode(text, add_special_tokens=False).ids, dtype=np.uint32)

    return encode


def _probe(tokenizer: Tokenizer) -> list[str]:
    """The fixed probe, and the file's added tokens (the special ones and the rest) alone,
    glued together, and between words."""
    added = [token.content for token in tokenizer.get_added_tokens_decoder().values()]
    return [*_PROBE, *added, "".join(added), " x ".join(added), "a".join(added) + "a"]
