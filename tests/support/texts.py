"""Texts the tokenizer tests encode: pieces of mixed scripts, emoji, code and whitespace,
strings made of them from a seed, and random text over every script with a tokenizer's added
tokens among it."""

from __future__ import annotations

import random

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


def mixed_texts(added: list[str], seed: int = 7) -> list[str]:
    """Random text over every script, emoji, private-use characters and whitespace runs, and
    the tokenizer's added tokens among words, glued to them and before combining marks."""
    rng = random.Random(seed)

    def noise(length: int) -> str:
        ranges = [(0x20, 0x7F), (0xA0, 0x3000), (0x3000, 0xD7FF), (0x1F300, 0x1FAFF), (0xE000, 0x10FFFF)]
        spaces = [" ", "  ", "\n", "\n\n", "\t", "\r\n", "\u00a0", "\u3000", "\u2028", "\x0b", "\x85"]
        out = []
        for _ in range(length):
            low, high = rng.choice(ranges)
            out.append(rng.choice([chr(rng.randrange(low, high)), rng.choice(spaces), rng.choice(PIECES)]))
        return "".join(out)

    texts = [noise(rng.randrange(1, 300)) for _ in range(200)]
    for _ in range(200):
        parts = [rng.choice(added), noise(rng.randrange(0, 12)), rng.choice(PIECES), "\u0338", " ", "\n"]
        texts.append("".join(rng.choices(parts, k=rng.randrange(1, 20))))
    return [*texts, noise(20000), " ".join(rng.choices(PIECES, k=5000)), "", "\n" * 40, " " * 100, "😀" * 500]
