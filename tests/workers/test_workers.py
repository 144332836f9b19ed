"""Remote tensor workers: real `mmprep worker` processes behind a frontend that runs
`--engine workers`, through HTTP with the official openai client. The workers host the
echo engine or the test engines of tests/support/engines.py."""

from __future__ import annotations

import asyncio
import json
import threading

import httpx
import pytest

from mmprep.core.config import Settings
from mmprep.engines import EngineHTTPError
from mmprep.engines.workers import RemoteWorkersEngine
from mmprep.interface.prepared import PreparedRequest, SamplingParams, TokenPrompt
from mmprep.workers.server import create_worker_app
from tests.support.chat import (
    MODEL,
    ask,
    assert_error,
    data_url,
    image,
    openai_client,
    png_data_url,
    post,
    video,
)
from tests.support.engines import NeverReadyEngine
from tests.support.media import MEDIA
from tests.support.servers import REPO, LiveServer, ThreadServer, WorkerProcess, free_port
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow  # four `mmprep worker` processes

WEBM = "224p_6_vp9.webm"


@pytest.fixture(scope="module")
def slow_log(tmp_path_factory):
    return tmp_path_factory.mktemp("slow_engine") / "engine.log"


@pytest.fixture(scope="module")
def workers(slow_log):
    """Two echo workers, a slow one, and one with a small context and a 1 MB request
    limit, started together."""
    processes = {
        "a": WorkerProcess(),
        "b": WorkerProcess(),
        "slow": WorkerProcess(
            "--engine-class",
            "tests.support.engines:SlowEngine",
            env={"SLOW_ENGINE_LOG": str(slow_log)},
            import_from=[REPO],
        ),
        "budget": WorkerProcess(
            "--engine-class",
            "tests.support.engines:FrameBudgetEngine",
            "--max-request-bytes",
            "1000000",
            import_from=[REPO],
        ),
    }
    try:
        for process in processes.values():
            process.start()
        for process in processes.values():
            process.wait_ready()
        yield processes
    finally:
        for process in processes.values():
            process.close()


@pytest.fixture(scope="module")
def echo_server():
    with LiveServer() as live:
        yield live


def frontend(*workers: WorkerProcess, probe_interval: float = 0.2) -> LiveServer:
    settings = Settings(
        engine="workers",
        worker_url=[w.url for w in workers],
        worker_probe_interval=probe_interval,
        allow_private_networks=True,
    )
    return LiveServer(settings)


def video_part(name: str = WEBM, **sampling) -> dict:
    return video(data_url(MEDIA / name, "video/webm"), **sampling)


def image_part(width: int, height: int) -> dict:
    return image(png_data_url(width, height, noise=True))


def stopped_early(log) -> int:
    return log.read_text().count("stopped early") if log.exists() else 0


# -- what goes through ------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_worker_sees_exactly_what_the_embedded_engine_sees(workers, echo_server, stream):
    """Text, messages, sampling, the tensors (xxh3) and every item's metadata cross the
    wire intact: the echo engine in a worker gives the in-process echo engine's answer."""
    content = [
        {"type": "text", "text": "Compare these."},
        video_part(num_frames=4),
        image_part(64, 48),
        video_part(num_frames=4),  # the same video again: one tensor on the wire, two items
    ]
    options = {"temperature": 0.3, "seed": 5, "top_p": 0.9, "max_tokens": 1000}
    with frontend(workers["a"], workers["b"]) as front:
        remote = ask(openai_client(front), content, stream=stream, **options)
    local = ask(openai_client(echo_server), content, stream=stream, **options)
    assert remote[0] == local[0]
    assert [m["shape"] for m in json.loads(remote[0])["media"]] == [
        [4, 224, 224, 3],
        [48, 64, 3],
        [4, 224, 224, 3],
    ]
    assert remote[1:] == local[1:]


def test_max_tokens_reaches_the_worker(workers):
    with frontend(workers["a"]) as front:
        text, finish, usage = ask(openai_client(front), "hello", max_tokens=3)
    assert (len(text), finish, usage.completion_tokens) == (24, "length", 3)


# -- routing and failover ---------------------------------------------------------------


