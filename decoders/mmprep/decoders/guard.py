"""The limits every pass over a video obeys: a deadline, a cancel event and a thread budget."""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from dataclasses import dataclass

from .errors import DecodeCancelledError, DecodeTimeoutError


@dataclass(frozen=True)
class DecodeGuard:
    deadline: float | None = None  # time.monotonic() past which the decode gives up
    cancel: threading.Event | None = None  # set from another thread to stop the decode
    threads: int = 0  # FFmpeg threads for one decoder, 0 for one per core

    @classmethod
    def starting_now(
        cls, timeout: float | None, cancel: threading.Event | None = None, threads: int = 0
    ) -> DecodeGuard:
        deadline = None if timeout is None else time.monotonic() + timeout
        return cls(deadline, cancel, threads)

    def check(self) -> None:
        """Raise if the decode was cancelled or its time is up; passes call it between packets."""
        if self.cancel is not None and self.cancel.is_set():
            raise DecodeCancelledError("the decode was cancelled")
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise DecodeTimeoutError("decoding took longer than the time allowed")

    @property
    def budget(self) -> int:
        """Threads the whole decode may keep busy."""
        return self.threads or os.cpu_count() or 1

    def share(self, parts: int) -> DecodeGuard:
        """The same limits for one of `parts` decoders running side by side."""
        return dataclasses.replace(self, threads=max(1, self.budget // parts))
