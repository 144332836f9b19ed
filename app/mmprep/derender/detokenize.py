"""Token ids to text, incrementally: the tokenizers library's DecodeStream, as vLLM's
FastIncrementalDetokenizer drives it.

A character whose UTF-8 bytes are split across tokens is held back until whole (the
stream answers None meanwhile), never sent as U+FFFD. Concatenated, the pieces equal
`tokenizer.decode(all_ids, skip_special_tokens=...)`.
"""

from __future__ import annotations

import logging
from functools import cache

from tokenizers import Tokenizer
from tokenizers.decoders import DecodeStream

log = logging.getLogger("mmprep.derender")

# The tokenizers library's error for a stream whose bytes went backwards (vLLM #17448):
# the stream is started again from the next token.
INVALID_PREFIX = "Invalid prefix encountered"


@cache
def added_tokens(tokenizer: Tokenizer) -> dict[int, str]:
    """Every added token's id and text (special or not), as vLLM reads them."""
    return {token_id: token.content for token_id, token in tokenizer.get_added_tokens_decoder().items()}


class Detokenizer:
    """One request's output ids to text pieces.

    skip_special_tokens: drop tokens marked special (Qwen's <|im_end|>; not <think> or
    <tool_call>, which the models mark as ordinary). spaces_between_special_tokens=False
    (read only when special tokens are kept, as vLLM reads it): two added tokens in a row
    are joined with nothing between them.
    """

    def __init__(
        self,
        tokenizer: Tokenizer,
        skip_special_tokens: bool = True,
        spaces_between_special_tokens: bool = True,
    ):
        self._tokenizer = tokenizer
        self._skip = skip_special_tokens
        self._stream = DecodeStream(skip_special_tokens=skip_special_tokens)
        self._pending: list[int] = []  # ids the stream holds: an unfinished character
        self._added = (
            None if skip_special_tokens or spaces_between_special_tokens else added_tokens(tokenizer)
        )
        self._last_added = False

    def step(self, token_id: int) -> str:
        """The text `token_id` completes (empty while a character is unfinished)."""
        try:
            piece = self._stream.step(self._tokenizer, token_id)
        except Exception as error:  # the library raises plain Exceptions
            if not str(error).startswith(INVALID_PREFIX):
                raise
            log.warning("the decode stream's bytes went backwards; starting it again")
            self._stream, self._pending = DecodeStream(skip_special_tokens=self._skip), []
            piece = self._stream.step(self._tokenizer, token_id)
        if piece is None:
            self._pending.append(token_id)
            return ""
        self._pending.clear()
        if self._added is not None:
            content = self._added.get(token_id)
            if content is not None and self._last_added:
                piece = content  # without the space a decoder may put before it
            self._last_added = content is not None
        return piece

    def flush(self) -> str:
        """At the end: an unfinished character (an answer cut by max_tokens or a stop token
        inside it) is dropped, as vLLM's detokenizer drops it, never sent as U+FFFD."""
        if self._pending:
            log.debug("an unfinished character's %d tokens dropped at the end", len(self._pending))
        self._pending = []
        return ""
