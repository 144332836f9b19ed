"""mmprep in front of a vLLM-compatible server (`--engine openai`), through HTTP with the
official openai client. The upstream (tests/support/vllm_like.py's VllmLike) reads pre-decoded
video as vLLM does and has no network, so every answer here proves the video went as
mmprep's frames."""

from __future__ import annotations

import base64
import io
import json

import numpy as np
import openai
import pytest
from PIL import Image

from mmprep.core.config import Settings
from mmprep.decoders import decode_image, decode_video
from tests.data.media.make_fixtures import write_painted_clip
from tests.support.chat import ask, assert_error, chat, data_url, image, openai_client, post, video
from tests.support.media import MEDIA, painted
from tests.support.servers import LiveServer, ThreadServer, free_port
from tests.support.vllm_like import TOKENS_PER_FRAME, VllmLike

MODEL = "test-vlm"
MP4 = "bframes_h264.mp4"


@pytest.fixture(scope="module")
def vllm():
    upstream = VllmLike(model=MODEL, max_model_len=4096)
    with ThreadServer(upstream.app) as server:
        upstream.url = server.url
        yield upstream


def mmprep_before(upstream_url: str, model: str = MODEL, **settings) -> LiveServer:
    return LiveServer(
        Settings(
            engine="openai",
            upstream_url=upstream_url,
            upstream_model=model,
            allow_private_networks=True,
            **settings,
        )
    )


@pytest.fixture(scope="module")
def front(vllm):
    with mmprep_before(f"{vllm.url}/v1") as live:
        yield live


@pytest.fixture(scope="module")
def long_clip(tmp_path_factory):
    """60 painted frames at 10 fps: more frames than vLLM keeps unless told."""
    folder = tmp_path_factory.mktemp("upstream")
    return write_painted_clip(
        folder / "long.mp4", "mp4", "libx264", 10, 60, 128, 64, {"crf": "18", "g": "10"}
    )


def assert_same_frames(received: np.ndarray, decoded: np.ndarray) -> None:
    """The frames the upstream decoded are mmprep's, through JPEG at quality 90."""
    assert received.shape == decoded.shape
    assert np.abs(received.astype(np.int16) - decoded).mean() < 3
    assert painted(received) == painted(decoded)


# -- what the upstream gets ---------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_video_goes_as_the_frames_mmprep_sampled(vllm, front, media_server, stream):
    content = [{"type": "text", "text": "What happens?"}, video(f"{media_server.url}/{MP4}", num_frames=5)]
    text, finish, usage = ask(openai_client(front), content, model=MODEL, stream=stream)
    answer = json.loads(text)
    expected = decode_video(MEDIA / MP4, num_frames=5, max_frames=32, max_pixels=1920 * 1080)
    frames, metadata = vllm.received[-1]["videos"][0]
    assert_same_frames(frames, expected.frames)
    hf = expected.to_hf_metadata()
    assert metadata == {
        "total_num_frames": hf["total_num_frames"],
        "fps": hf["fps"],
        "duration": hf["duration"],
        "video_backend": "jpeg_sequence",
        "frames_indices": hf["frames_indices"],
        "do_sample_frames": False,
    }
    assert answer["videos"] == [{"shape": list(expected.frames.shape), "metadata": metadata}]
    assert answer["text"] == "What happens?"
    # Usage and the finish reason are the upstream's: its words plus 10 tokens a frame.
    assert finish == "stop" and usage.prompt_tokens == 2 + TOKENS_PER_FRAME * 5


def test_png_frames_reach_the_upstream_exactly(vllm, media_server):
    """--upstream-frame-format png: each frame is a PNG under data:video/jpeg (vLLM opens every
    frame with Pillow, whatever its format), each image a data:image/png; the upstream decodes
    mmprep's pixels to the bit, with the same metadata as JPEG's."""
    buffer = io.BytesIO()
    Image.effect_mandelbrot((96, 64), (-2, -1, 1, 1), 40).convert("RGB").save(buffer, "PNG")
    png = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()
    with mmprep_before(f"{vllm.url}/v1", upstream_frame_format="png") as live:
        ask(openai_client(live), [video(f"{media_server.url}/{MP4}", num_frames=5), image(png)], model=MODEL)
    expected = decode_video(MEDIA / MP4, num_frames=5, max_frames=32, max_pixels=1920 * 1080)
    received = vllm.received[-1]
    (frames, metadata), pixels = received["videos"][0], received["images"][0]
    assert np.array_equal(frames, expected.frames)
    assert metadata["frames_indices"] == expected.indices.tolist()
    assert np.array_equal(pixels, decode_image(buffer.getvalue()).pixels)
    parts = received["body"]["messages"][0]["content"]
    assert parts[0]["video_url"]["url"].startswith("data:video/jpeg;base64,iVBORw0KGgo")  # PNG's magic
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,iVBORw0KGgo")


def test_the_frame_format_is_an_openai_setting():
    with pytest.raises(ValueError, match="--upstream-frame-format only applies with --engine openai"):
        Settings(upstream_frame_format="png")
    with pytest.raises(ValueError, match="upstream_frame_format"):
        Settings(
            engine="openai", upstream_url="http://v/v1", upstream_model="m", upstream_frame_format="webp"
        )


