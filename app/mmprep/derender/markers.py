"""Finding markup (<think>, </tool_call>, ...) in text that arrives in pieces: the earliest
whole marker, and how much of the tail could be the start of one (held back until the
next piece says)."""

from __future__ import annotations


def earliest(text: str, markers: tuple[str, ...]) -> tuple[int, str] | None:
    """The first marker in `text` and where it starts (ties: the first listed)."""
    best = None
    for marker in markers:
        at = text.find(marker)
        if at >= 0 and (best is None or at < best[0]):
            best = (at, marker)
    return best


def partial_tail(text: str, markers: tuple[str, ...]) -> int:
    """How many trailing characters of `text` are a proper start of some marker."""
    longest = 0
    for first in {marker[0] for marker in markers}:
        last = text.rfind(first)  # only from a marker's first character can one begin
        if last < 0:
            continue
        tail = text[last:]
        for marker in markers:
            if len(tail) < len(marker) and marker.startswith(tail):
                longest = max(longest, len(tail))
    return longest
