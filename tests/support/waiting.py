"""Waiting for something to become true, with a deadline: what a test does instead of a
sleep that guesses how long the server takes (too short on a loaded machine, wasted time
on an idle one)."""

from __future__ import annotations

import time
from collections.abc import Callable

POLL_S = 0.02


def wait_until(condition: Callable[[], object], what: str = "the condition", timeout: float = 10) -> None:
    """Return as soon as `condition()` is true; an AssertionError naming `what` once
    `timeout` seconds have gone by without it."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(POLL_S)
