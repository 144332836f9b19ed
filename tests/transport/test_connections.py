"""The server's connection limits (app/mmprep/transport/connections.py), against the real server on
loopback with raw sockets: a client that stops reading, a head that never ends, an idle
connection, too many connections, and requests past the admission limit."""

from __future__ import annotations

import asyncio
import functools
import gc
import json
import os
import socket
import struct
import threading
import time
import weakref
from pathlib import Path

import httpx
import pytest

from mmprep.api.app import create_app
from mmprep.core.config import Settings
from mmprep.engines import EngineOutput
from mmprep.interface.engine import NothingToStart
from mmprep.service import Service
from mmprep.transport.connections import GuardedProtocol
from mmprep.transport.server import build_server
from tests.support.engines import TokenReplayEngine
from tests.support.metrics import metric
from tests.support.servers import AppProcess
from tests.support.waiting import wait_until as wait_for

MODEL = "mmprep-echo"
DEADLINE_S = 10


class Ballast:
    """What a request holds while it streams (its media, in real life): weakly referenced
    by the test to see it freed."""

    def __init__(self):
        self.data = bytearray(32 * 1024**2)


class EndlessEngine(NothingToStart):
    """Streams 4 KiB pieces until it is stopped; records each stop, and keeps a weak
    reference to what each request held."""

    def __init__(self) -> None:
        self.stopped = threading.Event()
        self.held: list[weakref.ref] = []

    async def generate(self, request):
        ballast = Ballast()
        self.held.append(weakref.ref(ballast))
        try:
            while ballast is not None:
                yield EngineOutput(text="x" * 4096)
                await asyncio.sleep(0)
        finally:
            self.stopped.set()


class Served:
    """mmprep as `mmprep serve` runs it (server.build_server), in a thread on a free port."""

    def __init__(self, engine=None, **settings):
        self.settings = Settings(port=0, **settings)
        self.service = Service(self.settings, engine)
        self.server = build_server(create_app(service=self.service), self.settings, log_level="warning")
        self._thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self._thread.start()
        wait_for(lambda: self.server.started, "the server to start")
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self._thread.join(timeout=20)

    def metric(self, name: str, **labels: str) -> float:
        """A value of the service's metrics text (what /metrics serves, read without a
        connection of its own, which would count among those the tests count)."""
        return metric(self.service.metrics.render(), name, **labels)

    def closed(self, reason: str) -> float:
        return self.metric("mmprep_connections_closed_total", reason=reason)


def chat_request(stream: bool = True, content: str = "hi", **fields) -> bytes:
    body = json.dumps(
        {"model": MODEL, "messages": [{"role": "user", "content": content}], "stream": stream, **fields}
    ).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    return head + body


def connect(port: int, receive_buffer: int | None = None) -> socket.socket:
    sock = socket.socket()
    if receive_buffer:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.connect(("127.0.0.1", port))
    sock.settimeout(DEADLINE_S)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sent until it closed; a reset fails the test."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


@pytest.mark.slow  # about 3 s: 32 MiB held per request, a write timeout
def test_a_client_that_stops_reading_is_cut_off_and_its_slot_and_memory_given_back():
    engine = EndlessEngine()
    with Served(engine, max_concurrent_requests=1, write_timeout=0.5, send_buffer_bytes=16 * 1024) as served:
        reader = connect(served.port, receive_buffer=4096)
        reader.sendall(chat_request())  # and never reads a byte
        wait_for(lambda: served.closed("write_timeout") == 1, "the slow reader to be cut off")
        assert_told_the_stream_is_over(reader)
        wait_for(engine.stopped.is_set, "the engine's work to stop")
        wait_for(lambda: served.metric("mmprep_requests_in_flight") == 0, "the slot to be given back")
        # What the request held is freed (the collector run for the cycles a cancelled task leaves).
        wait_for(
            lambda: gc.collect() is not None and engine.held[0]() is None, "the request's memory to be freed"
        )
        # The one slot is free again: the next request is admitted, not refused.
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": True}
        with httpx.stream(
            "POST", f"{served.url}/v1/chat/completions", json=body, timeout=DEADLINE_S
        ) as response:
            assert response.status_code == 200
        assert (
            'mmprep_connections_closed_total{reason="write_timeout"} 1.0'
            in httpx.get(f"{served.url}/metrics").text
        )
        reader.close()


