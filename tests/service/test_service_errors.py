"""Every error case through HTTP: status, OpenAI error shape, the code, and the part named."""

from __future__ import annotations

import base64
import json
import threading
import time

import httpx
import openai
import pytest

from tests.support.chat import MODEL, assert_error, chat, post, video
from tests.support.engines import SlowEngine
from tests.support.media import MEDIA
from tests.support.metrics import metric
from tests.support.servers import LiveServer, free_port
from tests.support.waiting import wait_until


@pytest.fixture(scope="module")
def allowed_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("allowed")
    (folder / "clip.webm").write_bytes((MEDIA / "224p_6_vp9.webm").read_bytes())
    (folder / "sub").mkdir()
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret.webm").write_bytes((MEDIA / "224p_6_vp9.webm").read_bytes())
    (folder / "escape.webm").symlink_to(outside / "secret.webm")
    return folder


@pytest.fixture(scope="module")
def server(allowed_dir):
    with LiveServer(
        allowed_local_media_path=[allowed_dir], max_fetch_bytes=200_000, max_media_parts=3
    ) as live:
        yield live


PART = "messages[0].content[0].video_url"


def in_flight(live: LiveServer) -> float:
    """Requests being worked on, as /metrics tells an operator."""
    return metric(httpx.get(f"{live.url}/metrics").text, "mmprep_requests_in_flight")


# -- the request itself ----------------------------------------------------------------


def test_unknown_model_is_404(server):
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "hi"}])
    assert caught.value.body["code"] == "model_not_found"


def test_more_than_one_choice_is_refused(server):
    assert_error(post(server, {**chat({"type": "text", "text": "hi"}), "n": 2}), 400, "unsupported_n", "n")


def test_an_unknown_part_type_is_named(server):
    body = chat({"type": "text", "text": "hi"}, {"type": "file", "file": {"file_id": "file-abc"}})
    error = assert_error(post(server, body), 400, "unsupported_content_type", "messages[0].content[1].type")
    assert "'file'" in error["message"] and "input_audio" in error["message"]  # and the types it takes


