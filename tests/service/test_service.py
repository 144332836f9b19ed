"""The service through HTTP, with the official openai client against a real uvicorn
server on loopback, and media from a real HTTP server, data URLs and file:// URLs."""

from __future__ import annotations

import base64
import io
import json

import httpx
import openai
import pytest
import xxhash
from PIL import Image

from mmprep.decoders import decode_image, decode_video
from tests.support.chat import MODEL, ask, chat, data_url, image, openai_client, post, video
from tests.support.media import MEDIA
from tests.support.servers import LiveServer

WEBM = "224p_6_vp9.webm"
MP4 = "bframes_h264.mp4"
WEBM_URL = data_url(MEDIA / WEBM, "video/webm")


@pytest.fixture(scope="module")
def allowed_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("allowed")
    (folder / "clip.mp4").write_bytes((MEDIA / MP4).read_bytes())
    return folder


@pytest.fixture(scope="module")
def server(allowed_dir):
    with LiveServer(allowed_local_media_path=[allowed_dir], echo_chars_per_token=8) as live:
        yield live


@pytest.fixture(scope="module")
def client(server):
    return openai_client(server)


def ask_echo(client, *parts, stream=False, **kwargs):
    """Send one user message; return (account, finish_reason, usage) from the echo engine."""
    content = [{"type": "text", "text": "What happens here?"}, *parts]
    text, finish, usage = ask(client, content, stream=stream, **kwargs)
    return json.loads(text), finish, usage


def expected_video(name: str, **sampling) -> dict:
    options = {"fps": 2.0, "max_frames": 32} if not sampling else {"max_frames": 32, **sampling}
    video = decode_video(MEDIA / name, max_pixels=1920 * 1080, **options)
    return {
        "shape": list(video.frames.shape),
        "timestamps": [round(float(t), 6) for t in video.timestamps],
        "indices": video.indices.tolist(),
        "xxh3": xxhash.xxh3_64_hexdigest(video.frames.data),
        "metadata": video.metadata.to_dict(),
    }


def assert_video_account(item: dict, name: str, **sampling) -> None:
    assert item["kind"] == "video"
    assert {
        key: item[key] for key in ("shape", "timestamps", "indices", "xxh3", "metadata")
    } == expected_video(name, **sampling)


# -- the four ways in, streamed and not -------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_webm_by_data_url(client, stream):
    account, finish, _ = ask_echo(client, video(WEBM_URL), stream=stream)
    assert finish == "stop"
    assert account["text"] == "What happens here?\n<video_0>"
    assert_video_account(account["media"][0], WEBM)
    assert account["media"][0]["param"] == "messages[0].content[1].video_url"


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_mp4_by_http_url(client, media_server, stream):
    account, _, _ = ask_echo(client, video(f"{media_server.url}/{MP4}"), stream=stream)
    assert_video_account(account["media"][0], MP4)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_image_by_data_url(client, stream):
    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), (200, 30, 30)).save(buffer, "PNG")
    url = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()
    account, _, _ = ask_echo(client, image(url), stream=stream)
    item = account["media"][0]
    pixels = decode_image(buffer.getvalue()).pixels
    assert item["kind"] == "image" and item["shape"] == [48, 64, 3]
    assert item["xxh3"] == xxhash.xxh3_64_hexdigest(pixels.data)
    assert item["metadata"]["format"] == "PNG"


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_file_url_under_the_allowed_path(client, allowed_dir, stream):
    account, _, _ = ask_echo(client, video(f"file://{allowed_dir}/clip.mp4"), stream=stream)
    assert_video_account(account["media"][0], MP4)


# -- sampling: server defaults, request-level and part-level -----------------------------


def test_request_level_sampling_applies_to_every_video(client):
    account, _, _ = ask_echo(
        client, video(WEBM_URL), extra_body={"media_io_kwargs": {"video": {"num_frames": 2}}}
    )
    assert_video_account(account["media"][0], WEBM, num_frames=2)
    assert account["media"][0]["timestamps"] == [0.0, 2.5]


def test_part_level_sampling_wins_and_replaces_the_other_kind(client):
    account, _, _ = ask_echo(
        client,
        video(WEBM_URL, fps=1.0),
        video(WEBM_URL),
        extra_body={"media_io_kwargs": {"video": {"num_frames": 2}}},
    )
    first, second = account["media"]
    assert first["timestamps"] == [0.0, 1.0, 2.0]  # fps=1 replaced the request's num_frames
    assert second["timestamps"] == [0.0, 2.5]  # the request's num_frames


def test_keyframe_seek_mode_per_request_and_per_part(client):
    account, _, _ = ask_echo(
        client,
        video(data_url(MEDIA / MP4, "video/mp4")),
        video(data_url(MEDIA / MP4, "video/mp4"), seek_mode="exact"),
        extra_body={"media_io_kwargs": {"video": {"num_frames": 4, "seek_mode": "keyframe"}}},
    )
    keyframe, exact = account["media"]
    assert keyframe["timestamps"] == [0.0, 0.5, 1.5]  # keyframes every 0.5 s, nearest each target
    assert exact["timestamps"] == expected_video("bframes_h264.mp4", num_frames=4)["timestamps"]