@pytest.mark.slow  # over 1 s by design (twice the write timeout), about 3 s
def test_a_reader_that_keeps_reading_is_not_cut_off():
    """Slower than the server writes, so the send buffer fills and drains again and again
    for longer than the write timeout in all: only a stall as long as it cuts a client off."""
    with Served(write_timeout=0.5, send_buffer_bytes=4096) as served:
        reader = connect(served.port, receive_buffer=16 * 1024)
        reader.sendall(chat_request(content="y" * 100_000))
        start, data = time.monotonic(), b""
        while not data.endswith(b"\r\n0\r\n\r\n"):  # the chunked body's last chunk
            chunk = reader.recv(4096)
            assert chunk, "the server closed the stream"
            data += chunk
            time.sleep(0.002)  # the scenario: a reader slower than the server writes
        assert b"data: [DONE]" in data[-64:]
        assert time.monotonic() - start > 1.0  # longer than the write timeout, twice over
        assert served.closed("write_timeout") == 0
        reader.close()


def assert_told_the_stream_is_over(sock: socket.socket) -> None:
    """The client, reading again, meets a reset at once (not megabytes more and then a
    silent wait on a dead stream)."""
    sock.settimeout(2)
    received = 0
    with pytest.raises(ConnectionResetError):
        while chunk := sock.recv(65536):
            received += len(chunk)
    assert received < 1024**2, f"{received} bytes more came after the cut"


@pytest.mark.slow  # 5 s: a reader at 2 KiB/s for two and a half write timeouts
def test_a_slow_but_steady_reader_is_kept_past_the_write_timeout():
    """2 KiB/s, far slower than the server writes: the send buffer stays full for longer
    than the write timeout, but the client accepts bytes all along, so it is never cut off."""
    with Served(EndlessEngine(), write_timeout=2.0, send_buffer_bytes=16 * 1024) as served:
        # A small receive buffer: its TCP acknowledges what it reads in steps of 2 KiB, a
        # second apart (with loopback's default buffers a step is a 64 KiB segment: docs/deployment.md).
        reader = connect(served.port, receive_buffer=2048)
        reader.sendall(chat_request())
        start, received = time.monotonic(), 0
        while time.monotonic() - start < 5.0:
            chunk = reader.recv(512)
            assert chunk, "the server closed the stream"
            received += len(chunk)
            time.sleep(0.25)  # 512 B per quarter second: 2 KiB/s
        assert served.closed("write_timeout") == 0
        assert 6 * 1024 <= received <= 14 * 1024
        reader.close()


