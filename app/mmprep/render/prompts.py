"""Prompts without a chat template, as vLLM's renderer takes them: text tokenized with or
without the tokenizer's own special tokens (its post-processor: a BOS, an EOS), token ids
turned back into text and into the tokenizer's token strings. What /tokenize, /detokenize
and /v1/completions/render need beside the chat template."""

from __future__ import annotations

from functools import lru_cache

from tokenizers import Tokenizer

from ..core.errors import ServiceError
from ..model import ModelFolder

# Any text the tokenizer keeps as itself: the special tokens are what the post-processor adds
# around its ids.
_PROBE = "probe"


def encode_prompt(folder: ModelFolder, text: str, add_special_tokens: bool) -> list[int]:
    """`text`'s ids as transformers' tokenizer(text, add_special_tokens=...) gives them."""
    ids = folder.encode(text)
    return with_special_tokens(folder, ids) if add_special_tokens else ids


def with_special_tokens(folder: ModelFolder, ids: list[int]) -> list[int]:
    """`ids` with the tokenizer's own special tokens around them (a rendered chat's, for
    /tokenize's add_special_tokens)."""
    before, after = _special_affixes(folder.tokenizer)
    return [*before, *ids, *after]


@lru_cache(maxsize=8)
def _special_affixes(tokenizer: Tokenizer) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The ids the tokenizer's post-processor puts before and after a text's (none for the
    Qwen tokenizers; Llama's BOS), found on a probe: the fast encoder stays the one encoder."""
    plain = tokenizer.encode(_PROBE, add_special_tokens=False).ids
    full = tokenizer.encode(_PROBE, add_special_tokens=True).ids
    for start in range(len(full) - len(plain) + 1):
        if full[start : start + len(plain)] == plain:
            return tuple(full[:start]), tuple(full[start + len(plain) :])
    return (), ()  # a post-processor that rewrites the text's own ids: none added


def check_ids(folder: ModelFolder, ids: list[int], param: str) -> None:
    """Each id one the tokenizer has (a 400 naming the first that is not)."""
    size = folder.tokenizer.get_vocab_size(with_added_tokens=True)
    for index, token_id in enumerate(ids):
        if not 0 <= token_id < size:
            raise ServiceError(
                f"{param}[{index}]: token id {token_id} is not in the tokenizer's vocabulary "
                f"(0 to {size - 1})",
                "invalid_request",
                f"{param}[{index}]",
            )


def decode_prompt(folder: ModelFolder, ids: list[int]) -> str:
    """The ids' text as vLLM's /detokenize gives it (transformers' decode: special tokens kept)."""
    return folder.tokenizer.decode(ids, skip_special_tokens=False)


def token_strings(folder: ModelFolder, ids: list[int]) -> list[str]:
    """transformers' convert_ids_to_tokens: each id's token as the vocabulary writes it."""
    tokenizer = folder.tokenizer
    return [tokenizer.id_to_token(token_id) or "" for token_id in ids]