def test_requests_spread_over_both_workers(workers):
    a, b = workers["a"], workers["b"]
    before = a.served(), b.served()
    with frontend(a, b) as front:
        for i in range(6):
            ask(openai_client(front), "hi", stream=i % 2 == 0)
    assert (a.served() - before[0], b.served() - before[1]) == (3, 3)


def test_a_busy_worker_gets_nothing_while_another_has_fewer_in_flight(workers, slow_log):
    slow, a = workers["slow"], workers["a"]
    before = a.served()
    with frontend(slow, a) as front:
        body = {"model": MODEL, "messages": [{"role": "user", "content": "go"}], "stream": True}
        with httpx.stream("POST", f"{front.url}/v1/chat/completions", json=body, timeout=30) as held:
            lines = held.iter_lines()  # kept: a dropped iterator would close the connection
            assert '"word "' in next(line for line in lines if '"content":"word' in line)  # slow is answering
            for _ in range(3):
                ask(openai_client(front), "hi")
    assert a.served() - before == 3


def test_a_stopped_worker_is_skipped_and_used_again_once_back(workers):
    a, b = workers["a"], workers["b"]
    # One frontend probes rarely, so only failed requests can tell it that b stopped; the
    # other probes every 0.2 s, so it also sees b come back.
    with frontend(a, b, probe_interval=60) as unprobed, frontend(a, b) as probed:
        for front in (unprobed, probed):
            for i in range(2):
                ask(openai_client(front), "hi", stream=i == 1)
        b.kill()
        before = a.served()
        for front in (unprobed, probed):
            for i in range(4):  # every later request succeeds, streamed or not
                text, finish, _ = ask(
                    openai_client(front),
                    [{"type": "text", "text": "after"}, video_part(num_frames=2)],
                    stream=i % 2 == 1,
                )
                assert finish == "stop" and json.loads(text)["text"] == "after\n<video_0>"
        assert a.served() - before == 8
        assert not unprobed.service.engine.workers[1].healthy  # the failed connection said so

        b.start().wait_ready()
        wait_until(
            lambda: ask(openai_client(probed), "back?")[1] == "stop" and b.served() > 0, "b to be used again"
        )


def test_a_worker_that_dies_mid_answer_ends_the_stream_with_an_error_event(workers, slow_log):
    slow = workers["slow"]
    with frontend(slow) as front:
        body = {"model": MODEL, "messages": [{"role": "user", "content": "go"}], "stream": True}
        with httpx.stream("POST", f"{front.url}/v1/chat/completions", json=body, timeout=30) as response:
            lines = response.iter_lines()
            events = [next(lines) for _ in range(3)]  # the role, then two words
            assert '"word "' in events[-1]
            slow.kill()
            events += [line for line in lines if line]
    assert events[-1] == "data: [DONE]"
    error = json.loads(events[-2].removeprefix("data: "))["error"]
    assert error["code"] == "worker_failed" and "incomplete" in error["message"]
    slow.start().wait_ready()  # for the tests after this one


def test_a_worker_whose_engine_is_not_ready_gets_no_requests(workers):
    a = workers["a"]
    with ThreadServer(create_worker_app(NeverReadyEngine())) as loading:
        assert httpx.get(f"{loading.url}/health").status_code == 503
        assert_error(httpx.post(f"{loading.url}/generate", content=b"", timeout=10), 503, "not_ready")
        before = a.served()
        with frontend(loading, a) as front:
            for i in range(3):
                assert ask(openai_client(front), "hi", stream=i == 1)[1] == "stop"
    assert a.served() - before == 3


def test_no_reachable_worker_is_a_503_and_one_warning_line(workers, caplog):
    caplog.set_level("INFO", logger="mmprep")
    nowhere = f"http://127.0.0.1:{free_port()}"
    with LiveServer(Settings(engine="workers", worker_url=[nowhere], allow_private_networks=True)) as front:
        assert httpx.get(f"{front.url}/ready").status_code == 503
        for stream in (False, True):
            body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": stream}
            assert_error(post(front, body, timeout=30), 503, "no_worker_available")
    failures = [
        r for r in caplog.records if r.name.startswith("mmprep") and r.levelname in ("WARNING", "ERROR")
    ]
    assert [(r.levelname, r.exc_info) for r in failures] == [
        ("WARNING", None)
    ] * 2  # the deployment's state, not a bug