class GatedEngine(NothingToStart):
    """Answers "done" once `gate` is open: the requests it holds stay in flight until then."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.admitted: list[str] = []  # each request's text, in the order the engine got them

    async def generate(self, request):
        self.admitted.append(request.text())
        while not self.gate.is_set():
            await asyncio.sleep(0.01)
        yield EngineOutput(text="done")


def _post(url: str, client: httpx.Client | None = None, tag: str = "") -> httpx.Response:
    body = {"model": MODEL, "messages": [{"role": "user", "content": tag or "hi"}]}
    if client is not None:
        return client.post(f"{url}/v1/chat/completions", json=body)
    return httpx.post(f"{url}/v1/chat/completions", json=body, timeout=DEADLINE_S)


def _queued(served: Served, count: int) -> bool:
    return served.metric("mmprep_requests_queued") == count


def _queue(served: Served, count: int, answers: list) -> list[threading.Thread]:
    """`count` requests sent one after another, each queued before the next is sent."""

    def send(tag: str) -> None:
        answers.append((tag, _post(served.url, tag=tag)))

    threads = []
    for i in range(count):
        thread = threading.Thread(target=send, args=(f"queued {i}",))
        thread.start()
        threads.append(thread)
        wait_for(functools.partial(_queued, served, i + 1), f"request {i} to queue")
    return threads


def test_requests_past_the_admission_limit_wait_and_are_served_in_arrival_order():
    engine = GatedEngine()
    with Served(engine, max_concurrent_requests=1) as served:
        holder = threading.Thread(target=_post, args=(served.url,))
        holder.start()
        wait_for(lambda: served.metric("mmprep_requests_in_flight") == 1, "the first request to be admitted")
        answers: list = []
        threads = _queue(served, 4, answers)
        engine.gate.set()  # each answers at once now, one at a time, in the order admission gives places
        for thread in [holder, *threads]:
            thread.join(DEADLINE_S)
        # the engine's order, not the clients' (a client thread may read its answer late)
        assert engine.admitted == ["hi"] + [f"queued {i}" for i in range(4)]
        assert all(response.status_code == 200 for _, response in answers)
        assert served.metric("mmprep_requests_queued") == 0


def test_past_the_queue_bound_a_request_gets_503_queue_full_naming_it_and_counted():
    engine = GatedEngine()
    with Served(engine, max_concurrent_requests=1, max_queued_requests=1) as served:
        holder = threading.Thread(target=_post, args=(served.url,))
        holder.start()
        wait_for(lambda: served.metric("mmprep_requests_in_flight") == 1, "the first request to be admitted")
        answers: list = []
        threads = _queue(served, 1, answers)
        with httpx.Client(timeout=DEADLINE_S) as client:
            for _ in range(2):  # on one kept-alive connection: a 503 does not close it
                response = _post(served.url, client)
                assert response.status_code == 503
                assert response.headers["retry-after"] == "1"
                error = response.json()["error"]
                assert error["code"] == "queue_full"
                assert "--max-queued-requests 1" in error["message"]
            metrics = client.get(f"{served.url}/metrics").text
        assert 'mmprep_admission_refused_total{reason="queue_full"} 2.0' in metrics
        engine.gate.set()
        for thread in [holder, *threads]:
            thread.join(DEADLINE_S)
        assert answers[0][1].status_code == 200  # the queued one was served


def test_a_request_that_waits_past_the_queue_wait_gets_503_queue_timeout():
    engine = GatedEngine()
    with Served(engine, max_concurrent_requests=1, max_queue_wait=0.3) as served:
        holder = threading.Thread(target=_post, args=(served.url,))
        holder.start()
        wait_for(lambda: served.metric("mmprep_requests_in_flight") == 1, "the first request to be admitted")
        started = time.monotonic()
        response = _post(served.url)
        assert 0.3 <= time.monotonic() - started < 5
        assert response.status_code == 503
        assert response.headers["retry-after"] == "1"
        assert response.json()["error"]["code"] == "queue_timeout"
        assert "--max-queue-wait" in response.json()["error"]["message"]
        assert served.metric("mmprep_admission_refused_total", reason="queue_timeout") == 1
        assert served.metric("mmprep_requests_queued") == 0
        engine.gate.set()
        holder.join(DEADLINE_S)


def test_a_queued_client_that_leaves_leaves_the_queue():
    engine = GatedEngine()
    with Served(engine, max_concurrent_requests=1) as served:
        holder = threading.Thread(target=_post, args=(served.url,))
        holder.start()
        wait_for(lambda: served.metric("mmprep_requests_in_flight") == 1, "the first request to be admitted")
        leaver = connect(served.port)
        leaver.sendall(chat_request(stream=False))
        wait_for(lambda: served.metric("mmprep_requests_queued") == 1, "the request to queue")
        leaver.close()
        wait_for(lambda: served.metric("mmprep_requests_queued") == 0, "the queue to let it go")
        engine.gate.set()
        holder.join(DEADLINE_S)
        assert served.metric("mmprep_requests_in_flight") == 0


def test_with_no_queue_a_request_past_the_limit_is_refused_at_once():
    engine = GatedEngine()
    with Served(engine, max_concurrent_requests=1, max_queued_requests=0) as served:
        holder = threading.Thread(target=_post, args=(served.url,))
        holder.start()
        wait_for(lambda: served.metric("mmprep_requests_in_flight") == 1, "the first request to be admitted")
        response = _post(served.url)
        assert response.status_code == 503
        assert response.json()["error"]["code"] == "queue_full"
        engine.gate.set()
        holder.join(DEADLINE_S)


def _let_go(connection) -> bool:
    return connection.cycle is None and connection.scope is None and connection.headers is None


def test_a_kept_alive_connection_lets_go_of_its_last_request():
    """uvicorn keeps a finished request's scope, cycle and headers (what the app hung on them:
    exit stacks, closures) until the connection's next request; mmprep drops them at the
    response's end, so thousands of idle kept-alive connections hold no request's leftovers."""
    with Served() as served, httpx.Client(timeout=DEADLINE_S) as client:
        for stream in (False, True):
            response = client.post(
                f"{served.url}/v1/chat/completions",
                json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": stream},
            )
            assert response.status_code == 200
            (connection,) = served.server.server_state.connections  # the one kept-alive connection
            wait_for(functools.partial(_let_go, connection), "the finished request to be let go")


def test_connections_past_the_limit_are_refused_with_503_and_closed_cleanly():
    with Served(max_connections=2, header_timeout=0.3) as served:
        idle = [connect(served.port), connect(served.port)]
        wait_for(lambda: served.metric("mmprep_connections_open") == 2, "two connections open")
        third = connect(served.port)
        third.sendall(chat_request(stream=False))
        answer = read_until_closed(third)  # a clean close after the answer, not a reset
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503")
        assert b"retry-after: 1" in head.lower() and b"connection: close" in head.lower()
        assert json.loads(body)["error"]["code"] == "too_many_connections"
        assert served.closed("over_limit") == 1
        silent = connect(served.port)  # past the limit and sending nothing: closed soon, not kept alive
        assert read_until_closed(silent) == b"" and served.closed("idle") == 1
        for sock in idle:
            sock.close()
        wait_for(lambda: served.metric("mmprep_connections_open") == 0, "the connections to close")
        assert (
            httpx.get(f"{served.url}/health", timeout=DEADLINE_S).status_code == 200
        )  # below the limit again


def test_a_request_head_that_never_ends_is_cut_off_with_408():
    with Served(header_timeout=0.3) as served:
        slow = connect(served.port)
        slow.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow")  # and never the rest
        answer = read_until_closed(slow)
        assert answer.startswith(b"HTTP/1.1 408")
        assert json.loads(answer.partition(b"\r\n\r\n")[2])["error"]["code"] == "request_timeout"
        assert served.closed("header_timeout") == 1


def test_a_body_that_stops_arriving_is_cut_off_with_408():
    with Served(header_timeout=0.3) as served:
        slow = connect(served.port)
        slow.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100\r\n\r\n{"
        )  # and never the other 99 bytes
        answer = read_until_closed(slow)
        assert answer.startswith(b"HTTP/1.1 408")
        assert "body stopped arriving" in json.loads(answer.partition(b"\r\n\r\n")[2])["error"]["message"]
        assert served.closed("body_timeout") == 1
        wait_for(lambda: served.metric("mmprep_requests_in_flight") == 0, "the slot to be given back")


def test_a_head_sent_a_byte_at_a_time_is_cut_off_too():
    """uvicorn restarts its idle timer on every byte: the head's own deadline does not."""
    with Served(header_timeout=0.5, keep_alive_timeout=0.2) as served:
        slow = connect(served.port)
        start = time.monotonic()
        with pytest.raises((BrokenPipeError, ConnectionResetError)):
            for byte in b"GET /health HTTP/1.1\r\nX-Drip: " + b"a" * 1000:
                slow.sendall(bytes([byte]))
                time.sleep(0.05)  # the scenario: the head dripped a byte at a time
        assert time.monotonic() - start < DEADLINE_S
        assert served.closed("header_timeout") == 1


