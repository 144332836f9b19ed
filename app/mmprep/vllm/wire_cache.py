"""What the render answer wrote of an item it wrote before, kept beside the decode cache's
tensors (issue 29): each medium's mm_hash, so a multi-turn chat that resends its video does
not hash its 88 MB of frames again; and an item's encoded wire form (the base64 msgpack of its
MultiModalKwargsItem) once the item is sent a second time, so a chat that resends its images
does not encode their 30 MB of tensors again. Not the first time: a kept copy of every new
item would be fresh memory for the kernel to fault in (7.5 MB a 720p image), where base64
costs 0.04 ms a MB to make again (issue 58).

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
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

import numpy as np

# Arrays up to this size are keyed by their bytes (a grid, a 0-d field: often made anew per
# request), bigger ones by identity (the cached tensors).
BY_VALUE_BYTES = 4096
# Keys asked for once whose values were not kept (keep_first=False), remembered so that the
# second ask keeps its value; the oldest forgotten first.
SEEN_ONCE = 4096


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
        self._seen_once: OrderedDict[Hashable, None] = OrderedDict()
        self._lock = threading.Lock()  # encoding runs in worker threads
        self._on_lookup = on_lookup or (lambda hit: None)
        self._on_evict = on_evict or (lambda: None)

    def __len__(self) -> int:
        return len(self._entries)

    def get_or_make(
        self,
        parts: Iterable[Any],
        make: Callable[[], Any],
        size_of: Callable[[Any], int],
        keep_first: bool = True,
    ) -> Any:
        """The value kept for `parts` (arrays and hashable values, in order), else make()'s,
        kept if it fits; with `keep_first` False, only from the second time it is asked for."""
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
        if keep_first or self._asked_before(key):
            self._put(key, value, size_of(value), arrays)
        return value

    def _asked_before(self, key: Hashable) -> bool:
        """Whether `key` was asked for since it was last forgotten; it is remembered if not. A
        key remembered for an array since freed may be taken for a new one with its id: the
        new array's value is then kept the first time, which costs memory, never a wrong value."""
        with self._lock:
            if self._seen_once.pop(key, False) is None:
                return True
            self._seen_once[key] = None
            if len(self._seen_once) > SEEN_ONCE:
                self._seen_once.popitem(last=False)
            return False

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


def item_parts(item: Mapping[str, Any]) -> list[Any]:
    """What keys an encoded MultiModalKwargsItem (app/mmprep/vllm/items.py): each key, its data
    (arrays, or a list of floats) and its field's kind and keywords."""
    parts: list[Any] = []
    for name, elem in item.items():
        data = elem.data if isinstance(elem.data, np.ndarray) else ("list", tuple(elem.data))
        parts += [name, data, elem.field.kind, repr(elem.field.keywords)]
    return parts


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
