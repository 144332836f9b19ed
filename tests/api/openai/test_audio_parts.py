"""Audio parts through a real server on loopback and the official openai client: OpenAI's
`input_audio` (a WAV) and vLLM's `audio_url` (a FLAC data URL) to a Gemma 4 folder with an
audio tower (the gemma4_e4b preset), the render's ids, placeholders and features against
transformers 5.24's Gemma4Processor on the same chat, the echo engine's account; refused, as
a 400 naming the part, by another family, by a Gemma 4 without an audio tower (vLLM's
message), and for audio that is not audio."""

from __future__ import annotations

import base64
import json
import warnings

import numpy as np
import openai
import pytest

from mmprep.core.config import Settings
from mmprep.processors import cast, torch_name
from mmprep.vllm.serde import decode_item
from tests.support.audio import encode_audio, tone
from tests.support.chat import openai_client
from tests.support.model_folder import make_model_folder
from tests.support.servers import LiveServer

transformers = pytest.importorskip("transformers")

MODEL = "gemma-e4b"
# 16 kHz files of int16 samples: lossless, so transformers' waveform is the samples themselves
WAV_SAMPLES = tone(1.5, 16000, frequency=440)
FLAC_SAMPLES = tone(2.25, 16000, frequency=660)
WAV = encode_audio(WAV_SAMPLES, 16000, "wav")
FLAC = encode_audio(FLAC_SAMPLES, 16000, "flac")


def input_audio(data: bytes, fmt: str = "wav") -> dict:
    return {"type": "input_audio", "input_audio": {"data": base64.b64encode(data).decode(), "format": fmt}}


def audio_url(data: bytes, mime: str = "audio/flac") -> dict:
    return {
        "type": "audio_url",
        "audio_url": {"url": f"data:{mime};base64," + base64.b64encode(data).decode()},
    }


MESSAGES = [
    # as parts: vLLM (and mmprep) hand this template a string as parts (its content format is
    # "openai"), which it writes with a space after; transformers would hand it the string
    {"role": "system", "content": [{"type": "text", "text": "Listen closely."}]},
    {
        "role": "user",
        "content": [
            input_audio(WAV),
            {"type": "text", "text": "and then"},
            audio_url(FLAC),
            {"type": "text", "text": "?"},
        ],
    },
]


def pcm16(samples: np.ndarray) -> np.ndarray:
    """The waveform a 16-bit file of `samples` holds, as every decoder scales it."""
    return ((np.clip(samples[0], -1, 1 - 2**-15) * 2**15).astype(np.int16) / 2**15).astype(np.float32)


@pytest.fixture(scope="module")
def e4b(tmp_path_factory):
    return make_model_folder("gemma4_e4b", tmp_path_factory.mktemp("e4b") / "gemma4-e4b")


@pytest.fixture(scope="module")
def client(e4b):
    with LiveServer(Settings(model=e4b, served_model_name=[MODEL])) as live:
        yield openai_client(live)


@pytest.fixture(scope="module")
def reference(e4b):
    """transformers' processor on the same chat: its ids and features."""
    for module in ("torch", "torchvision"):  # Gemma 4's processor loads its video processor too
        pytest.importorskip(module, reason="transformers' Gemma 4 processor needs torch, torchvision")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        processor = transformers.AutoProcessor.from_pretrained(str(e4b))
    chat = [
        MESSAGES[0],
        {
            "role": "user",
            "content": [{"type": "audio"} if "text" not in part else part for part in MESSAGES[1]["content"]],
        },
    ]
    text = processor.apply_chat_template(chat, add_generation_prompt=True)
    return processor(text=text, audio=[pcm16(WAV_SAMPLES), pcm16(FLAC_SAMPLES)], return_tensors="np")


def rendered(client: openai.OpenAI) -> dict:
    return client.post("/chat/completions/render", cast_to=dict, body={"model": MODEL, "messages": MESSAGES})


