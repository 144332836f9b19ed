"""What the render answer wrote of a video it wrote before: its mm_hash, kept beside the
decode cache's frames, so a multi-turn chat that resends its video does not hash its 88 MB
of frames again (issue 29). An item's encoded wire form is not kept: base64 of its tensors
is cheaper to make again than a kept copy of every new item is to hold (request.py).

An entry is keyed by the identity of the arrays it was made from (the decode cache's
read-only tensors, which a repeated request gets back as the same objects) and everything
else that goes into it (small arrays by value, the fields' layout, the hash's options); it
holds no array, and goes the moment any of its arrays is freed (weakref.finalize), so an id
is never read for another array. Bounded in bytes of what it holds, least recently used
first out; counted in /metrics (mmprep_render_cache_*).
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Any

import numpy as np

# Arrays up to this size are keyed by their bytes (a grid, a 0-d field: often made anew per
# request), bigger ones by identity (the cached tensors).
BY_VALUE_BYTES = 4096


class WireCache:
    def __init__(
        self,
        max_bytes: int,
        on_lookup: Callable[[bool], None] | None = None,
        on_evict: Callable[[], None] | None = None,
    ):
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()  # encoding runs in worker threads
        self._on_lookup = on_lookup or (lambda hit: None)
        self._on_evict = on_evict or (lambda: None)

    def __len__(self) -> int:
        return len(self._entries)

    def get_or_make(
        self, parts: Iterable[Any], make: Callable[[], Any], size_of: Callable[[Any], int]
    ) -> Any:
        """The value kept for `parts` (arrays and hashable values, in order), else make()'s,
        kept if it fits."""
        arrays: list[np.ndarray] = []
        key = tuple(_key_part(part, arrays) for part in parts)
        if _UNKEYED in key:  # made of an array that may still change: not kept
            return make()
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
        self._on_lookup(found is not None)
        if found is not None:
            return found[0]
        value = make()
        self._put(key, value, size_of(value), arrays)
        return value

    def _put(self, key: Hashable, value: Any, size: int, arrays: list[np.ndarray]) -> None:
        if size > self.max_bytes:
            return
        with self._lock:
            if key in self._entries:
                return
            while self.bytes + size > self.max_bytes:
                _, (_, evicted) = self._entries.popitem(last=False)
                self.bytes -= evicted
                self._on_evict()
            self._entries[key] = (value, size)
            self.bytes += size
        for array in arrays:  # gone with any of its arrays, before that id can name another
            weakref.finalize(array, self._drop, key)

    def _drop(self, key: Hashable) -> None:
        with self._lock:
            entry = self._entries.pop(key, None)
            if entry is not None:
                self.bytes -= entry[1]


_UNKEYED = ("unkeyed",)


def _key_part(part: Any, arrays: list[np.ndarray]) -> Hashable:
    if isinstance(part, np.ndarray):
        if part.nbytes <= BY_VALUE_BYTES:
            return ("value", part.dtype.str, part.shape, part.tobytes())
        if part.flags.writeable:
            return _UNKEYED
        base = _owner(part)
        arrays.append(base)
        # the view's place in its owner, so two views of one array differ
        return (
            "array",
            id(base),
            part.__array_interface__["data"][0],
            part.dtype.str,
            part.shape,
            part.strides,
        )
    return part


def _owner(array: np.ndarray) -> np.ndarray:
    """The array that owns the memory (a view's base chain), whose life bounds the view's."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array
