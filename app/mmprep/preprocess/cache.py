"""Decoded and processed media, kept by what it was made from and how: a multi-turn chat
that sends the same images or video with every turn decodes, resizes and patchifies them
once, for the render route and the chat route alike (one cache per Preprocessing).

The key is a fast hash of the bytes (xxh3-128: about 10 GB/s, so hashing costs far less
than fetching; of a data URL, its text, which spares the base64 decode) plus everything
else that decides the tensors (the caller's `options`: the sampling, the server's image
scale, the vision processor with its pixel form). Bounded in bytes of what it holds
(pixels, tensors, source files), least recently used first out. Identical decodes already
running are joined, not repeated. Cached tensors are read-only: requests share them.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

import xxhash

# Hash bigger payloads off the event loop (about 0.1 ms per MB).
INLINE_HASH_BYTES = 1 << 20


async def content_key(kind: str, data: bytes | memoryview, options: Hashable) -> tuple:
    """The same bytes made into tensors the same way (`options`: hashable, all that changes
    the result besides the bytes) share a key."""
    if len(data) > INLINE_HASH_BYTES:
        digest = await asyncio.to_thread(xxhash.xxh3_128_hexdigest, data)
    else:
        digest = xxhash.xxh3_128_hexdigest(data)
    return kind, digest, options


class DecodeCache:
    """`retry_on`: failures that belong to the request that ran the decode, not to the
    media (its client went away): requests that joined it decode for themselves instead."""

    def __init__(
        self,
        max_bytes: int,
        on_lookup: Callable[[bool], None] | None = None,
        retry_on: tuple[type[BaseException], ...] = (asyncio.CancelledError,),
        on_evict: Callable[[], None] | None = None,
    ):
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[tuple, tuple[Any, int]] = OrderedDict()
        self._running: dict[tuple, asyncio.Future] = {}
        self._on_lookup = on_lookup or (lambda hit: None)
        self._on_evict = on_evict or (lambda: None)
        self._retry_on = retry_on

    def __len__(self) -> int:
        return len(self._entries)

    async def get_or_decode(
        self, key: tuple, decode: Callable[[], Awaitable[Any]], size_of: Callable[[Any], int]
    ):
        """The cached result for `key`, or `await decode()` (once, however many ask at once)."""
        if key in self._entries:
            self._entries.move_to_end(key)
            self._on_lookup(True)
            return self._entries[key][0]
        if key in self._running:
            try:
                result = await asyncio.shield(self._running[key])
                self._on_lookup(True)
                return result
            except _OwnerGone:
                pass  # the request that was decoding it left: decode for ourselves
        self._on_lookup(False)
        future = asyncio.get_running_loop().create_future()
        self._running[key] = future
        try:
            result = await decode()
        except BaseException as error:
            future.set_exception(_OwnerGone() if isinstance(error, self._retry_on) else error)
            future.exception()  # mark retrieved: nobody else may be waiting
            raise
        finally:
            del self._running[key]
        future.set_result(result)
        self._put(key, result, size_of(result))
        return result

    def _put(self, key: tuple, result: Any, size: int) -> None:
        if size > self.max_bytes:
            return
        while self.bytes + size > self.max_bytes:
            _, (_, evicted) = self._entries.popitem(last=False)
            self.bytes -= evicted
            self._on_evict()
        self._entries[key] = (result, size)
        self.bytes += size


class _OwnerGone(Exception):
    """The request running a shared decode went away before it finished."""
