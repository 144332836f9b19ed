"""The audio record (app/mmprep/modalities/audio.py) where no model is loaded: the WAV an
OpenAI upstream is sent decodes back to the waveform to the bit, and the echo engine keeps a
file's own rate (there is no model whose rate it should have); --limit-mm-per-prompt counts
audio as vLLM does."""

from __future__ import annotations

import base64
import json

import numpy as np
import openai
import pytest

from mmprep.core.config import Settings
from mmprep.decoders import decode_audio
from mmprep.interface.prepared import MediaItem
from mmprep.modalities import BY_PART_TYPE, MODALITIES
from tests.support.audio import encode_audio, tone
from tests.support.chat import openai_client
from tests.support.servers import LiveServer

AUDIO = MODALITIES["audio"]


def test_both_parts_are_audio():
    assert BY_PART_TYPE["input_audio"] is BY_PART_TYPE["audio_url"] is AUDIO


@pytest.mark.parametrize("rate", [16000, 44100])
def test_the_upstreams_wav_decodes_to_the_waveform(rate):
    waveform = np.random.default_rng(rate).uniform(-1, 1, rate // 3).astype(np.float32)
    item = MediaItem("audio", waveform, {"sampling_rate": rate}, "p")
    url = AUDIO.data_url(item, lambda pixels: "", "jpeg")
    assert url.startswith("data:audio/wav;base64,")
    decoded = decode_audio(base64.b64decode(url.split(",", 1)[1]))
    assert decoded.sampling_rate == rate
    np.testing.assert_array_equal(decoded.waveform, waveform)


@pytest.fixture(scope="module")
def echo():
    with LiveServer(Settings(limit_mm_per_prompt={"audio": 1})) as live:
        yield openai_client(live)


def test_without_a_model_the_file_keeps_its_rate(echo):
    mp3 = encode_audio(tone(1.0, 44100, 2), 44100, "mp3")
    part = {
        "type": "audio_url",
        "audio_url": {"url": "data:audio/mpeg;base64," + base64.b64encode(mp3).decode()},
    }
    answer = echo.chat.completions.create(model="mmprep-echo", messages=[{"role": "user", "content": [part]}])
    (item,) = json.loads(answer.choices[0].message.content)["media"]
    assert item["kind"] == "audio" and item["param"] == "messages[0].content[0].audio_url"
    assert item["metadata"]["sampling_rate"] == item["metadata"]["sample_rate"] == 44100
    assert item["metadata"]["channels"] == 2 and item["shape"] == [item["metadata"]["num_samples"]]


def test_limit_mm_per_prompt_counts_audio(echo):
    wav = base64.b64encode(encode_audio(tone(0.2, 16000), 16000, "wav")).decode()
    part = {"type": "input_audio", "input_audio": {"data": wav, "format": "wav"}}
    with pytest.raises(openai.BadRequestError) as refused:
        echo.chat.completions.create(
            model="mmprep-echo", messages=[{"role": "user", "content": [part, part]}]
        )
    assert "At most 1 audio(s)" in refused.value.body["message"]