def test_no_request_can_raise_the_server_frame_limit(allowed_dir):
    with LiveServer(max_frames=4, default_max_frames=3) as live:
        client = openai_client(live)
        default, _, _ = ask_echo(client, video(WEBM_URL))
        asked, _, _ = ask_echo(client, video(WEBM_URL, max_frames=100, fps=10.0))
    assert default["media"][0]["shape"][0] == 3
    assert asked["media"][0]["shape"][0] == 4


def test_identical_media_is_fetched_once(client, media_server):
    url = f"{media_server.url}/{MP4}?once"
    account, _, _ = ask_echo(client, video(url), video(url))
    assert media_server.fetches[f"/{MP4}?once"] == 1
    assert account["media"][0]["xxh3"] == account["media"][1]["xxh3"]
    assert [m["param"] for m in account["media"]] == [
        "messages[0].content[1].video_url",
        "messages[0].content[2].video_url",
    ]


# -- generation controls ---------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_max_tokens_cuts_the_answer(client, stream):
    messages = [{"role": "user", "content": "hello"}]
    if stream:
        chunks = list(
            client.chat.completions.create(model=MODEL, messages=messages, max_tokens=3, stream=True)
        )
        pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
        assert len(pieces) == 3 and all(len(p) == 8 for p in pieces)
        assert chunks[-1].choices[0].finish_reason == "length"
    else:
        response = client.chat.completions.create(model=MODEL, messages=messages, max_completion_tokens=3)
        assert response.choices[0].finish_reason == "length"
        assert len(response.choices[0].message.content) == 24
        assert response.usage.completion_tokens == 3


def test_stop_sequence_ends_the_answer(client):
    response = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hello"}], stop=['"media"']
    )
    content = response.choices[0].message.content
    assert content.endswith('"text":"hello",') and response.choices[0].finish_reason == "stop"


def test_sampling_parameters_reach_the_engine(client):
    response = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hi"}], temperature=0.2, seed=7, top_p=0.9
    )
    sampling = json.loads(response.choices[0].message.content)["sampling"]
    assert (sampling["temperature"], sampling["seed"], sampling["top_p"]) == (0.2, 7, 0.9)


def test_stream_usage_comes_last_with_no_choices(client):
    chunks = list(
        client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.usage is None for c in chunks[:-1])
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens > 0
    assert len({c.id for c in chunks}) == 1


def test_usage_counts_frames_as_prompt_tokens(client):
    _, _, usage_ = ask_echo(client, video(WEBM_URL))
    # "What happens here?\n<video_0>" is 28 characters: 4 pieces of 8, plus 6 frames.
    assert usage_.prompt_tokens == 4 + 6
    assert usage_.total_tokens == usage_.prompt_tokens + usage_.completion_tokens


def test_raw_sse_ends_with_done(server):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with httpx.stream("POST", f"{server.url}/v1/chat/completions", json=body, timeout=30) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]"


def test_server_timing_splits_fetch_and_decode(media_server):
    body = chat(video(f"{media_server.url}/{MP4}"))
    with LiveServer(decode_cache_bytes=0) as live:  # every request decodes
        responses = [post(live, {**body, "stream": stream}, timeout=30) for stream in (False, True)]
    for response in responses:
        timing = dict(item.strip().split(";dur=") for item in response.headers["server-timing"].split(","))
        assert set(timing) == {"fetch", "decode", "preprocess", "engine"}
        assert float(timing["decode"]) > 0 and float(timing["fetch"]) > 0
        assert float(timing["fetch"]) + float(timing["decode"]) <= float(timing["preprocess"])


# -- the other endpoints -----------------------------------------------------------------


def test_models_lists_the_served_names(client):
    assert [model.id for model in client.models.list()] == [MODEL]


def test_health_and_ready(server):
    assert httpx.get(f"{server.url}/health").json() == {"status": "ok"}
    assert httpx.get(f"{server.url}/ready").json() == {"status": "ready"}


def test_metrics_count_requests_errors_fetches_and_frames(server, client):
    ask_echo(client, video(WEBM_URL))
    with pytest.raises(openai.BadRequestError):
        ask_echo(client, video("data:video/webm;base64,AAAA"))
    text = httpx.get(f"{server.url}/metrics").text
    for name in (
        'mmprep_requests_total{status="200"}',
        'mmprep_errors_total{code="corrupt_media"}',
        'mmprep_fetch_seconds_bucket{le="0.005",scheme="data"}',
        'mmprep_decode_seconds_count{kind="video"}',
        'mmprep_fetched_bytes_total{scheme="data"}',
        'mmprep_frames_decoded_total{kind="video"}',
        "mmprep_requests_in_flight 0.0",
    ):
        assert name in text, name