def test_pipelined_requests_are_answered_in_order_and_a_pipelined_head_is_timed_from_the_answer_before_it():
    """HTTP/1.1 lets a client send requests before the answers to earlier ones: each is
    answered, in order. A head left incomplete behind them is timed from the last answer's
    end, so a stream longer than the header timeout is never cut by a 408 meant for it."""

    def replayed(word: str) -> bytes:  # a stream of 8 pieces, 0.1 s apart: longer than the header timeout
        return chat_request(replay={"texts": [word], "repeat": 8, "interval": 0.1})

    with Served(TokenReplayEngine(), header_timeout=0.5) as served:
        sock = connect(served.port)
        sock.sendall(replayed("first") + replayed("second") + b"GET /health HTTP/1.1\r\nHo")
        answer = read_until_closed(sock)
        assert answer.count(b"HTTP/1.1 200") == 2
        assert answer.count(b"first") == 8 and answer.count(b"second") == 8
        assert answer.rindex(b"first") < answer.index(b"second") < answer.index(b"HTTP/1.1 408")
        assert served.closed("header_timeout") == 1


def test_a_body_that_ends_after_its_answer_leaves_the_connection_idle_not_timed_as_a_head():
    """An answer sent before its request's body has all arrived (a 404 to a POST): the
    body's last bytes make the connection idle again, closed after the keep-alive timeout,
    not answered 408 as a head that never came."""
    with Served(header_timeout=0.3, keep_alive_timeout=1.0) as served:
        sock = connect(served.port)
        sock.sendall(b"POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n\r\n0123456789")
        sock.settimeout(DEADLINE_S)
        assert sock.recv(65536).startswith(b"HTTP/1.1 404")
        sock.sendall(b"0123456789")
        start = time.monotonic()
        assert read_until_closed(sock) == b""
        assert time.monotonic() - start > 0.9
        assert served.closed("idle") == 1 and served.closed("header_timeout") == 0


