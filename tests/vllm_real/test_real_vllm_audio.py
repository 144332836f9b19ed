"""Audio live, against vLLM 0.33's `vllm launch render` alone: the same chats with an
`input_audio` part and `audio_url` parts to both, on the gemma4_e4b folder (an audio tower),
token ids, placeholders, mm_hashes and each item's tensors compared (real_vllm.audio_cases),
vLLM at its defaults (no --dtype: the features bfloat16 here) and mmprep at its own;
and a Gemma 4 without an audio tower (the 31B preset) refused by both with vLLM's message.
test_vllm_audio_goldens.py checks the same against a recording, without vLLM.

It needs the render venv with vLLM's audio decoders (av, soundfile, torchaudio: what
scripts/vllm_venv.sh installs); it is skipped, saying so, without them."""

from __future__ import annotations

import httpx
import pytest

from tests.support.model_folder import make_model_folder
from tests.vllm_real.real_vllm import (
    AUDIO_FOLDER,
    as_generate_takes,
    assert_audio_render,
    audio_cases,
    audio_chat,
    missing_audio,
    mmprep_server,
    render,
    render_fields,
    vllm_render,
)

pytestmark = pytest.mark.slow
if reason := missing_audio():
    pytest.skip(reason, allow_module_level=True)

CASES = audio_cases()


@pytest.fixture(scope="module")
def e4b(tmp_path_factory):
    folder = make_model_folder(AUDIO_FOLDER, tmp_path_factory.mktemp("models") / "gemma4-e4b")
    with vllm_render(folder, "default") as vllm, mmprep_server(folder, None, normalize=None) as mmprep:
        yield folder, vllm.url, mmprep


@pytest.mark.parametrize("case", CASES)
def test_the_audio_render_is_vllms(e4b, case):
    folder, vllm, mmprep = e4b
    body = audio_chat(str(folder), CASES[case])
    theirs = render(vllm, body)
    assert theirs["features"]["mm_placeholders"]["audio"]  # vLLM took the audio
    # mmprep's ranges are the embeddings' run (Gemma 4's <|audio> and <audio|> outside it),
    # what vLLM 0.33's generate takes; vLLM's render answers the bracketed range
    expected = as_generate_takes(render_fields(theirs), folder, "gemma4")
    assert_audio_render(case, render_fields(render(mmprep, body)), expected, live=True)


def test_a_gemma4_without_an_audio_tower_refuses_audio_as_vllm(tmp_path):
    folder = make_model_folder("gemma4", tmp_path / "gemma4-31b")
    body = audio_chat(str(folder), CASES["wav 16k input_audio"])
    with vllm_render(folder, "default") as vllm, mmprep_server(folder, None, normalize=None) as mmprep:
        theirs = httpx.post(f"{vllm.url}/v1/chat/completions/render", json=body, timeout=600)
        ours = httpx.post(f"{mmprep}/v1/chat/completions/render", json=body, timeout=600)
    assert theirs.status_code == ours.status_code == 400, (theirs.text, ours.text)
    assert "does not have an audio tower" in theirs.json()["error"]["message"]
    # vLLM writes a path in an error as <path>; mmprep names the model as it is served
    assert ours.json()["error"]["message"] == theirs.json()["error"]["message"].replace("<path>", str(folder))
    assert ours.json()["error"]["param"] == "messages[0].content[0].input_audio"
