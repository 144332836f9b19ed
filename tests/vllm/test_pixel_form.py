"""The pixel form vLLM reads: uint8 patches for a model that normalizes them on the device
(vLLM 0.32/0.33's default for the Qwen-VL families: --mm-device-do-normalize), rescaled and
normalized float32 otherwise; mmprep's default follows vLLM's, and a vLLM upstream whose
form differs is refused at start, before any pixels reach it."""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
import warnings
from dataclasses import replace

import httpx
import numpy as np
import pytest

from mmprep.core.config import Settings
from mmprep.core.lifespan import StartupError
from mmprep.engines.vllm_generate import VllmGenerateEngine
from mmprep.interface.engine import EngineHTTPError
from mmprep.preprocess.vision import normalizes_on_device
from mmprep.processors import load_processor, torch_name
from mmprep.processors.patches import normalized_patches
from mmprep.vllm.serde import decode_item
from tests.support.chat import chat, data_url, image, png_data_url, video
from tests.support.media import MEDIA
from tests.support.model_folder import make_model_folder
from tests.support.servers import LiveServer, ThreadServer, free_port
from tests.support.vllm_cases import build_case
from tests.support.vllm_like import VllmGenerateLike

MODEL = "test-vlm"


def frames(count: int, height: int, width: int) -> np.ndarray:
    return np.random.default_rng(count).integers(0, 256, (count, height, width, 3), dtype=np.uint8)


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen2_5_vl", "qwen3_vl"])
def test_raw_patches_are_the_pixels_whose_normalizing_gives_transformers_values(family):
    """The uint8 patches hold the very pixels the float ones are computed from: normalizing
    them (what vLLM's first layer does on the device) gives the normalized patches, bit for bit."""
    processor = load_processor(family)
    raw = processor.with_raw_pixels()
    clip, picture = frames(4, 90, 160), frames(1, 70, 100)[0]
    for made, normal in (
        (raw.process_video(clip), processor.process_video(clip)),
        (raw.process_image(picture), processor.process_image(picture)),
    ):
        (key,) = [name for name in made.tensors if name.startswith("pixel_values")]
        pixels, expected = made.tensors[key], normal.tensors[key]
        assert pixels.dtype == np.uint8 and pixels.shape == expected.shape
        assert made.num_tokens == normal.num_tokens
        config = processor.video_config if key == "pixel_values_videos" else processor.image_config
        np.testing.assert_array_equal(normalized_patches(pixels, config), expected)


