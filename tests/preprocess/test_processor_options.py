"""A request's mm_processor_kwargs where mmprep runs the vision processor itself (--model,
--processor): sampling keys sample; a key that would change the tensors is a 400 naming it,
never silently left out (vLLM's processor would honour it, and its frontend would then make
other tensors under the same hash)."""

from __future__ import annotations

import httpx
import pytest

from mmprep.core.config import Settings
from mmprep.testing.chat import chat, image, png_data_url
from mmprep.testing.model_folder import make_model_folder
from mmprep.testing.servers import LiveServer

MODEL = "Qwen2-VL-2B-Instruct"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_model_folder("qwen2_vl", tmp_path_factory.mktemp("models") / MODEL)


def render(server, kwargs: dict) -> httpx.Response:
    body = chat(image(png_data_url(64, 48)), model=MODEL, mm_processor_kwargs=kwargs)
    return httpx.post(f"{server.url}/v1/chat/completions/render", json=body, timeout=60)


@pytest.mark.parametrize("device", [True, False], ids=["device normalize", "normalized here"])
def test_keys_that_change_the_tensors_are_refused_by_name(folder, device):
    settings = Settings(model=folder, mm_device_do_normalize=device)
    with LiveServer(settings) as server:
        for kwargs, where in (
            ({"max_pixels": 100000}, "mm_processor_kwargs.max_pixels"),
            ({"images_kwargs": {"min_pixels": 3136}}, "mm_processor_kwargs.images_kwargs.min_pixels"),
            ({"videos_kwargs": {"size": {"shortest_edge": 1, "longest_edge": 2}}}, "videos_kwargs.size"),
        ):
            answer = render(server, kwargs)
            assert answer.status_code == 400, answer.text
            error = answer.json()["error"]
            assert error["code"] == "unsupported_processor_option" and where in error["message"]
            assert "--processor" in error["message"]
        assert render(server, {"fps": 2, "do_sample_frames": True}).status_code == 200  # sampling: honoured
        # vLLM ignores these where the model normalizes on the device; elsewhere they would count
        normalize = render(server, {"do_normalize": True})
        assert normalize.status_code == (200 if device else 400), normalize.text


def test_without_a_processor_they_reach_the_engine_unchanged():
    """No processor here (the echo engine gets the frames): nothing to refuse."""
    with LiveServer(Settings()) as server:
        body = chat(
            image(png_data_url(64, 48)), model="mmprep-echo", mm_processor_kwargs={"max_pixels": 1000}
        )
        answer = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    assert '"mm_processor_kwargs":{"max_pixels":1000}' in answer.json()["choices"][0]["message"]["content"]