def test_the_render_is_transformers(client, reference):
    answer = rendered(client)
    ids = reference["input_ids"][0].tolist()
    assert answer["token_ids"] == ids
    # each placeholder is one audio's run of <|audio|>, the model's embeddings
    audio_token = 258881
    runs = answer["features"]["mm_placeholders"]["audio"]
    assert len(runs) == 2
    for run, mask in zip(runs, reference["input_features_mask"], strict=True):
        span = ids[run["offset"] : run["offset"] + run["length"]]
        assert set(span) == {audio_token}
        assert ids[run["offset"] - 1] != audio_token and ids[run["offset"] + run["length"]] != audio_token
        assert run["length"] == (int(mask.sum()) + 3) // 4  # the mask through two stride-2 convolutions
    # vLLM's items: each audio's unmasked frames, as transformers computes them, cast to the
    # dtype vLLM serves the float32 folder in at its defaults (bfloat16), to the bit
    for text, features, mask in zip(
        answer["features"]["kwargs_data"]["audio"],
        reference["input_features"],
        reference["input_features_mask"],
        strict=True,
    ):
        item = decode_item(text)
        sent = item["input_features_padded"].data
        assert torch_name(sent) == "bfloat16"
        np.testing.assert_array_equal(sent, cast(features[mask], "bfloat16"))
        assert item["input_features_mask"].data.all() and len(item["input_features_mask"].data) == mask.sum()
    hashes = answer["features"]["mm_hashes"]["audio"]
    assert len(set(hashes)) == 2 and all(len(digest) == 64 for digest in hashes)


def test_the_echo_account(client, reference):
    answer = client.chat.completions.create(model=MODEL, messages=MESSAGES)
    account = json.loads(answer.choices[0].message.content)
    wav, flac = account["media"]
    assert wav["kind"] == flac["kind"] == "audio"
    assert wav["param"] == "messages[1].content[0].input_audio"
    assert flac["param"] == "messages[1].content[2].audio_url"
    assert wav["shape"] == [24000] and flac["shape"] == [36000] and wav["dtype"] == "float32"
    assert wav["metadata"] | {"codec": None} == {
        "sample_rate": 16000,
        "channels": 1,
        "num_samples": 24000,
        "duration": 1.5,
        "codec": None,
        "container": "wav",
        "sampling_rate": 16000,
    }
    counts = [(int(mask.sum()) + 3) // 4 for mask in reference["input_features_mask"]]
    assert [item["processed"]["num_tokens"] for item in (wav, flac)] == counts
    assert [p["modality"] for p in account["prompt"]["placeholders"]] == ["audio", "audio"]
    assert account["prompt"]["tokens"] == len(reference["input_ids"][0]) == answer.usage.prompt_tokens


def test_audio_is_refused_by_a_gemma4_without_an_audio_tower(tmp_path):
    folder = make_model_folder("gemma4", tmp_path / "gemma4-31b")
    with LiveServer(Settings(model=folder, served_model_name=["g31"])) as live:
        with pytest.raises(openai.BadRequestError) as refused:
            openai_client(live).chat.completions.create(model="g31", messages=MESSAGES)
    error = refused.value.body
    assert error["param"] == "messages[1].content[0].input_audio"
    assert error["message"] == (
        "Audio input was provided but the model 'g31' does not have an audio tower. Audio inference is "
        "only supported for Gemma4 models that include an audio_config (i.e., models that include an "
        "audio_config)."
    )


def test_audio_is_refused_by_another_family(tmp_path):
    folder = make_model_folder("qwen2_vl", tmp_path / "qwen2-vl")
    with LiveServer(Settings(model=folder, served_model_name=["qwen"])) as live:
        with pytest.raises(openai.BadRequestError) as refused:
            openai_client(live).chat.completions.create(model="qwen", messages=MESSAGES)
    error = refused.value.body
    assert error["param"] == "messages[1].content[0].input_audio"
    assert "qwen2_vl" in error["message"] and "(audio_url or input_audio parts)" in error["message"]


@pytest.mark.parametrize(
    ("part", "param", "says"),
    [
        ({"type": "input_audio", "input_audio": {"format": "wav"}}, "input_audio", "'data' string"),
        ({"type": "input_audio", "input_audio": {"data": "aGVsbG8=", "rate": 1}}, "input_audio", "'rate'"),
        (input_audio(b"not audio at all, just text " * 20), "input_audio", "audio"),
        ({"type": "audio_url", "audio_url": {"url": "data:audio/wav;base64,!!!"}}, "audio_url", "base64"),
        (
            {"type": "audio_url", "audio_url": {"url": "data:audio/wav;base64,AAAA", "fps": 2}},
            "audio_url",
            "'fps'",
        ),
    ],
    ids=["no data", "unknown key", "not audio", "bad base64", "video key"],
)
def test_bad_audio_is_a_400_naming_the_part(client, part, param, says):
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": [part]}])
    error = refused.value.body
    assert error["param"] == f"messages[0].content[0].{param}"
    assert says in error["message"]
    assert client.models.list().data  # the server is fine after it