@pytest.mark.skipif(
    not all(importlib.util.find_spec(name) for name in ("torch", "transformers")),
    reason="needs torch and transformers (the oracle)",
)
@pytest.mark.parametrize("shape", [(2, 336, 336), (4, 90, 160)], ids=["no resize", "resized"])
def test_raw_patches_are_transformers_with_rescale_and_normalize_off(shape):
    """As vLLM's renderer calls transformers' processor with mm_device_do_normalize on: the
    same uint8 values where nothing is resized, and where the resize runs, as close as the
    float form is (the resize is Pillow's, transformers' torchvision's: test_processors_live)."""
    import torch
    from transformers import Qwen2VLVideoProcessor

    clip = frames(*shape)
    options = {"do_rescale": False, "do_normalize": False, "return_tensors": "pt"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = Qwen2VLVideoProcessor()(videos=[torch.from_numpy(clip).permute(0, 3, 1, 2)], **options)
    theirs = theirs["pixel_values_videos"].numpy()
    ours = load_processor("qwen2_vl").with_raw_pixels().process_video(clip).tensors["pixel_values_videos"]
    assert theirs.dtype == ours.dtype == np.uint8 and theirs.shape == ours.shape
    off = np.abs(ours.astype(np.int16) - theirs)
    if shape[1:] == (336, 336):  # a size Qwen2-VL keeps
        assert off.max() == 0
    assert (off <= 1).mean() >= 0.999 and off.max() <= 3


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_model_folder("qwen2_vl", tmp_path_factory.mktemp("models") / "Qwen2-VL-2B-Instruct")


def test_the_default_is_vllms_where_mmprep_speaks_its_wire(folder):
    def settings(**given):
        return Settings(model=folder, **given)

    assert normalizes_on_device(settings(), "qwen2_vl")  # the render route, as vLLM's default
    assert not normalizes_on_device(settings(), "llava")  # a family vLLM does not normalize on the device
    assert not normalizes_on_device(settings(mm_device_do_normalize=False), "qwen2_vl")
    # asked for a model whose vLLM file lacks supports_mm_device_do_normalize (interns1.py),
    # vLLM forces it off: so does mmprep where it speaks vLLM's wire, not for its own workers
    assert not normalizes_on_device(settings(mm_device_do_normalize=True), "internvl")
    assert normalizes_on_device(
        settings(engine="workers", worker_url=["http://127.0.0.1:1"], mm_device_do_normalize=True), "internvl"
    )
    # engines that run transformers' model on the tensors take its normalized form
    workers = settings(engine="workers", worker_url=["http://127.0.0.1:1"])
    assert not normalizes_on_device(workers, "qwen2_vl")
    assert normalizes_on_device(
        settings(engine="workers", worker_url=["http://127.0.0.1:1"], mm_device_do_normalize=True), "qwen2_vl"
    )
    assert not normalizes_on_device(
        Settings(processor="qwen2_vl"), "qwen2_vl"
    )  # --processor alone: transformers'
    with pytest.raises(ValueError, match="--mm-device-do-normalize only apply with --processor or --model"):
        Settings(mm_device_do_normalize=True)


def test_the_flags_are_vllms_names():
    shown = subprocess.run(
        [sys.executable, "-m", "mmprep", "serve", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "--mm-device-do-normalize" in shown and "--no-mm-device-do-normalize" in shown


def rendered_pixels(server, part) -> np.ndarray:
    body = chat(part, {"type": "text", "text": "Describe."}, model="Qwen2-VL-2B-Instruct")
    answer = httpx.post(f"{server.url}/v1/chat/completions/render", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    ((modality, (encoded,)),) = answer.json()["features"]["kwargs_data"].items()
    key = "pixel_values" if modality == "image" else "pixel_values_videos"
    pixels = decode_item(encoded)[key].data
    assert isinstance(pixels, np.ndarray)
    return pixels


@pytest.mark.parametrize("device", [True, False])
def test_the_render_route_sends_the_form_asked_for(folder, device):
    given = {} if device else {"mm_device_do_normalize": False}
    settings = Settings(model=folder, allow_private_networks=True, **given)
    processor = load_processor(folder)
    clip = MEDIA / "224p_6_vp9.webm"
    with LiveServer(settings) as server:
        picture = rendered_pixels(server, image(png_data_url(64, 48)))
        movie = rendered_pixels(server, video(data_url(clip, "video/webm"), num_frames=4))
    # the normalized form in the model's dtype, as vLLM's processor casts it: `auto`, bfloat16
    assert torch_name(picture) == torch_name(movie) == ("uint8" if device else "bfloat16")
    if device:  # the patches of the same pixels, normalized on the device, are the float form
        normalized = normalized_patches(movie, processor.video_config)
        assert normalized.min() < -1.5 and normalized.max() > 1.5  # a picture, not a flat field


def started(engine: VllmGenerateEngine):
    async def go():
        await engine.start()
        await engine.stop()

    asyncio.run(go())


@pytest.mark.parametrize(
    ("upstream_dtype", "raw", "says"),
    [
        (
            "uint8",
            False,
            "start mmprep with --mm-device-do-normalize, or vllm serve with --no-mm-device-do-normalize",
        ),
        (
            "float32",
            True,
            "start mmprep with --no-mm-device-do-normalize, or vllm serve with --mm-device-do-normalize",
        ),
    ],
)
def test_an_upstream_wanting_the_other_form_is_refused_at_start(upstream_dtype, raw, says):
    upstream = VllmGenerateLike(model=MODEL, pixel_dtype=upstream_dtype)
    case = build_case("qwen3_vl_image")
    options = replace(case.options, normalizes_on_device=raw)
    with ThreadServer(upstream.app) as running:
        with pytest.raises(StartupError, match=says.replace(".", r"\.")):
            started(VllmGenerateEngine(running.url, options))
        started(VllmGenerateEngine(running.url, replace(options, normalizes_on_device=not raw)))
    assert upstream.renders == 2


def test_a_chat_reaches_a_default_vllm_as_uint8(folder):
    upstream = VllmGenerateLike(model=MODEL, pixel_dtype="uint8")
    with ThreadServer(upstream.app) as running:
        settings = Settings(
            engine="vllm-generate",
            upstream_url=f"{running.url}/v1",
            upstream_model=MODEL,
            model=folder,
            served_model_name=[MODEL],
            allow_private_networks=True,
        )
        with LiveServer(settings) as server:
            body = chat(video(data_url(MEDIA / "224p_6_vp9.webm", "video/webm"), num_frames=4), model=MODEL)
            answer = httpx.post(
                f"{server.url}/v1/chat/completions", json={**body, "max_tokens": 2}, timeout=60
            )
    assert answer.status_code == 200, answer.text
    (item,) = upstream.received[-1]["items"]["video"]
    assert item["pixel_values_videos"].data.dtype == np.uint8
    assert upstream.renders == 1  # asked once, at start


def test_an_upstream_down_at_start_is_asked_before_the_first_pixels():
    """Not reachable at start: mmprep starts (the upstream may come up later) and asks then."""
    upstream = VllmGenerateLike(model=MODEL, pixel_dtype="float32")
    case = build_case("qwen3_vl_image")
    port = free_port()
    engine = VllmGenerateEngine(
        f"http://127.0.0.1:{port}", replace(case.options, normalizes_on_device=True), connect_timeout=1.0
    )

    async def go() -> EngineHTTPError:
        await engine.start()  # nothing listens yet: not asked
        try:
            with ThreadServer(upstream.app, port=port):  # the upstream, come up at last
                with pytest.raises(EngineHTTPError, match="--no-mm-device-do-normalize") as refused:
                    _ = [output async for output in engine.generate(case.prepared)]
        finally:
            await engine.stop()
        return refused.value

    refused = asyncio.run(go())
    assert refused.status == 502 and refused.code == "upstream_pixel_form"
    assert upstream.renders == 1 and not upstream.received  # no pixels went in the wrong form


def test_a_bfloat16_upstream_takes_normalized_pixels():
    """vLLM's render on a bfloat16 model in --no-mm-device-do-normalize writes its pixels in
    bfloat16 (its processor casts them): read, and known as the normalized form."""
    from mmprep.processors import cast
    from mmprep.vllm.items import FieldElem, batched
    from mmprep.vllm.pixel_form import mismatch, rendered_dtype
    from mmprep.vllm.serde import encode_item

    pixels = FieldElem(cast(np.full((4, 8), 0.5, np.float32), "bfloat16"), batched())
    answer = {"features": {"kwargs_data": {"image": [encode_item({"pixel_values": pixels})]}}}
    assert rendered_dtype(answer) == "bfloat16"
    assert mismatch(False, "bfloat16") is None
    assert "takes normalized pixels (it renders images to bfloat16)" in (mismatch(True, "bfloat16") or "")
