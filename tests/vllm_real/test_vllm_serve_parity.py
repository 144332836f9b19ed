"""mmprep against a real `vllm serve` at vLLM's defaults, nothing asked of the sampling (issue
50, point 3; issue 59, point 5), the Qwen-VL line: benchmarks/vllm_serve_parity.py's
comparison on camera-like and real-world media, one case per family and medium. Qwen3-VL
videos go to the engine as one image item per temporal block, and are compared as the others.
test_vllm_serve_parity_others.py: the other families.

Slow: about 9 minutes for the three families on 2 shared cores (`-k qwen2_vl` for one); skipped
without the vLLM venv of scripts/vllm_venv.sh."""

from __future__ import annotations

import pytest

from tests.vllm_real.real_vllm import missing_venv

pytestmark = pytest.mark.slow
if reason := missing_venv():
    pytest.skip(reason, allow_module_level=True)

from tests.vllm_real.serve_parity import cases, check, parity  # noqa: E402 (after the skip)


@pytest.mark.parametrize("family, medium", cases(parity.QWEN_VL))
def test_mmprep_answers_as_vllm_serve(request, family, medium):
    check(request, family, medium)
