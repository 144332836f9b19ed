"""What the two serve-parity test files share: benchmarks/vllm_serve_parity.py's comparison,
one `vllm serve` per family run once in the process, its rows asked case by case. Two files
(the Qwen-VL line; the other families), so CI's live stage runs them on its two workers."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import vllm_serve_parity as parity

MEDIA = parity.media()


def cases(families: tuple[str, ...]) -> list[tuple[str, str]]:
    """(family, medium) for every medium the family is asked (vllm_serve_parity.media_of)."""
    return [(family, name) for family in families for name in parity.media_of(family, MEDIA)]


@functools.cache
def probes() -> dict:
    return parity.vllm_loaders(MEDIA)


@functools.cache
def rows(family: str) -> dict[str, dict]:
    """One `vllm serve` for the family, every medium asked of it and of mmprep in front of it."""
    return {row["medium"]: row for row in parity.run_family(family, MEDIA, probes())}


def check(request: pytest.FixtureRequest, family: str, medium: str) -> None:
    """vLLM's answer, prompt tokens, grid and pixels, but for KNOWN's (strict xfails: the
    day one agrees, the test says so)."""
    row = rows(family)[medium]
    if row["known"]:
        request.applymarker(pytest.mark.xfail(strict=True, reason=row["known"]))
    assert row["equal"], row["notes"]
