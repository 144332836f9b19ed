"""A Gemma shaped `tokenizer.json` (Gemma 4's, Gemma 3's), built offline for tests.

Google publishes Gemma's vocabulary only inside the (gated) checkpoints, and no package
carries it, so this is not the real vocabulary. It is the published tokenizer's shape, with
its special tokens at their published ids (google/gemma-4-31B-it's and google/gemma-3-4b-it's
tokenizer.json, as processors/mmprep/processors/presets/SOURCES.md says): a SentencePiece-style
BPE (spaces normalized to "▁", split after each, byte fallback to `<0x..>` tokens, `<unk>`),
the same decoder, and a vocabulary of 262,144 (Gemma 3: 262,145, its `<image_soft_token>`
after them). Its text tokens are a small set of our own: every printable ASCII character,
"▁", and the words of `WORDS` merged letter by letter; every other id is a filler no text
encodes to. So text gets other ids than the real model gives it, but transformers, vLLM and
mmprep all read this one file, and every special token (the turn, channel, tool and media
markers) is the real one at its real id. Gemma 3's also has the published runs of 1 to 31
line breaks as single tokens (ids 107 to 137, not special), since its image placeholder's
"\n\n" joins the line breaks around it into one token, and the published `<bos>` its
tokenizer adds in front of a text (add_special_tokens).
"""

from __future__ import annotations

from pathlib import Path

from tests.support.tokenizer_parts import bos_template, bpe, document, kept_file, merges_of, spelled

VOCAB_SIZE = 262144
# (id, content) as google/gemma-4-31B-it's tokenizer.json lists its added tokens (all special)
GEMMA4_TOKENS = [
    (0, "<pad>"),
    (1, "<eos>"),
    (2, "<bos>"),
    (3, "<unk>"),
    (4, "<mask>"),
    (46, "<|tool>"),
    (47, "<tool|>"),
    (48, "<|tool_call>"),
    (49, "<tool_call|>"),
    (50, "<|tool_response>"),
    (51, "<tool_response|>"),
    (52, '<|"|>'),
    (98, "<|think|>"),
    (100, "<|channel>"),
    (101, "<channel|>"),
    (105, "<|turn>"),
    (106, "<turn|>"),
    (255999, "<|image>"),
    (256000, "<|audio>"),
    (258880, "<|image|>"),
    (258881, "<|audio|>"),
    (258882, "<image|>"),
    (258883, "<audio|>"),
    (258884, "<|video|>"),
]
# (id, content) of the named special tokens of google/gemma-3-4b-it's tokenizer.json (its
# <unusedN> ones are left out: no template or processor writes them)
GEMMA3_TOKENS = [
    (0, "<pad>"),
    (1, "<eos>"),
    (2, "<bos>"),
    (3, "<unk>"),
    (4, "<mask>"),
    (105, "<start_of_turn>"),
    (106, "<end_of_turn>"),
    (255999, "<start_of_image>"),
    (256000, "<end_of_image>"),
    (262144, "<image_soft_token>"),
]
GEMMA3_LINE_BREAKS = [(106 + count, "\n" * count) for count in range(1, 32)]  # ids 107..137, not special
ADDED_TOKENS = {"gemma4": GEMMA4_TOKENS, "gemma4_e4b": GEMMA4_TOKENS, "gemma3": GEMMA3_TOKENS}
PLAIN_TOKENS = {"gemma4": [], "gemma4_e4b": [], "gemma3": GEMMA3_LINE_BREAKS}  # added, not special
SIZES = {"gemma4": VOCAB_SIZE, "gemma4_e4b": VOCAB_SIZE, "gemma3": VOCAB_SIZE + 1}
ADDS_BOS = {"gemma4": False, "gemma4_e4b": False, "gemma3": True}  # the post-processor puts <bos> in front
FAMILIES = tuple(ADDED_TOKENS)
SPACE = "\u2581"  # SentencePiece's word mark: the normalizer writes it for every space
FIRST_BYTE_ID = 238  # where the 256 byte-fallback tokens <0x00>..<0xFF> start, as in Gemma's vocabulary
# Words merged into one token each (with and without a leading space): the chat template's
# role and channel names, and words the tests' chats use, so prompts are not all letters.
WORDS = (
    "user model system assistant thought tool call response function name description "
    "parameters type string object properties required the a an and of to in is it that "
    "what this image video picture describe weather city hello world please answer"
).split()


def tokenizer_json(family: str = "gemma4") -> dict:
    """The tokenizer.json of `family` as a dict."""
    if family not in FAMILIES:
        raise ValueError(f"no Gemma tokenizer for {family!r}: choose one of {', '.join(FAMILIES)}")
    special, plain = ADDED_TOKENS[family], PLAIN_TOKENS[family]
    vocab: dict[str, int] = {content: id_ for id_, content in special + plain}
    for byte in range(256):
        vocab[f"<0x{byte:02X}>"] = FIRST_BYTE_ID + byte
    taken = set(vocab.values())
    free = iter([id_ for id_ in range(SIZES[family]) if id_ not in taken])
    # tokens after the bytes, in id order: characters, then each word's letters merged
    characters = [SPACE, *(chr(code) for code in range(33, 127))]
    words = spelled(WORDS, SPACE, characters)
    for token, id_ in zip(
        characters + words, free, strict=False
    ):  # text first: zip stops there, taking no id
        vocab[token] = id_
    # a filler: a private-use character no merge makes, so no text encodes to one
    for id_ in free:
        vocab[f"\ue000{id_}"] = id_
    added = [(id_, content, True) for id_, content in special] + [
        (id_, content, False) for id_, content in plain
    ]
    bos = ("<bos>", 2) if ADDS_BOS[family] else None
    return document(
        sorted(added),
        normalizer={"type": "Replace", "pattern": {"String": " "}, "content": SPACE},
        pre_tokenizer={
            "type": "Split",
            "pattern": {"String": " "},
            "behavior": "MergedWithPrevious",
            "invert": False,
        },
        post_processor=bos_template(bos, pair_bos_type_id=0),
        decoder={
            "type": "Sequence",
            "decoders": [
                {"type": "Replace", "pattern": {"String": SPACE}, "content": " "},
                {"type": "ByteFallback"},
                {"type": "Fuse"},
            ],
        },
        model=bpe(vocab, merges_of(words), unk_token="<unk>", fuse_unk=True, byte_fallback=True),
    )


def tokenizer_file(family: str = "gemma4") -> Path:
    """`family`'s tokenizer.json on disk, built once and kept in the temp folder (keyed by
    this module's text, so a change to it builds a new one)."""
    return kept_file(
        f"gemma-{family}", lambda: tokenizer_json(family), Path(__file__).read_bytes(), family.encode()
    )
