"""mm_processor_kwargs where mmprep runs the vision processor itself (--model, --processor),
as vLLM 0.33 applies them: the server's --mm-processor-kwargs are the processor's defaults,
a request's own keys win over them (merged as vLLM merges them), and the processor made with
them makes the tensors, the token counts and the prompt's placeholders. vLLM hashes an item
with the request's own keys only, so mmprep does. Sampling keys sample; a key of the model's
patch layout is refused by name. On a real server, through the official openai client."""

from __future__ import annotations

import base64
import io
import json

import httpx
import numpy as np
import openai
import pytest
import xxhash
from PIL import Image

from mmprep.core.config import Settings
from mmprep.interface.prepared import merge_processor_kwargs
from mmprep.processors import load_processor
from mmprep.service import Service, SettingsError
from tests.support.chat import chat, image, openai_client, png_data_url
from tests.support.model_folder import make_model_folder
from tests.support.servers import LiveServer

MODEL = "Qwen2-VL-2B-Instruct"
# 280 x 280 noise: 20 x 20 patches of 14 unbounded (100 tokens after the 2 x 2 merge)
PIXELS = np.random.default_rng(7).integers(0, 256, (280, 280, 3), dtype=np.uint8)


def _png(pixels: np.ndarray) -> str:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


PICTURE = image(_png(PIXELS))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_model_folder("qwen2_vl", tmp_path_factory.mktemp("models") / MODEL)


def account(client, **extra) -> dict:
    answer = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": [PICTURE]}], **extra
    )
    return json.loads(answer.choices[0].message.content)


def processed(said: dict) -> tuple[int, str, int]:
    """(tokens, pixel_values' fingerprint, the prompt's placeholder length) of the one image."""
    item = said["media"][0]["processed"]
    return (
        item["num_tokens"],
        item["tensors"]["pixel_values"]["xxh3"],
        said["prompt"]["placeholders"][0]["length"],
    )


def library(folder, **keys) -> tuple[int, str]:
    """The same image through mmprep.processors with `keys` over the folder's configs (checked
    against transformers to the bit in tests/processors), in the model's dtype as vLLM casts
    it (the folder's float32 config: bfloat16, vLLM's `auto`)."""
    made = load_processor(folder, **keys).in_dtype("bfloat16").process_image(PIXELS)
    return made.num_tokens, xxhash.xxh3_64_hexdigest(made.tensors["pixel_values"].data)


def test_the_servers_keys_make_the_processor_and_a_requests_own_win(folder):
    # transformers' normalized pixels (not vLLM's uint8 patches) in the model's dtype: the
    # fingerprints are the library's
    settings = dict(model=folder, mm_device_do_normalize=False)
    with LiveServer(mm_processor_kwargs={"max_pixels": 50000}, **settings) as server:
        client = openai_client(server)
        # the server's: 280 x 280 scaled to 196 x 196, 14 x 14 patches, 49 tokens (a 400 before)
        tokens, fingerprint, placeholder = processed(account(client))
        assert (tokens, fingerprint) == library(folder, max_pixels=50000) and tokens == placeholder == 49
        # the request's own, flat or in the image's scope, over the server's: 140 x 140, 25 tokens
        for kwargs in ({"max_pixels": 20000}, {"images_kwargs": {"max_pixels": 20000}}):
            tokens, fingerprint, placeholder = processed(
                account(client, extra_body={"mm_processor_kwargs": kwargs})
            )
            assert (tokens, fingerprint) == library(folder, max_pixels=20000) and placeholder == 25
        # another modality's scope changes nothing here; the server's stay
        said = account(client, extra_body={"mm_processor_kwargs": {"videos_kwargs": {"max_pixels": 20000}}})
        assert processed(said)[0] == 49
        # the engine is told what the processor ran with: the request's over the server's
        assert said["mm_processor_kwargs"] == {"max_pixels": 50000, "videos_kwargs": {"max_pixels": 20000}}
    with LiveServer(**settings) as server:  # none at start: the folder's configs
        assert processed(account(openai_client(server)))[:2] == library(folder)
        said = account(openai_client(server), extra_body={"mm_processor_kwargs": {"max_pixels": 50000}})
        assert processed(said)[:2] == library(folder, max_pixels=50000)