@pytest.mark.parametrize(
    "body, param",
    [
        ({"model": MODEL}, "messages"),
        ({"model": MODEL, "messages": []}, "messages"),
        ({"model": MODEL, "messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, "max_tokens"),
        ({"model": MODEL, "messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
    ],
)
def test_malformed_requests_name_the_field(server, body, param):
    assert_error(post(server, body), 400, "invalid_request", param)


HI = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    "fields, code, param",
    [
        ({"add_generation_prompt": "yes"}, "invalid_request", "add_generation_prompt"),
        (
            {"add_generation_prompt": True, "continue_final_message": True},
            "invalid_request",
            "continue_final_message",
        ),
        ({"documents": [1]}, "invalid_request", "documents"),
        ({"reasoning_effort": "lots"}, "invalid_request", "reasoning_effort"),
        ({"chat_template": 3}, "invalid_request", "chat_template"),
        ({"chat_template_kwargs": {"tools": {"name": "f"}}}, "invalid_request", "chat_template_kwargs.tools"),
        ({"media_io_kwargs": {"video": 3}}, "invalid_sampling", "media_io_kwargs.video"),
        (
            {"mm_processor_kwargs": {"videos_kwargs": []}},
            "invalid_sampling",
            "mm_processor_kwargs.videos_kwargs",
        ),
        (
            {"messages": [*HI, {"role": "assistant", "tool_calls": [{"id": "1", "function": {}}]}]},
            "invalid_request",
            "messages[1].tool_calls[0].type",
        ),
    ],
)
def test_the_template_and_media_fields_are_typed_whatever_the_engine(server, fields, code, param):
    """Typed once at the edge: without --model (the echo engine here) as with it."""
    error = assert_error(post(server, {"model": MODEL, "messages": HI, **fields}), 400, code, param)
    assert error["message"].startswith(f"{param}: ")


def test_a_body_that_is_not_json_is_a_400(server):
    response = httpx.post(
        f"{server.url}/v1/chat/completions",
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    message = assert_error(response, 400, "invalid_request")["message"]
    assert (
        message.startswith("the request body is not valid JSON: Expecting property name")
        and "byte 1" in message
    )


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"", "the request has no body"),
        (b"[1]", "must be a JSON object (a chat request), not a JSON array"),
        (b'"hi"', "not a JSON string"),
        (b'{"model": "mmprep-echo", "messages": [{"role": "user", "content": "caf\xe9"}]}', "not UTF-8"),
        (b'{"model": "mmprep-echo"}', "messages: Field required"),
    ],
    ids=["empty", "array", "string", "latin1", "no-messages"],
)
def test_a_body_that_is_not_a_chat_request_says_what_is_wrong(server, body, says):
    response = httpx.post(
        f"{server.url}/v1/chat/completions", content=body, headers={"content-type": "application/json"}
    )
    assert says in assert_error(response, 400, "invalid_request")["message"]


def test_json_sent_as_a_form_says_to_send_it_as_json(server):
    body = json.dumps(chat({"type": "text", "text": "hi"}))
    response = httpx.post(  # what `curl -d` does
        f"{server.url}/v1/chat/completions",
        content=body,
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    message = assert_error(response, 415, "unsupported_media_type")["message"]
    assert "Content-Type: application/json" in message and "application/x-www-form-urlencoded" in message
    no_header = httpx.post(
        f"{server.url}/v1/chat/completions", content=body
    )  # no Content-Type at all: read as JSON
    assert no_header.status_code == 200


def test_too_many_media_parts(server):
    url = "data:video/webm;base64,AAAA"
    assert_error(post(server, chat(*[video(url)] * 4)), 400, "too_many_media_parts", "messages")


# -- media URLs ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "content_type", "data", "says"),
    [
        (
            "video",
            "text/html",
            b"<!DOCTYPE html><html><body>Not found</body></html>",
            "this is an HTML page, not a video",
        ),
        ("video", "text/plain", b"hello, this is not a video\n" * 20, "this is plain text, not a video"),
        (
            "image",
            "text/html",
            b"<html><head></head><body>login</body></html>",
            "this is an HTML page, not an image",
        ),
        (
            "image",
            "video/webm",
            (MEDIA / "224p_6_vp9.webm").read_bytes(),
            "not an image: send it as a video_url part",
        ),
    ],
    ids=["html-video", "text-video", "html-image", "webm-image"],
)
def test_media_that_is_something_else_says_what_it_is(server, kind, content_type, data, says):
    url = f"data:{content_type};base64,{base64.b64encode(data).decode()}"
    part = video(url) if kind == "video" else {"type": "image_url", "image_url": {"url": url}}
    message = assert_error(post(server, chat(part)), 400, "corrupt_media")["message"]
    assert says in message and f"sent as {content_type}" in message
    assert "BytesIO" not in message and "<none>" not in message


@pytest.mark.parametrize(
    "url", ["ftp://example.com/a.mp4", "gopher://x", "just-a-path.mp4", "http:///nohost.mp4"]
)
def test_unsupported_or_malformed_urls(server, url):
    assert_error(post(server, chat(video(url))), 400, "invalid_media_url", PART)


def test_an_unreachable_server(server):
    error = assert_error(
        post(server, chat(video(f"http://127.0.0.1:{free_port()}/a.mp4"))), 400, "media_fetch_failed", PART
    )
    assert "127.0.0.1" in error["message"]


def test_a_missing_remote_file(server, media_server):
    error = assert_error(
        post(server, chat(video(f"{media_server.url}/status/404"))), 400, "media_fetch_failed", PART
    )
    assert "404" in error["message"]


def test_redirects_within_the_limit_are_followed(server, media_server):
    response = post(server, chat(video(f"{media_server.url}/redirect/3/224p_6_vp9.webm")))
    assert response.status_code == 200


def test_too_many_redirects(server, media_server):
    response = post(server, chat(video(f"{media_server.url}/redirect/9/224p_6_vp9.webm")))
    assert "redirects" in assert_error(response, 400, "media_fetch_failed", PART)["message"]


@pytest.mark.parametrize("route", ["zeros", "zeros-undeclared"])
def test_a_download_over_the_cap_is_refused(server, media_server, route):
    # 300 KB against a 200 KB cap, with and without a Content-Length to go by.
    assert_error(
        post(server, chat(video(f"{media_server.url}/{route}/300000"))), 400, "media_too_large", PART
    )


def test_a_data_url_over_the_cap(server):
    url = "data:video/mp4;base64," + base64.b64encode(b"\0" * 300_000).decode()
    assert_error(post(server, chat(video(url))), 400, "media_too_large", PART)


@pytest.mark.parametrize("url", ["data:video/mp4;base64,@@@@", "data:video/mp4;base64"])
def test_a_broken_data_url(server, url):
    assert_error(post(server, chat(video(url))), 400, "invalid_media_url", PART)


def test_undecodable_media(server):
    url = "data:video/mp4;base64," + base64.b64encode(b"this is no video" * 100).decode()
    assert_error(post(server, chat(video(url))), 400, "corrupt_media", PART)


def test_audio_only_media(server):
    url = "data:audio/webm;base64," + base64.b64encode((MEDIA / "audio_only_opus.webm").read_bytes()).decode()
    assert_error(post(server, chat(video(url))), 400, "no_video_stream", PART)


def test_an_image_that_is_not_an_image(server):
    part = {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64," + base64.b64encode(b"nope").decode()},
    }
    assert_error(post(server, chat(part)), 400, "corrupt_media", "messages[0].content[0].image_url")


def test_decoded_frames_over_the_request_budget(media_server):
    with LiveServer(max_decoded_bytes=224 * 224 * 3 * 3) as live:  # room for 3 frames
        ok = post(live, chat(video(f"{media_server.url}/224p_6_vp9.webm", num_frames=3)))
        too_many = post(live, chat(video(f"{media_server.url}/224p_6_vp9.webm", num_frames=4)))
    assert ok.status_code == 200
    assert "frames" in assert_error(too_many, 400, "media_too_large", PART)["message"]


# -- local files ---------------------------------------------------------------------


def test_a_file_outside_the_allowed_path_is_forbidden(server, tmp_path):
    (tmp_path / "x.webm").write_bytes(b"x")
    assert_error(post(server, chat(video(f"file://{tmp_path}/x.webm"))), 400, "media_forbidden", PART)


def test_dot_dot_cannot_climb_out(server, allowed_dir):
    url = f"file://{allowed_dir}/sub/../../{allowed_dir.name}/../etc/passwd"
    assert_error(post(server, chat(video(url))), 400, "media_forbidden", PART)


def test_a_symlink_cannot_lead_out(server, allowed_dir):
    assert_error(post(server, chat(video(f"file://{allowed_dir}/escape.webm"))), 400, "media_forbidden", PART)


def test_a_missing_allowed_file(server, allowed_dir):
    assert_error(post(server, chat(video(f"file://{allowed_dir}/nope.webm"))), 400, "media_not_found", PART)


def test_file_urls_are_off_by_default(media_server):
    with LiveServer() as live:
        response = post(live, chat(video(f"file://{MEDIA}/224p_6_vp9.webm")))
    assert_error(response, 400, "media_forbidden", PART)


# -- sampling ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sampling, param",
    [
        ({"fps": "fast"}, PART),
        ({"num_frames": 0}, PART),
        ({"num_frames": -2}, PART),
        ({"max_frames": "many"}, PART),
    ],
)
def test_invalid_part_sampling(server, sampling, param):
    assert_error(
        post(server, chat(video("data:video/webm;base64,AAAA", **sampling))), 400, "invalid_sampling", param
    )


