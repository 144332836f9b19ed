"""One machine for the suite's two workers: a test marked `alone` runs with no other test of
this checkout's suite running beside it; every other test shares the machine.

A readers-writer lock on a file (flock): each test holds it shared while it runs, an `alone`
test holds it exclusively, so it starts when the other worker's current test has ended and
the other worker waits for it. Timing tests need it: on 2 cores, whatever the neighbour test
happens to run (torch's threads, a compile, 300 MiB of its own) stretches a probe that
measures how long the server keeps others waiting."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def machine_share(checkout: Path, alone: bool) -> Iterator[None]:
    key = hashlib.sha256(str(checkout.resolve()).encode()).hexdigest()[:16]
    with open(Path(tempfile.gettempdir()) / f"mmprep-tests-{key}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        yield  # closing the file lets go of the lock
