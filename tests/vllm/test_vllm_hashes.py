"""mm_hashes through mmprep serve --model, as vLLM's frontend would key the same media: an
image file by its bytes (the hashes vLLM 0.33.0 itself computed, tests/data/vllm/goldens.json),
the model id as vLLM's render takes it."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import httpx
import pytest

from mmprep.core.config import Settings
from mmprep.decoders import decode_image
from mmprep.interface.prepared import MediaItem, SourceImage
from mmprep.vllm.hashing import mm_hash
from tests.support.chat import chat, image
from tests.support.model_folder import make_model_folder
from tests.support.servers import LiveServer

DATA = Path(__file__).parents[1] / "data" / "vllm"
GOLDEN_MODEL_ID = "Qwen/qwen2_vl-test"  # the model id the goldens were hashed for (build_case)
FILES = ["rgb.png", "rgba.png", "gray.jpg", "palette_trns.png"]  # the goldens' qwen2_vl_image_files


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_model_folder("qwen2_vl", tmp_path_factory.mktemp("models") / "Qwen2-VL-2B-Instruct")


def data_url(name: str) -> str:
    kind = "png" if name.endswith(".png") else "jpeg"
    return f"data:image/{kind};base64," + base64.b64encode((DATA / "images" / name).read_bytes()).decode()


def rendered_hashes(server, names: list[str]) -> list[str]:
    parts = [image(data_url(name)) for name in names]
    answer = httpx.post(
        f"{server.url}/v1/chat/completions/render",
        json=chat(*parts, model="Qwen2-VL-2B-Instruct"),
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()["features"]["mm_hashes"]["image"]


def test_an_image_file_gets_the_hash_vllm_gives_the_file(folder):
    """vLLM's frontend keys an image it fetched by the file's bytes (and its RGB conversion);
    mmprep, given the same model id, gives the same keys, so the two share vLLM's caches."""
    goldens = json.loads((DATA / "goldens.json").read_text())["cases"]["qwen2_vl_image_files"]
    settings = Settings(model=folder, upstream_model_id=GOLDEN_MODEL_ID)
    with LiveServer(settings) as server:
        assert rendered_hashes(server, FILES) == goldens["mm_hashes"]["image"]


def test_the_model_id_defaults_to_the_folder_as_given(folder):
    """As `vllm launch render FOLDER` keys its hashes: by FOLDER, not the served name."""
    data = (DATA / "images" / "rgb.png").read_bytes()
    with LiveServer(Settings(model=folder, served_model_name=["Qwen2-VL-2B-Instruct"])) as server:
        (rendered,) = rendered_hashes(server, ["rgb.png"])
    item = MediaItem("image", decode_image(data).pixels, {}, "image")
    keyed = MediaItem("image", item.tensor, {}, "image", source=SourceImage(data, False))
    assert rendered == mm_hash(keyed, str(folder))
    assert rendered != mm_hash(item, str(folder))  # not by its pixels


def test_max_pixels_leaves_an_image_the_processor_sizes_as_vllm_keys_it(folder):
    """--max-pixels scales no image a model's processor sizes (docs/sampling.md, "No silent
    shrinking"): the processor gets the whole picture, as vLLM's, and the key is the file's,
    as vLLM's, however small --max-pixels is."""
    data = (DATA / "images" / "rgb.png").read_bytes()
    with LiveServer(Settings(model=folder, max_pixels=32 * 32)) as server:
        (rendered,) = rendered_hashes(server, ["rgb.png"])
    whole = decode_image(data).pixels
    assert whole.shape[0] * whole.shape[1] > 32 * 32
    keyed = MediaItem("image", whole, {}, "image", source=SourceImage(data, False))
    assert rendered == mm_hash(keyed, str(folder))