def test_fps_and_num_frames_together_in_one_place_are_refused(server):
    body = chat(video("data:video/webm;base64,AAAA"), media_io_kwargs={"video": {"fps": 1, "num_frames": 4}})
    assert_error(post(server, body), 400, "invalid_sampling", PART)


def test_unknown_media_io_kwargs_are_named(server):
    body = chat(video("data:video/webm;base64,AAAA"), media_io_kwargs={"video": {"fsp": 1}})
    error = assert_error(post(server, body), 400, "invalid_sampling", "media_io_kwargs.video")
    assert "fsp" in error["message"]


def test_a_streamed_request_with_bad_media_gets_a_json_400_not_a_stream(server):
    response = post(server, chat(video("data:video/webm;base64,AAAA"), stream=True))
    assert response.headers["content-type"].startswith("application/json")
    assert_error(response, 400, "corrupt_media", PART)


# -- time and load ------------------------------------------------------------------


def test_the_deadline_stops_a_slow_fetch(media_server):
    with LiveServer(decode_timeout=1.0) as live:
        started = time.monotonic()
        response = post(live, chat(video(f"{media_server.url}/drip/224p_6_vp9.webm")))
        assert time.monotonic() - started < 5
    assert_error(response, 400, "decode_timeout", PART)


def test_too_much_work_in_flight_without_a_queue_gets_503_with_retry_after(media_server):
    with LiveServer(max_concurrent_requests=1, max_queued_requests=0) as live:
        slow = threading.Thread(
            target=post, args=(live, chat(video(f"{media_server.url}/slow/2/224p_6_vp9.webm")))
        )
        slow.start()
        wait_until(lambda: in_flight(live) == 1, "the slow request to take the one place")
        response = post(live, chat({"type": "text", "text": "hi"}))
        slow.join()
        after = post(live, chat({"type": "text", "text": "hi"}))
    assert_error(response, 503, "queue_full")
    assert response.headers["retry-after"] == "1"
    assert after.status_code == 200


