"""Where decoded frames live: anonymous mappings in ordinary pages, kept in a small pool
when the last array over one is dropped, and handed to the next decode.

The frames are a decode's one large allocation (32 frames of 720p: 88 MB), and the first
write to fresh memory is kernel work, paid as system time; on VMs whose host takes back
free guest memory (virtio-balloon free page reporting) nearly every page is fresh again a
few seconds after it is freed. Writing into a mapping that an earlier decode filled costs
none of that: 36-46 ms of system time (23,000 page faults) per 32-frame 720p decode down
to 3-6 ms (docs/ARCHITECTURE.md). numpy's own allocation would also ask for transparent
huge pages, which cost more still there (about 2 ms each).

An idle mapping is marked MADV_FREE: the kernel may take its pages whenever it needs the
memory (they come back zeroed, like fresh ones), and otherwise they are written again at
no cost. At most KEEP_IDLE_BYTES are kept idle, the most recently returned first.
"""

from __future__ import annotations

import mmap
import threading
import weakref

import numpy as np

KEEP_IDLE_BYTES = 512 << 20


class MappingPool:
    """Idle anonymous mappings, reused for a request of at least half their size."""

    def __init__(self, keep_bytes: int):
        self._keep = keep_bytes
        self._idle: list[mmap.mmap] = []  # oldest first
        self._idle_bytes = 0
        self._lock = threading.Lock()

    @property
    def idle_bytes(self) -> int:
        return self._idle_bytes

    def take(self, nbytes: int) -> mmap.mmap:
        with self._lock:
            fits = [mapping for mapping in self._idle if nbytes <= len(mapping) <= 2 * nbytes]
            if fits:
                mapping = min(fits, key=len)
                self._idle.remove(mapping)
                self._idle_bytes -= len(mapping)
                return mapping
        return mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE)

    def give_back(self, mapping: mmap.mmap) -> None:
        if len(mapping) > self._keep:
            return  # unmapped once the last array over it is gone
        if hasattr(mmap, "MADV_FREE"):  # Linux
            mapping.madvise(mmap.MADV_FREE)
        with self._lock:
            self._idle.append(mapping)
            self._idle_bytes += len(mapping)
            while self._idle_bytes > self._keep:
                self._idle_bytes -= len(self._idle.pop(0))


POOL = MappingPool(KEEP_IDLE_BYTES)


def output_memory(nbytes: int) -> np.ndarray:
    """Flat uint8 memory for `nbytes` of returned frames, from the pool or a new mapping;
    the mapping goes back to the pool when the last array viewing it is dropped."""
    if nbytes == 0:
        return np.empty(0, dtype=np.uint8)
    mapping = POOL.take(nbytes)
    memory = np.frombuffer(mapping, dtype=np.uint8, count=nbytes)
    # Called as `memory` (the base of every view of it) is freed; it holds the mapping, not the array.
    weakref.finalize(memory, POOL.give_back, mapping).atexit = False
    return memory
