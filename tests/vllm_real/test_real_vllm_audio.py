"""Audio live, against vLLM 0.33's `vllm launch render` alone: the same chats with an
`input_audio` part and `audio_url` parts to both, on the gemma4_e4b folder (an audio tower),
token ids, placeholders, mm_hashes and each item's tensors compared; and a Gemma 4 without an
audio tower (the 31B preset) refused by both with vLLM's message.

It needs the render venv with vLLM's audio decoders (av, soundfile, torchaudio: what
scripts/vllm_venv.sh installs); it is skipped, saying so, without them."""

from __future__ import annotations

import base64
import subprocess

import httpx
import pytest

from mmprep.testing.audio import encode_audio, tone
from mmprep.testing.model_folder import make_model_folder
from tests.vllm_real.real_vllm import (
    RENDER_VENV,
    SCRIPT,
    as_generate_takes,
    data_url,
    differences,
    missing_venv,
    mmprep_server,
    render,
    render_fields,
    vllm_render,
)

pytestmark = pytest.mark.slow
AUDIO_PACKAGES = ("av", "soundfile", "torchaudio")


def missing_audio() -> str | None:
    if reason := missing_venv(RENDER_VENV):
        return reason
    check = f"import importlib.util as u; print(all(u.find_spec(m) for m in {AUDIO_PACKAGES!r}))"
    found = subprocess.run([RENDER_VENV / "bin" / "python", "-c", check], capture_output=True, text=True)
    if found.stdout.strip() != "True":
        return f"{RENDER_VENV} lacks vLLM's audio decoders ({', '.join(AUDIO_PACKAGES)}): `bash {SCRIPT}`"
    return None


if reason := missing_audio():
    pytest.skip(reason, allow_module_level=True)


def input_audio(data: bytes, fmt: str) -> dict:
    return {"type": "input_audio", "input_audio": {"data": base64.b64encode(data).decode(), "format": fmt}}


def audio_url(data: bytes, mime: str) -> dict:
    return {"type": "audio_url", "audio_url": {"url": data_url(data, mime)}}


# name -> the chat's media parts. The 44.1 kHz stereo files are mixed to mono and resampled to
# 16 kHz by both (vLLM: torchaudio's Resample; mmprep: its numpy port).
CASES = {
    "wav 16k input_audio": [input_audio(encode_audio(tone(1.5, 16000), 16000, "wav"), "wav")],
    "flac 44.1k stereo audio_url": [
        audio_url(encode_audio(tone(2.0, 44100, 2), 44100, "flac"), "audio/flac")
    ],
    "ogg 48k stereo audio_url": [audio_url(encode_audio(tone(1.2, 48000, 2), 48000, "ogg"), "audio/ogg")],
    "mp3 44.1k stereo audio_url": [audio_url(encode_audio(tone(2.0, 44100, 2), 44100, "mp3"), "audio/mpeg")],
    "two audios": [
        input_audio(encode_audio(tone(0.7, 22050, frequency=300), 22050, "wav"), "wav"),
        audio_url(encode_audio(tone(3.1, 16000, frequency=900), 16000, "flac"), "audio/flac"),
    ],
}

# Formats vLLM decodes with soundfile (libsndfile: libvorbis, mpg123) where mmprep decodes with
# FFmpeg: the same length, so the same ids and placeholders, but samples that differ in their
# last bits, so other features and hashes (docs/deployment.md, "Audio").
DECODED_OTHERWISE = ("ogg 48k stereo audio_url", "mp3 44.1k stereo audio_url")


def shapes(fields: dict) -> list[dict]:
    """Each audio item's keys, their dtype and shape (not their bytes), and their fields."""
    return [
        {key: (entry["data"][:2], entry["field"]) for key, entry in item.items()}
        for item in fields["tensors"]["audio"]
    ]


def chat(model: str, parts: list[dict]) -> dict:
    content = [*parts, {"type": "text", "text": "Transcribe it."}]
    return {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": 8}


@pytest.fixture(scope="module")
def e4b(tmp_path_factory):
    folder = make_model_folder("gemma4_e4b", tmp_path_factory.mktemp("models") / "gemma4-e4b")
    with vllm_render(folder, "default") as vllm, mmprep_server(folder, None, normalize=None) as mmprep:
        yield folder, vllm.url, mmprep


@pytest.mark.parametrize("case", CASES)
def test_the_audio_render_is_vllms(e4b, case):
    folder, vllm, mmprep = e4b
    body = chat(str(folder), CASES[case])
    theirs = render(vllm, body)
    assert theirs["features"]["mm_placeholders"]["audio"]  # vLLM took the audio
    # mmprep's ranges are the embeddings' run (Gemma 4's <|audio> and <audio|> outside it),
    # what vLLM 0.33's generate takes; vLLM's render answers the bracketed range
    expected = as_generate_takes(render_fields(theirs), folder, "gemma4")
    ours = render_fields(render(mmprep, body))
    if case in DECODED_OTHERWISE:
        assert [found.split(":")[0] for found in differences(ours, expected)] == ["mm_hashes", "tensors"]
        assert shapes(ours) == shapes(expected)
    else:
        assert differences(ours, expected) == []


def test_a_gemma4_without_an_audio_tower_refuses_audio_as_vllm(tmp_path):
    folder = make_model_folder("gemma4", tmp_path / "gemma4-31b")
    body = chat(str(folder), CASES["wav 16k input_audio"])
    with vllm_render(folder, "default") as vllm, mmprep_server(folder, None, normalize=None) as mmprep:
        theirs = httpx.post(f"{vllm.url}/v1/chat/completions/render", json=body, timeout=600)
        ours = httpx.post(f"{mmprep}/v1/chat/completions/render", json=body, timeout=600)
    assert theirs.status_code == ours.status_code == 400, (theirs.text, ours.text)
    assert "does not have an audio tower" in theirs.json()["error"]["message"]
    # vLLM writes a path in an error as <path>; mmprep names the model as it is served
    assert ours.json()["error"]["message"] == theirs.json()["error"]["message"].replace("<path>", str(folder))
    assert ours.json()["error"]["param"] == "messages[0].content[0].input_audio"
