"""A request written for vLLM gets what vLLM would do with it: the same sampling keys with
the same meanings, mm_processor_kwargs honoured and passed on, every other field carried to
the engine unchanged, and the client's X-Request-Id kept. Through HTTP, with real servers."""

from __future__ import annotations

import json

import httpx
import pytest

from mmprep.core.config import Settings
from tests.support.chat import ask, assert_error, chat, data_url, openai_client, post, video
from tests.support.engines import FieldsEngine
from tests.support.media import MEDIA
from tests.support.servers import AppProcess, LiveServer, ThreadServer
from tests.support.vllm_like import VllmLike

CFR_60 = data_url(MEDIA / "cfr_60fps_h264.mp4", "video/mp4")  # 100 frames
WEBM = data_url(MEDIA / "224p_6_vp9.webm", "video/webm")  # 6 frames, 3 s
PART = "messages[0].content[0].video_url"


@pytest.fixture(scope="module")
def server():
    with LiveServer(max_frames=80, default_max_frames=32) as live:
        yield live


def frames(server, *parts, **body) -> list[int]:
    """The indices of the frames each video of the answer holds (the echo account)."""
    response = post(server, chat(*parts, **body))
    assert response.status_code == 200, response.text
    account = json.loads(response.json()["choices"][0]["message"]["content"])
    return [item["indices"] for item in account["media"]]


# -- sampling keys: the same meanings as in vLLM ------------------------------------------


def test_an_explicit_num_frames_is_honoured_past_the_default_cap(server):
    [picked] = frames(server, video(CFR_60, num_frames=64))
    assert len(picked) == 64  # the default cap (32) applies to fps and the default only


def test_num_frames_above_the_server_limit_is_a_400_naming_it(server):
    error = assert_error(post(server, chat(video(CFR_60, num_frames=81))), 400, "invalid_sampling", PART)
    assert "num_frames=81 is more than the limit of max_frames=80" in error["message"]


def test_num_frames_minus_one_is_every_frame(server):
    assert frames(server, video(WEBM, num_frames=-1)) == [[0, 1, 2, 3, 4, 5]]
    error = assert_error(post(server, chat(video(CFR_60, num_frames=-1))), 400, "invalid_sampling", PART)
    assert "every frame, 100 here, more than the limit of max_frames=80" in error["message"]


@pytest.mark.parametrize("fps", [0, -1, -0.5])
def test_fps_at_or_below_zero_is_not_set(server, fps):
    assert frames(server, video(WEBM, fps=fps)) == frames(server, video(WEBM))  # the server's default


def test_a_typo_in_a_part_is_refused_like_one_in_media_io_kwargs(server):
    in_part = assert_error(post(server, chat(video(WEBM, num_frame=4))), 400, "invalid_sampling", PART)
    in_request = assert_error(
        post(server, chat(video(WEBM), media_io_kwargs={"video": {"num_frame": 4}})), 400, "invalid_sampling"
    )
    assert (
        "unknown key 'num_frame'" in in_part["message"] and "unknown key 'num_frame'" in in_request["message"]
    )


def test_vllm_keys_mmprep_does_not_do_are_named(server):
    error = assert_error(post(server, chat(video(WEBM, max_duration=10))), 400, "invalid_sampling", PART)
    assert "mmprep does not do max_duration" in error["message"]
    refused = assert_error(
        post(server, chat(video(WEBM, frame_recovery=False))), 400, "invalid_sampling", PART
    )
    assert "frame_recovery can only be true" in refused["message"]
    assert frames(server, video(WEBM, frame_recovery=True, num_frames=2)) == [[0, 5]]


# -- mm_processor_kwargs -----------------------------------------------------------------


def test_the_processors_sampling_keys_sample_when_nothing_else_says(server):
    asked = {"mm_processor_kwargs": {"fps": 1, "do_sample_frames": True}}
    assert frames(server, video(WEBM), **asked) == frames(server, video(WEBM, fps=1)) == [[0, 2, 4]]
    told_not_to = {"mm_processor_kwargs": {"fps": 1, "do_sample_frames": False}}
    assert frames(server, video(WEBM), **told_not_to) == frames(server, video(WEBM))