def test_a_client_that_disconnects_stops_its_work(media_server):
    with LiveServer() as live:
        with pytest.raises(httpx.ReadTimeout):
            post(live, chat(video(f"{media_server.url}/drip/224p_6_vp9.webm")), timeout=0.5)
        wait_until(lambda: in_flight(live) == 0, "the request's place to be given back", timeout=5)
        metrics = httpx.get(f"{live.url}/metrics").text
    assert "mmprep_requests_in_flight 0.0" in metrics
    assert 'mmprep_requests_total{status="499"} 1.0' in metrics


def test_a_client_that_disconnects_mid_stream_stops_generation():
    engine = SlowEngine()
    with LiveServer(engine=engine) as live:
        body = {"model": MODEL, "messages": [{"role": "user", "content": "go"}], "stream": True}
        with httpx.stream("POST", f"{live.url}/v1/chat/completions", json=body, timeout=30) as response:
            lines = response.iter_lines()
            assert next(lines).startswith("data: ")
        assert engine.stopped_early.wait(timeout=5)
        wait_until(lambda: in_flight(live) == 0, "the request's place to be given back", timeout=5)


def test_a_request_body_over_the_limit_is_413(caplog):
    caplog.set_level("INFO", logger="mmprep")
    with LiveServer(max_request_bytes=10_000) as live:
        big = chat({"type": "text", "text": "x" * 20_000})
        declared = post(live, big)
        chunked = httpx.post(
            f"{live.url}/v1/chat/completions",
            content=iter(
                [
                    b'{"model": "mmprep-echo", "messages": [{"role": "user", "content": "',
                    b"x" * 20_000,
                    b'"}]}',
                ]
            ),
            headers={"content-type": "application/json"},
        )
        small = post(live, chat({"type": "text", "text": "hi"}))
        metrics = httpx.get(f"{live.url}/metrics").text
    assert_error(declared, 413, "request_too_large")
    assert_error(chunked, 413, "request_too_large")
    assert small.status_code == 200
    assert 'mmprep_requests_total{status="413"} 2.0' in metrics
    assert 'mmprep_errors_total{code="request_too_large"} 2.0' in metrics
    refusals = [
        r
        for r in caplog.records
        if r.getMessage() == "refused" and getattr(r, "code", None) == "request_too_large"
    ]
    assert len(refusals) == 2


