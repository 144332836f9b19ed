"""Log-probabilities in OpenAI's chat format: per output token
`{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}, ...]}`.

`bytes` are the token's own bytes (a byte-level vocabulary's token may hold part of a
character: OpenAI gives those bytes; `token` is then their text with U+FFFD, as vLLM's
decode of the single token gives it). Logprobs below -9999 are given as -9999, as vLLM.

With vllm serve's --return-tokens-as-token-ids (or a request's return_tokens_as_token_ids),
each `token` is `token_id:N` instead, as vLLM 0.33 writes it: the sampled token keeps its
own bytes, an alternative's `bytes` are those of its `token_id:N`.
"""

from __future__ import annotations

from tokenizers import Tokenizer

from ..interface.engine import TokenLogprob
from ..model.byte_level import byte_to_unicode
from .detokenize import added_tokens

FLOOR = -9999.0
# the inverse of GPT-2's byte-to-character map, which byte-level vocabularies are written in
_BYTES_OF = {char: byte for byte, char in byte_to_unicode().items()}


class LogprobFormatter:
    def __init__(self, tokenizer: Tokenizer, top_logprobs: int = 0, as_token_ids: bool = False):
        self._tokenizer, self._top, self._as_ids = tokenizer, top_logprobs, as_token_ids
        self._added = added_tokens(tokenizer)
        self._byte_level = type(tokenizer.decoder).__name__ == "ByteLevel"
        self._cache: dict[int, tuple[str, list[int]]] = {}

    def entries(self, logprobs: tuple[TokenLogprob, ...]) -> list[dict]:
        return [self.entry(item) for item in logprobs]

    def entry(self, item: TokenLogprob) -> dict:
        token, raw = self.token(item.token_id)
        if self._as_ids:
            token = token_id_name(item.token_id)
        return {
            "token": token,
            "logprob": max(item.logprob, FLOOR),
            "bytes": raw,
            "top_logprobs": [
                self._alternative(token_id, logprob) for token_id, logprob in item.top[: self._top]
            ],
        }

    def _alternative(self, token_id: int, logprob: float) -> dict:
        if self._as_ids:
            token = token_id_name(token_id)
            return {"token": token, "logprob": max(logprob, FLOOR), "bytes": list(token.encode())}
        token, raw = self.token(token_id)
        return {"token": token, "logprob": max(logprob, FLOOR), "bytes": raw}

    def token(self, token_id: int) -> tuple[str, list[int]]:
        found = self._cache.get(token_id)
        if found is None:
            found = self._cache[token_id] = self._describe(token_id)
        return found

    def _describe(self, token_id: int) -> tuple[str, list[int]]:
        added = self._added.get(token_id)
        if added is not None:
            return added, list(added.encode())
        piece = self._tokenizer.id_to_token(token_id)
        if piece is not None and self._byte_level and all(char in _BYTES_OF for char in piece):
            raw = bytes(_BYTES_OF[char] for char in piece)
            return raw.decode("utf-8", errors="replace"), list(raw)
        text = self._tokenizer.decode([token_id], skip_special_tokens=False)
        return text, list(text.encode("utf-8", errors="replace"))


def token_id_name(token_id: int) -> str:
    """vLLM's name of a token by its id (format_token_id_placeholder)."""
    return f"token_id:{token_id}"
