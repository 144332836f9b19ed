"""Where a request's preprocessing time went, for the Server-Timing header."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class Timing:
    """Where a request's wall time went, for the Server-Timing header (milliseconds).

    fetch is the time while any of its fetches ran; decode the time while a decode ran and
    no fetch did; preprocess the whole of preprocessing. Media items fetched and decoded
    side by side are not counted twice, so fetch + decode never exceed preprocess: the rest
    is the other preprocessing. engine is the time from handing the PreparedRequest to the
    engine until its first output (for remote workers: the hand-off and the worker's first
    token), when there was one. render (with --model) is the time spent rendering the chat
    template and the prompt's token ids, a part of preprocess.
    """

    spans: dict[str, list[tuple[float, float]]] = field(default_factory=lambda: {"fetch": [], "decode": []})
    preprocess: float = 0.0
    engine: float | None = None
    render: float | None = None

    def add(self, phase: str, start: float, end: float) -> None:
        self.spans[phase].append((start, end))

    def milliseconds(self) -> dict[str, float]:
        """Each phase's milliseconds, as the header gives them (engine only when there was one)."""
        fetch = _rounded_ms(_covered(self.spans["fetch"]))
        decode = _rounded_ms(_covered(self.spans["decode"], outside=self.spans["fetch"]))
        # rounded so that fetch + decode + the rest add up to preprocess exactly
        preprocess = round(fetch + decode + max(0.0, _rounded_ms(self.preprocess) - fetch - decode), 1)
        phases = {"fetch": fetch, "decode": decode, "preprocess": preprocess}
        if self.render is not None:
            phases["render"] = _rounded_ms(self.render)
        if self.engine is not None:
            phases["engine"] = _rounded_ms(self.engine)
        return phases

    def header(self) -> str:
        return ", ".join(f"{name};dur={ms:.1f}" for name, ms in self.milliseconds().items())


def _covered(spans: Sequence[tuple[float, float]], outside: Sequence[tuple[float, float]] = ()) -> float:
    """Seconds during which at least one of `spans` ran and none of `outside` did."""
    edges = sorted({edge for span in (*spans, *outside) for edge in span})
    total = 0.0
    for start, end in itertools.pairwise(edges):
        middle = (start + end) / 2
        if any(a <= middle < b for a, b in spans) and not any(a <= middle < b for a, b in outside):
            total += end - start
    return total


def _rounded_ms(seconds: float) -> float:
    return round(seconds * 1000, 1)