def test_more_frames_than_vllm_keeps_by_default(vllm, front, long_clip):
    """vLLM keeps the first 32 frames of a data:video/jpeg URL unless num_frames says more."""
    long_video = video(data_url(long_clip, "video/mp4"), num_frames=40, max_frames=40)
    text, _, _ = ask(openai_client(front), [long_video], model=MODEL)
    expected = decode_video(long_clip, num_frames=40, max_frames=40, max_pixels=1920 * 1080)
    frames, metadata = vllm.received[-1]["videos"][0]
    assert len(expected.frames) == 40
    assert_same_frames(frames, expected.frames)
    assert metadata["frames_indices"] == expected.indices.tolist() and metadata["total_num_frames"] == 60
    assert json.loads(text)["videos"][0]["shape"] == [40, 64, 128, 3]


def test_an_image_goes_as_a_data_url(vllm, front):
    buffer = io.BytesIO()
    Image.effect_mandelbrot((96, 64), (-2, -1, 1, 1), 40).convert("RGB").save(buffer, "PNG")
    url = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()
    text, _, _ = ask(openai_client(front), [image(url)], model=MODEL)
    received = vllm.received[-1]["images"][0]
    assert json.loads(text)["images"] == [{"shape": [64, 96, 3]}]
    assert np.abs(received.astype(np.int16) - decode_image(buffer.getvalue()).pixels).mean() < 3


def test_the_same_video_twice_shares_one_set_of_metadata(vllm, front):
    url = data_url(MEDIA / "224p_6_vp9.webm", "video/webm")
    text, _, _ = ask(openai_client(front), [video(url, num_frames=3), video(url, num_frames=3)], model=MODEL)
    assert [video["shape"][0] for video in json.loads(text)["videos"]] == [3, 3]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_sampling_parameters_usage_and_finish_reason_pass_through(vllm, front, stream):
    text, finish, usage = ask(
        openai_client(front),
        "one two three",
        model=MODEL,
        stream=stream,
        max_tokens=2,
        temperature=0.5,
        top_p=0.8,
        seed=3,
        stop=["zz"],
    )
    body = vllm.received[-1]["body"]
    assert {key: body.get(key) for key in ("max_tokens", "temperature", "top_p", "seed", "stop")} == {
        "max_tokens": 2,
        "temperature": 0.5,
        "top_p": 0.8,
        "seed": 3,
        "stop": ["zz"],
    }
    assert body["model"] == MODEL and body["stream"] is stream
    assert finish == "length" and len(text) == 32
    assert (usage.prompt_tokens, usage.completion_tokens) == (3, 2)


# -- errors -------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_an_upstream_refusal_keeps_its_status_and_message(front, stream):
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 5000,
        "stream": stream,
    }
    error = assert_error(post(front, body, timeout=30), 400)  # JSON, even when streamed
    assert "maximum context length is 4096 tokens" in error["message"]


def test_an_unknown_upstream_model_is_a_404(vllm):
    with (
        mmprep_before(f"{vllm.url}/v1", model="no-such-model") as live,
        pytest.raises(openai.NotFoundError) as caught,
    ):
        openai_client(live).chat.completions.create(
            model="no-such-model", messages=[{"role": "user", "content": "hi"}]
        )
    assert "does not exist" in caught.value.body["message"]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_an_unreachable_upstream_is_a_502(stream):
    with mmprep_before(f"http://127.0.0.1:{free_port()}/v1") as live:
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": stream}
        response = post(live, body, timeout=30)
    assert_error(response, 502, "upstream_unreachable")


def test_videos_sampled_differently_cannot_share_one_request(front):
    url = data_url(MEDIA / "224p_6_vp9.webm", "video/webm")
    body = chat(video(url, num_frames=2), video(url, num_frames=3), model=MODEL)
    error = assert_error(post(front, body, timeout=30), 400, "conflicting_video_metadata")
    assert error["param"] == "messages[0].content[1].video_url"


# -- the test upstream is as strict as vLLM ----------------------------------------------------


def _jpeg_b64(pixels: np.ndarray) -> str:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG")
    return base64.b64encode(buffer.getvalue()).decode()


FRAME = _jpeg_b64(np.zeros((8, 8, 3), np.uint8))


@pytest.mark.parametrize(
    "url, kwargs, says",
    [
        (f"http://127.0.0.1:9/{MP4}", {}, "no network"),
        ("data:video/mp4;base64,AAAA", {}, "pre-decoded video only"),
        (f"data:video/jpeg;base64,{FRAME},{FRAME}", {"frames_indices": [0]}, "frames_indices"),
        (f"data:video/jpeg;base64,{FRAME},{FRAME}", {"total_num_frames": 1}, "total_num_frames"),
        (f"data:video/jpeg;base64,{FRAME},QUFBQQ==", {}, "not a base64 image"),
    ],
    ids=["http-url", "undecoded-video", "indices-count", "total-frames", "not-jpeg"],
)
def test_the_test_upstream_refuses_what_vllm_refuses(vllm, url, kwargs, says):
    response = post(vllm, chat(video(url), model=MODEL, media_io_kwargs={"video": kwargs}), timeout=30)
    assert response.status_code == 400
    assert says in response.json()["error"]["message"]