def test_a_client_that_leaves_with_a_pipelined_request_queued_stops_the_request_being_answered():
    """The request queued behind one being answered is not the only one told the client
    left: the one being answered (here still waiting on its engine) stops and gives its slot
    back."""
    engine = GatedEngine()  # never opened: the first request waits until told the client left
    with Served(engine) as served:
        sock = connect(served.port)
        sock.sendall(chat_request() + chat_request())
        wait_for(lambda: served.metric("mmprep_requests_in_flight") == 1, "the first request to be admitted")
        sock.close()
        wait_for(lambda: served.metric("mmprep_requests_in_flight") == 0, "the slot to be given back")
        assert len(engine.admitted) == 1  # the queued one never started


def test_a_pipelined_body_that_stalls_is_timed_from_the_answer_before_it_not_cut_into_it():
    """A request queued behind a stream, its body stalled: the stream is answered whole, and
    only then is the stalled body timed (408 after the stream, never inside it)."""
    stream = chat_request(replay={"texts": ["first"], "repeat": 8, "interval": 0.1})  # 0.8 s
    stalled = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"
    with Served(TokenReplayEngine(), header_timeout=0.3) as served:
        sock = connect(served.port)
        sock.sendall(stream + stalled)
        answer = read_until_closed(sock)
        first, _, after = answer.partition(b"data: [DONE]\n\n\r\n0\r\n\r\n")  # the stream's whole end
        assert first.startswith(b"HTTP/1.1 200") and first.count(b"first") == 8
        assert after.startswith(b"HTTP/1.1 408")
        assert served.closed("body_timeout") == 1