def test_a_huge_frame_size_is_refused_before_decoding(media_server):
    with LiveServer(max_source_pixels=200 * 200) as live:  # the 224x224 fixture is over
        response = post(live, chat(video(f"{media_server.url}/224p_6_vp9.webm")))
    assert "224x224" in assert_error(response, 400, "media_too_large", PART)["message"]


@pytest.fixture(scope="module")
def long_decode(tmp_path_factory):
    """A 1 h 51 min clip whose last frame costs decoding all 200,000 before it, and how
    long that takes here, in process."""
    from mmprep.decoders import decode_video
    from tests.data.media.make_fixtures import write_long_single_keyframe_clip

    clip = write_long_single_keyframe_clip(tmp_path_factory.mktemp("long") / "long.webm", frames=200_000)
    started = time.monotonic()
    decode_video(clip, num_frames=2)
    return clip, time.monotonic() - started


@pytest.mark.slow  # a 200,000-frame clip, made and decoded whole once (long_decode)
def test_a_client_that_disconnects_stops_its_decode(long_decode):
    clip, full_decode = long_decode
    with LiveServer(allowed_local_media_path=[clip.parent]) as live:
        with pytest.raises(httpx.ReadTimeout):
            post(live, chat(video(f"file://{clip}", num_frames=2)), timeout=full_decode / 5)
        gone = time.monotonic()
        wait_until(
            lambda: not live.service.preprocessing.pool.active, "the decode to stop", timeout=full_decode
        )
        stopped_after = time.monotonic() - gone
        # the scenario, not a wait for anything: an unstopped decode would deliver its frames meanwhile
        time.sleep(full_decode / 2)
        frames = metric(httpx.get(f"{live.url}/metrics").text, "mmprep_frames_decoded_total", kind="video")
        assert frames == 0
    assert stopped_after < full_decode / 4, (stopped_after, full_decode)


@pytest.mark.slow  # the 200,000-frame clip (long_decode)
def test_the_deadline_stops_a_long_decode(long_decode):
    clip, full_decode = long_decode
    with LiveServer(allowed_local_media_path=[clip.parent], decode_timeout=full_decode / 5) as live:
        started = time.monotonic()
        response = post(live, chat(video(f"file://{clip}", num_frames=2)))
        took = time.monotonic() - started
        # the decode stops at its next packet
        wait_until(
            lambda: not live.service.preprocessing.pool.active, "the decode to stop", timeout=full_decode
        )
        assert time.monotonic() - started < full_decode / 2
    assert_error(response, 400, "decode_timeout", PART)
    assert took < full_decode / 2


def test_a_connection_lost_as_the_stream_starts_frees_its_slot():
    """The client is gone when the response headers go out: nothing of the stream body
    runs, and the request's place among those in flight must still come back."""
    import asyncio
    import json

    from starlette.requests import ClientDisconnect

    from mmprep.api.app import create_app
    from mmprep.core.config import Settings

    app = create_app(Settings())
    body = json.dumps(
        {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    ).encode()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/chat/completions",
        "raw_path": b"/v1/chat/completions",
        "query_string": b"",
        "root_path": "",
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 2),
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
    }

    async def scenario():
        messages = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive():
            return messages.pop(0) if messages else {"type": "http.disconnect"}

        async def send(message):
            if message["type"] == "http.response.start":
                raise OSError("connection reset by peer")

        async with app.router.lifespan_context(app):
            service = app.state.service
            with pytest.raises(ClientDisconnect):  # how Starlette reports the lost connection
                await app(scope, receive, send)
            text = service.metrics.render()  # what /metrics would serve
            return metric(text, "mmprep_requests_in_flight"), metric(
                text, "mmprep_requests_total", status="499"
            )

    in_flight, gone = asyncio.run(scenario())
    assert in_flight == 0
    assert gone == 1