# -- errors the worker reports ----------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_an_engine_refusal_before_output_keeps_its_status(workers, stream):
    with frontend(workers["budget"]) as front:
        body = {
            "model": MODEL,
            "messages": [{"role": "user", "content": [video_part(num_frames=6)]}],
            "stream": stream,
        }
        error = assert_error(
            post(front, body, timeout=30), 400, "context_length_exceeded"
        )  # JSON, even when streamed
        assert "6 frames" in error["message"] and error["param"] == "messages"
        text, finish, _ = ask(
            openai_client(front), [video_part(num_frames=2)], stream=stream
        )  # within its context
        assert finish == "stop" and json.loads(text)["media"][0]["shape"][0] == 2


def test_a_worker_refuses_logprobs_its_token_engine_does_not_give(workers):
    """The frontend's engine passes logprobs on (gives_logprobs is the workers' to say); the
    echo engine says nothing, so for a token request (a prompt, as --model sends) its worker
    refuses the field by name. A text request without the field still gets its answer."""

    async def ask_worker(request):
        remote = RemoteWorkersEngine([workers["a"].url])
        await remote.start()
        try:
            return [output async for output in remote.generate(request)]
        finally:
            await remote.stop()

    token_request = PreparedRequest(
        "chatcmpl-1",
        MODEL,
        [{"role": "user", "content": "hi"}],
        [],
        SamplingParams(logprobs=True, top_logprobs=2),
        prompt=TokenPrompt((1, 2, 3)),
    )
    with pytest.raises(EngineHTTPError) as refused:
        asyncio.run(ask_worker(token_request))
    assert (refused.value.status, refused.value.code, refused.value.param) == (
        400,
        "unsupported_field",
        "logprobs",
    )
    plain = PreparedRequest(
        "chatcmpl-2", MODEL, [{"role": "user", "content": "hi"}], [], SamplingParams(max_tokens=2)
    )
    assert asyncio.run(ask_worker(plain))[-1].finish_reason == "length"


def test_a_request_over_the_workers_size_limit_is_a_413(workers):
    with frontend(workers["budget"]) as front:
        body = {"model": MODEL, "messages": [{"role": "user", "content": [image_part(800, 600)]}]}
        error = assert_error(post(front, body, timeout=30), 413, "request_too_large")
    assert "1000000" in error["message"]


@pytest.mark.parametrize(
    "body, says",
    [
        (b"", "8-byte header length"),
        (b"\xff" * 8 + b"{}", "header claims"),
        ((2).to_bytes(8, "little") + b"[]", "JSON object"),
        ((4).to_bytes(8, "little") + b"{}  ", "__metadata__"),
    ],
    ids=["empty", "huge-header", "not-an-object", "no-metadata"],
)
def test_a_worker_refuses_a_body_that_is_not_a_tensor_request(workers, body, says):
    response = httpx.post(f"{workers['a'].url}/generate", content=body, timeout=10)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_tensor_request" and says in error["message"]


# -- a client that leaves -----------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_client_that_disconnects_stops_the_work_on_the_worker(workers, slow_log, stream):
    before = stopped_early(slow_log)
    with frontend(workers["slow"]) as front:
        body = {"model": MODEL, "messages": [{"role": "user", "content": "go"}], "stream": stream}
        if stream:
            with httpx.stream("POST", f"{front.url}/v1/chat/completions", json=body, timeout=30) as response:
                assert next(response.iter_lines()).startswith("data: ")
        else:
            with pytest.raises(httpx.ReadTimeout):
                post(front, body, timeout=0.5)
        wait_until(
            lambda: stopped_early(slow_log) > before, "the worker's engine to stop generating", timeout=5
        )
        wait_until(lambda: not front.service.engine.workers[0].in_flight, "the worker to be free", timeout=5)


def test_many_clients_at_once(workers):
    """Concurrent requests over two workers all complete, and none is left in flight."""
    a, b = workers["a"], workers["b"]
    results = []
    with frontend(a, b) as front:
        threads = [
            threading.Thread(
                target=lambda i=i: results.append(
                    ask(openai_client(front), [video_part(num_frames=3)], stream=i % 2)
                )
            )
            for i in range(8)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert all(worker.in_flight == 0 for worker in front.service.engine.workers)
    assert len(results) == 8 and all(finish == "stop" for _, finish, _ in results)