def test_a_request_that_cannot_be_parsed_behind_a_stream_gets_its_400_after_the_stream():
    """Bytes that are not HTTP, pipelined behind a stream: the stream is answered whole, then
    the 400, and the connection closes (llhttp reads ahead; uvicorn wrote its 400 into the
    middle of the stream)."""
    stream = chat_request(replay={"texts": ["first"], "repeat": 8, "interval": 0.05})
    with Served(TokenReplayEngine()) as served:
        sock = connect(served.port)
        sock.sendall(stream + b"GARBAGE / HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = read_until_closed(sock)
        first, _, after = answer.partition(b"data: [DONE]\n\n\r\n0\r\n\r\n")
        assert first.startswith(b"HTTP/1.1 200") and first.count(b"first") == 8
        assert after.startswith(b"HTTP/1.1 400")
        assert served.closed("invalid_http_request") == 1


@pytest.mark.parametrize("part", ["url", "headers"])
def test_a_request_head_past_64_kib_is_refused_with_431_and_one_within_it_served(part):
    """A head's size is bounded (llhttp and uvicorn keep any: 200 MiB of headers took 200
    MiB, a 64 MiB URL 5 s of the event loop); a large cookie or token is not refused."""

    def head(size: int) -> bytes:
        if part == "url":
            return b"GET /health?" + b"a" * size + b" HTTP/1.1\r\nHost: x\r\n\r\n"
        return b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"X-Token: %s\r\n\r\n" % (b"t" * size)

    with Served() as served:
        sock = connect(served.port)
        sock.sendall(head(48 * 1024))
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        sock = connect(served.port)
        sock.sendall(head(70 * 1024)[:-4])  # not even its end: what has come is too much
        answer = read_until_closed(sock)
        assert answer.startswith(b"HTTP/1.1 431") and b"request_header_fields_too_large" in answer
        assert served.closed("request_header_fields_too_large") == 1
        # A head begun behind a large body, in the same read, is a small head.
        sock = connect(served.port)
        sock.sendall(chat_request(stream=False, content="w " * 50_000) + head(16)[:10])
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        sock.sendall(head(16)[10:])
        answer = b""
        while b"HTTP/1.1" not in answer:
            answer += sock.recv(65536)
        assert b"HTTP/1.1 200" in answer


def test_a_client_that_reads_none_of_a_finished_answer_is_cut_off_though_idle():
    """An answer written whole into the buffers of a client that reads none of it: the idle
    clock closing the connection does not keep it open for good (a close waits for the
    unsent bytes); it is cut off after the write timeout."""
    big = {"texts": ["x" * 65536], "repeat": 128}  # an 8 MiB answer: more than the socket buffers hold
    with Served(TokenReplayEngine(), keep_alive_timeout=0.3, write_timeout=1.0) as served:
        sock = connect(served.port, receive_buffer=4096)
        sock.sendall(chat_request(stream=False, replay=big))
        wait_for(lambda: served.closed("idle") == 1, "the idle clock to close the connection")
        wait_for(lambda: served.metric("mmprep_connections_open") == 0, "the connection to be cut off")


def test_a_connection_the_client_resets_is_let_go_at_once():
    """Not held by its idle clock until the keep-alive timeout (what uvicorn leaves armed)."""
    with Served(keep_alive_timeout=600) as served:
        sock = connect(served.port)
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        (connection,) = served.server.server_state.connections
        protocol = weakref.ref(connection)
        del connection
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # a reset
        wait_for(lambda: gc.collect() is not None and protocol() is None, "the connection to be let go")


def test_a_connection_handed_to_websockets_leaves_no_clock_behind():
    """With a WebSocket library installed (ray[serve] brings one), uvicorn hands an upgrade
    request's connection to its WebSocket protocol: the protocol it leaves is let go, its
    idle clock not left armed on a transport it no longer owns."""
    pytest.importorskip("websockets")
    upgrade = (
        b"GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    with Served() as served:
        sock = connect(served.port)
        sock.sendall(upgrade)
        assert read_until_closed(sock).startswith(b"HTTP/1.1 403")  # no WebSocket routes here
        sock.close()

        def left() -> list:
            gc.collect()
            return [o for o in gc.get_objects() if isinstance(o, GuardedProtocol) and o.transport is not None]

        wait_for(lambda: not left(), "the HTTP protocol to be let go")


@pytest.mark.slow  # the release comes 2 s after the last request, the idle deadline 4 s
def test_after_a_burst_idle_connections_are_renewed_unseen_by_their_clients():
    """When the server goes idle, each idle connection is moved to a new transport and
    protocol (their objects made together, not among the burst's). The client sees
    nothing: its next request is answered, a head half sent is finished and answered (that
    connection is not idle: not moved), and the idle deadline is the one it had."""
    with Served(keep_alive_timeout=4) as served:
        reused, left_idle, halfway = (connect(served.port) for _ in range(3))
        for sock in (reused, left_idle):
            sock.sendall(chat_request(stream=False))
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        answered = time.monotonic()
        halfway.sendall(b"GET /health HTTP/1.1\r\nHo")

        def protocol(sock: socket.socket):
            address = sock.getsockname()
            # None while a renewal has let the old protocol go and not yet made the new one
            return next(
                (p for p in list(served.server.server_state.connections) if p.client == address), None
            )

        before = {sock: protocol(sock) for sock in (reused, left_idle, halfway)}
        deadline = before[left_idle].timeout_keep_alive_task.when()  # the loop's time: answer + 4 s
        # the renewal goes one connection after another, awaiting each: wait for both idle ones
        idle = (reused, left_idle)
        wait_for(
            lambda: all(protocol(s) not in (None, before[s]) for s in idle),
            "the idle connections to be renewed",
        )
        assert protocol(halfway) is before[halfway]
        # its deadline is the one it had (to the loop's own clock), not renewal + 4 s: 2 s later
        assert abs(protocol(left_idle).timeout_keep_alive_task.when() - deadline) < 0.1
        halfway.sendall(b"st: x\r\n\r\n")
        assert halfway.recv(65536).startswith(b"HTTP/1.1 200")
        reused.sendall(chat_request(stream=False))
        assert reused.recv(65536).startswith(b"HTTP/1.1 200")
        assert read_until_closed(left_idle) == b""
        # and it is kept: closed no sooner than 4 s after its answer (a loaded machine may close
        # it later; that it is not the renewal's deadline is the loop's timer, checked above)
        assert time.monotonic() - answered > 3.9
        assert served.metric("mmprep_connections_open") == 2


@pytest.mark.parametrize("sends_first_request", [False, True])
def test_an_idle_connection_is_closed_after_the_keep_alive_timeout(sends_first_request):
    with Served(keep_alive_timeout=0.3) as served:
        sock = connect(served.port)
        if sends_first_request:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = read_until_closed(sock)
        assert answer.startswith(b"HTTP/1.1 200") if sends_first_request else answer == b""
        assert served.closed("idle") == 1


def test_connection_settings_are_checked():
    with pytest.raises(ValueError, match="write_timeout"):
        Settings(write_timeout=0)
    with pytest.raises(ValueError, match="max_connections"):
        Settings(max_connections=0)


def _children(pid: int) -> list[int]:
    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                children.append(int(entry))
    return children


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1].endswith(f":{port:04X}") and fields[3] == "0A":  # 0A: LISTEN
            inodes.add(fields[9])
    return inodes


def _socket_inodes(pid: int) -> set[str]:
    inodes: set[str] = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def test_processes_serve_one_port_together_and_stop_together():
    server = AppProcess("serve", "--processes", "2").start()
    try:
        server.wait_ready(timeout=60)  # one process answers; the other may still be starting

        def listening_children() -> list[int]:
            listeners = _listening_inodes(server.port)
            return [pid for pid in _children(server.process.pid) if _socket_inodes(pid) & listeners]

        # Each child its own listening socket on the port (SO_REUSEPORT).
        wait_for(lambda: len(listening_children()) == 2, "both processes to listen", timeout=60)
        children = listening_children()
        for _ in range(4):
            with httpx.Client(timeout=DEADLINE_S) as client:  # a new connection each time
                response = client.post(
                    f"{server.url}/v1/chat/completions",
                    json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}]},
                )
                assert response.status_code == 200
    finally:
        assert server.stop() == 0
    assert not any(Path(f"/proc/{pid}").exists() for pid in children)  # joined: none left behind


def test_processes_need_a_fixed_port():
    with pytest.raises(ValueError, match="fixed --port"):
        Settings(processes=2, port=0)
