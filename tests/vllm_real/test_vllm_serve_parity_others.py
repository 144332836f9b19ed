"""mmprep against a real `vllm serve` at vLLM's defaults (issue 59, point 5), every family with
an engine here but the Qwen-VL line (test_vllm_serve_parity.py): the real-world cuts of
tests/data/media/REAL_FILES.md, to those that take video, and the photos made by
benchmarks/vllm_serve_parity.py; answers, prompt tokens, grids, pixels and dtypes.

Slow: about 8 minutes for the six families on 2 shared cores (Llama 4's engine, compiled, 2
of them); skipped without the vLLM venv of scripts/vllm_venv.sh."""

from __future__ import annotations

import pytest

from tests.vllm_real.real_vllm import missing_venv

pytestmark = pytest.mark.slow
if reason := missing_venv():
    pytest.skip(reason, allow_module_level=True)

from tests.vllm_real.serve_parity import cases, check, parity  # noqa: E402 (after the skip)

OTHERS = tuple(family for family in parity.FAMILIES if family not in parity.QWEN_VL)


@pytest.mark.parametrize("family, medium", cases(OTHERS))
def test_mmprep_answers_as_vllm_serve(request, family, medium):
    check(request, family, medium)
