"""Where decoded frames live: anonymous mappings in ordinary pages, kept in a small pool
when the last array over one is dropped, and handed to the next decode.

The frames are a decode's one large allocation (32 frames of 720p: 88 MB), and the first
write to fresh memory is kernel work, paid as system time; on VMs whose host takes back
free guest memory (virtio-balloon free page reporting) nearly every page is fresh again a
few seconds after it is freed. Writing into a mapping that an earlier decode filled costs
none of that: 36-46 ms of system time (23,000 page faults) per 32-frame 720p decode down
to 3-6 ms (docs/decisions/002-memory-a-decode-touches.md). numpy's own allocation would
also ask for transparent huge pages, which cost more still there (about 2 ms each).

An idle mapping is marked MADV_FREE: the kernel may take its pages whenever it needs the
memory (they come back zeroed, like fresh ones), and otherwise they are written again at
no cost. At most KEEP_IDLE_BYTES are kept idle; past that the oldest are unmapped.
"""

from __future__ import annotations

import collections
import contextlib
import mmap
import threading
import weakref

import numpy as np

KEEP_IDLE_BYTES = 512 << 20


class MappingPool:
    """Idle anonymous mappings, reused for a request of at least four fifths of their size
    (so memory counted by the array's size is nearly all the memory it holds)."""

    def __init__(self, keep_bytes: int):
        self._keep = keep_bytes
        self._idle: list[mmap.mmap] = []  # oldest first
        self._idle_bytes = 0
        self._lock = threading.Lock()
        # Given back but not yet idle: give_back runs in finalizers, which the garbage
        # collector may call in a thread that holds the lock already (inside take), so it
        # never waits for the lock; whoever holds it next moves these to idle.
        self._returned: collections.deque[mmap.mmap] = collections.deque()

    @property
    def idle_bytes(self) -> int:
        with self._lock:
            self._settle()
            return self._idle_bytes

    def take(self, nbytes: int) -> mmap.mmap:
        with self._lock:
            self._settle()
            # the smallest that fits; of equal ones the newest, whose pages are likeliest still there
            fits = [mapping for mapping in reversed(self._idle) if nbytes <= len(mapping) <= nbytes * 5 // 4]
            if fits:
                mapping = min(fits, key=len)
                self._idle.remove(mapping)
                self._idle_bytes -= len(mapping)
                return mapping
        return mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE)

    def give_back(self, mapping: mmap.mmap) -> None:
        if len(mapping) > self._keep:
            return  # unmapped once the last array over it is gone
        with contextlib.suppress(AttributeError, OSError):  # no MADV_FREE here: the pages just stay
            mapping.madvise(mmap.MADV_FREE)
        self._returned.append(mapping)
        if self._lock.acquire(blocking=False):  # else its holder settles them
            try:
                self._settle()
            finally:
                self._lock.release()

    def _settle(self) -> None:
        """Under the lock: returned mappings become idle, the oldest dropped past the limit."""
        while self._returned:
            mapping = self._returned.popleft()
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
