"""mmprep against a real `vllm serve` on camera-like media, nothing asked of the sampling
(issue 50, point 3): benchmarks/vllm_serve_parity.py's comparison, one case per family and
medium. Every case must have vLLM's answer, prompt tokens, grid and pixels, but for KNOWN's
(strict xfails: the day one agrees, the test says so). Qwen3-VL videos go to the engine as
one image item per temporal block, and are compared as the others.

Slow: 8 minutes for the three families on 2 shared cores (`-k qwen2_vl` for one); skipped without
the vLLM venv of scripts/vllm_venv.sh."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.vllm_real.real_vllm import missing_venv

pytestmark = pytest.mark.slow
if reason := missing_venv():
    pytest.skip(reason, allow_module_level=True)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import vllm_serve_parity as parity  # noqa: E402 (benchmarks/ is no package)

MEDIA = parity.media()


@pytest.fixture(scope="module")
def probes():
    return parity.vllm_loaders(MEDIA)


@pytest.fixture(scope="module", params=parity.FAMILIES)
def rows(request, probes):
    """One `vllm serve` per family, every medium asked of it and of mmprep in front of it."""
    return {row["medium"]: row for row in parity.run_family(request.param, MEDIA, probes)}


@pytest.mark.parametrize("medium", MEDIA)
def test_mmprep_answers_as_vllm_serve(request, rows, medium):
    row = rows[medium]
    if row["known"]:
        request.applymarker(pytest.mark.xfail(strict=True, reason=row["known"]))
    assert row["equal"], row["notes"]