def render(server, kwargs: dict | None = None) -> dict:
    body = chat(PICTURE, model=MODEL, **({"mm_processor_kwargs": kwargs} if kwargs is not None else {}))
    answer = httpx.post(f"{server.url}/v1/chat/completions/render", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_vllms_hash_is_of_the_requests_own_keys_not_the_servers(folder):
    """vLLM's renderer hashes an item with the request's mm_processor_kwargs; its
    --mm-processor-kwargs change the processor, not the hash."""
    with LiveServer(model=folder) as server:
        plain = render(server)["features"]["mm_hashes"]["image"]
        asked = render(server, {"max_pixels": 20000})["features"]["mm_hashes"]["image"]
    with LiveServer(model=folder, mm_processor_kwargs={"max_pixels": 50000}) as server:
        defaults = render(server)
        assert defaults["features"]["mm_hashes"]["image"] == plain
        assert defaults["features"]["mm_placeholders"]["image"][0]["length"] == 49
        assert render(server, {"max_pixels": 20000})["features"]["mm_hashes"]["image"] == asked != plain


@pytest.mark.parametrize("device", [True, False], ids=["device normalize", "normalized here"])
def test_patch_layout_keys_are_refused_by_name_and_normalizing_as_vllm(folder, device):
    with LiveServer(Settings(model=folder, mm_device_do_normalize=device)) as server:
        client = openai_client(server)
        for kwargs, where in (
            ({"merge_size": 4}, "mm_processor_kwargs.merge_size"),
            ({"videos_kwargs": {"patch_size": 16}}, "mm_processor_kwargs.videos_kwargs.patch_size"),
        ):
            with pytest.raises(openai.BadRequestError) as refused:
                account(client, extra_body={"mm_processor_kwargs": kwargs})
            assert refused.value.code == "unsupported_processor_option" and where in refused.value.message
        with pytest.raises(openai.BadRequestError) as refused:  # a value the processor cannot take
            account(client, extra_body={"mm_processor_kwargs": {"size": {"shortest_edge": 1}}})
        assert (
            refused.value.code == "invalid_processor_option"
            and "mm_processor_kwargs" in refused.value.message
        )
        # sampling keys sample; do_normalize is vLLM's to ignore where the model normalizes
        account(client, extra_body={"mm_processor_kwargs": {"fps": 2, "do_sample_frames": True}})
        normalized = account(client, extra_body={"mm_processor_kwargs": {"do_normalize": False}})
        dtype = normalized["media"][0]["processed"]["tensors"]["pixel_values"]["dtype"]
        assert dtype == ("uint8" if device else "bfloat16")  # the model's dtype, vLLM's `auto`


def test_a_server_key_that_cannot_be_stops_the_start_naming_it(folder):
    for kwargs, said in (({"merge_size": 4}, "merge_size"), ({"do_center_crop": True}, "do_center_crop")):
        with pytest.raises(SettingsError, match=said) as refused:
            Service(Settings(model=folder, mm_processor_kwargs=kwargs))
        assert refused.value.setting == "mm_processor_kwargs"


def test_without_a_processor_they_reach_the_engine_merged():
    """No processor here (the echo engine gets the frames): the engine's processor runs them."""
    with LiveServer(Settings(mm_processor_kwargs={"max_pixels": 1})) as server:
        body = chat(
            image(png_data_url(64, 48)), model="mmprep-echo", mm_processor_kwargs={"max_pixels": 1000}
        )
        answer = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    assert '"mm_processor_kwargs":{"max_pixels":1000}' in answer.json()["choices"][0]["message"]["content"]


def test_the_merge_is_vllms():
    """vLLM 0.33's MultiModalConfig.merge_mm_processor_kwargs, on its own docstring's example:
    flat keys merged recursively; in a scope, server flat < server scoped < request flat <
    request scoped, for the keys either scope names."""
    server = {
        "size": {"shortest_edge": 256},
        "videos_kwargs": {"size": {"longest_edge": 1024}, "num_frames": 16},
    }
    request = {"size": {"shortest_edge": 512}, "videos_kwargs": {"fps": 4}}
    assert merge_processor_kwargs(server, request) == {
        "size": {"shortest_edge": 512},
        "videos_kwargs": {"size": {"shortest_edge": 512, "longest_edge": 1024}, "num_frames": 16, "fps": 4},
    }
    assert merge_processor_kwargs({}, request) is request
    alone = merge_processor_kwargs(server, None)  # the flat size reaches into the scope that names size
    assert alone == {
        **server,
        "videos_kwargs": {"size": {"shortest_edge": 256, "longest_edge": 1024}, "num_frames": 16},
    }
    assert merge_processor_kwargs({"a": 1, "images_kwargs": {}}, {"images_kwargs": None}) == {"a": 1}
