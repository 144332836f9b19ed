"""A small tokenizer folder for aiperf, which needs one to make prompts and count tokens
(its own default downloads one; nothing here may): a WordLevel vocabulary of common
English words, saved as tokenizer.json and tokenizer_config.json.

    python benchmarks/aiperf_tokenizer.py ./tok
    aiperf profile --tokenizer ./tok ...

Against the echo engine the counts need not match any model's: aiperf's prompts are made
of these words and its output counts are words, which is all a load test asks of them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tokenizers import Tokenizer, models, pre_tokenizers

WORDS = (  # a sentence reads better than a hundred quoted words
    "the a of to and in is it that was for on are with as his they be at one have this from or had "
    "by word but what some we can out other were all there when up use your how said an each she "
    "which do their time if will way about many then them write would like so these her long make "
    "thing see him two has look more day could go come did number sound no most people my over know "
    "water than call first who may down side been now find"
).split()


def write_tokenizer(folder: Path) -> None:
    vocabulary = {"[UNK]": 0, "<|endoftext|>": 1}
    for word in WORDS:
        vocabulary.setdefault(word, len(vocabulary))
    tokenizer = Tokenizer(models.WordLevel(vocabulary, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": "[UNK]",
        "eos_token": "<|endoftext|>",
        "bos_token": "<|endoftext|>",
        "model_max_length": 1_000_000,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config) + "\n")


if __name__ == "__main__":
    write_tokenizer(Path(sys.argv[1] if len(sys.argv) > 1 else "tok"))