def test_the_processor_and_media_io_kwargs_disagreeing_is_a_400(server):
    body = chat(video(WEBM), media_io_kwargs={"video": {"num_frames": 4}}, mm_processor_kwargs={"fps": 1})
    error = assert_error(post(server, body), 400, "invalid_sampling", "mm_processor_kwargs")
    assert "num_frames=4" in error["message"] and "fps=1" in error["message"]
    agreeing = chat(video(WEBM), media_io_kwargs={"video": {"fps": 1}}, mm_processor_kwargs={"fps": 1})
    assert post(server, agreeing).status_code == 200


# -- every other field reaches the engine -------------------------------------------------

EXTRA = {
    "top_k": 20,
    "min_p": 0.05,
    "repetition_penalty": 1.1,
    "ignore_eos": True,
    "tools": [{"type": "function", "function": {"name": "look", "parameters": {"type": "object"}}}],
    "tool_choice": "auto",
    "response_format": {"type": "json_object"},
    "chat_template_kwargs": {"enable_thinking": False},
}
PROCESSOR = {"fps": 1, "do_sample_frames": True, "max_pixels": 200_704}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_the_echo_account_lists_fields_it_does_not_read(server, stream):
    text, _, _ = ask(
        openai_client(server),
        [video(WEBM)],
        stream=stream,
        extra_body={**EXTRA, "mm_processor_kwargs": PROCESSOR},
    )
    account = json.loads(text)
    assert account["extra"] == EXTRA
    assert account["mm_processor_kwargs"] == PROCESSOR


def test_fields_and_processor_options_reach_a_vllm_upstream_unchanged():
    upstream = VllmLike(model="test-vlm", max_model_len=4096)
    with ThreadServer(upstream.app) as vllm:
        settings = Settings(engine="openai", upstream_url=f"{vllm.url}/v1", upstream_model="test-vlm")
        with LiveServer(settings) as front:
            # logprobs too: the upstream gives them (the echo engine refuses them)
            body = chat(video(WEBM), **EXTRA, logprobs=True, mm_processor_kwargs=PROCESSOR)
            response = post(front, {**body, "model": "test-vlm"})
    assert response.status_code == 200, response.text
    sent = upstream.received[-1]["body"]
    assert {key: sent[key] for key in EXTRA} == EXTRA and sent["logprobs"] is True
    assert sent["mm_processor_kwargs"] == PROCESSOR


def test_an_engine_that_declares_its_fields_refuses_others_by_name():
    with LiveServer(engine=FieldsEngine()) as live:
        ok = post(live, chat({"type": "text", "text": "hi"}, top_k=5))
        refused = post(live, chat({"type": "text", "text": "hi"}, top_k=5, tools=[]))
    assert ok.status_code == 200
    error = assert_error(refused, 400, "unsupported_field", "tools")
    assert "does not take 'tools'" in error["message"] and "'top_k'" in error["message"]


# -- the client's request id ----------------------------------------------------------------


@pytest.mark.slow  # a `mmprep serve` process
def test_the_clients_x_request_id_is_kept():
    body = chat({"type": "text", "text": "hi"})
    with AppProcess("serve", env={"MMPREP_LOG_LEVEL": "info"}) as app:
        response = httpx.post(
            f"{app.url}/v1/chat/completions", json=body, headers={"X-Request-Id": "bench-42"}
        )
        unnamed = httpx.post(f"{app.url}/v1/chat/completions", json=body)
        log = app.log()
    assert response.headers["x-request-id"] == "bench-42"
    assert response.json()["id"] == "chatcmpl-bench-42"
    assert '"request_id": "bench-42"' in log
    assert (
        unnamed.headers["x-request-id"].startswith("chatcmpl-")
        and unnamed.headers["x-request-id"] != "bench-42"
    )
