"""Gemma 4 E4B's audio render against what `vllm launch render` 0.33 answered, without vLLM:
tests/data/vllm_real/audio.json, recorded by `scripts/record_vllm_goldens.py --audio`
(test_real_vllm_audio.py is the live check). Each case's files must still decode to the
samples recorded (a lossless file made by another FFmpeg may differ in its bytes only); then
mmprep's render route must answer vLLM's ids, placeholders (the run of embeddings), hashes and
tensors (all but the samples' last bits where numpy sums otherwise: real_vllm.sums_as_recorded)."""

from __future__ import annotations

import json

import pytest

from mmprep.decoders import decode_audio
from tests.support.model_folder import make_model_folder
from tests.vllm_real.real_vllm import (
    AUDIO_FOLDER,
    AUDIO_LOSSY,
    AUDIO_RESAMPLED_APART,
    RECORDED_DTYPE,
    REPO,
    assert_audio_render,
    audio_cases,
    audio_chat,
    audio_samples_digest,
    mmprep_server,
    render,
    render_fields,
)

GOLDENS_FILE = REPO / "tests" / "data" / "vllm_real" / "audio.json"
if not GOLDENS_FILE.exists():
    pytest.skip("no recording: python scripts/record_vllm_goldens.py --audio", allow_module_level=True)
GOLDENS = json.loads(GOLDENS_FILE.read_text())
CASES = audio_cases()


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    folder = make_model_folder(AUDIO_FOLDER, tmp_path_factory.mktemp("models") / "gemma4-e4b")
    # the hashes are keyed by the model vLLM was given: the recording's folder path
    with mmprep_server(folder, None, normalize=None, model=GOLDENS["model"], dtype=RECORDED_DTYPE) as url:
        yield url


@pytest.mark.parametrize("case", sorted(GOLDENS["cases"]))
def test_the_audio_render_is_what_vllm_answered(url, case):
    recorded = GOLDENS["cases"][case]
    parts = CASES[case]
    assert [audio_samples_digest(part, decode_audio) for part in parts] == recorded["samples"]
    ours = render_fields(render(url, audio_chat(GOLDENS["model"], parts)))
    assert_audio_render(case, ours, recorded["render"])


def test_the_recording_holds_every_case_both_decode_alike():
    assert sorted(GOLDENS["cases"]) == sorted(set(CASES) - set(AUDIO_LOSSY) - set(AUDIO_RESAMPLED_APART))
