"""How bench spreads its load: the file server's backlog, the shares of a run dealt out to
client processes, and runs sent from several processes against a live mmprep."""

from __future__ import annotations

import json
import select
import socket
import time

import pytest

from mmprep.bench.fileserver import FileServer
from mmprep.bench.load import LoadPlan
from mmprep.bench.synthetic import write_clip
from tests.support.cli import bench
from tests.support.servers import LiveServer


def connected(sockets: list[socket.socket], within: float) -> int:
    """How many of the non-blocking connects finished their handshake within `within` s."""
    pending, done = set(sockets), 0
    deadline = time.monotonic() + within
    while pending and time.monotonic() < deadline:
        _, writable, _ = select.select([], list(pending), [], max(0.0, deadline - time.monotonic()))
        for sock in writable:
            pending.discard(sock)
            done += sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
    return done


def test_the_file_server_queues_as_many_connections_as_bench_has_requests_in_flight():
    """The target opens a connection per fetch, so at concurrency C up to C arrive at once.
    They must all be queued even while none is accepted yet: with Python's default backlog
    of 5, the rest had their SYN dropped and waited a second for its retry, as fetch time."""
    concurrency = 64
    server = FileServer(connections=concurrency)  # not started: nothing accepts
    host, port = server.url.removeprefix("http://").split(":")
    sockets = [socket.socket() for _ in range(concurrency)]
    try:
        for sock in sockets:
            sock.setblocking(False)
            sock.connect_ex((host, int(port)))
        assert connected(sockets, within=3.0) == concurrency
    finally:
        for sock in sockets:
            sock.close()
        server.close()


def test_a_closed_loop_run_is_dealt_out_whole():
    plan = LoadPlan(concurrency=5, request_rate=None, limit=11, duration=None)
    shares = plan.split(2)
    assert [share.concurrency for share in shares] == [3, 2]
    indexes = sorted(share.index(k) for share in shares for k in range(share.limit))
    assert indexes == list(range(11))  # every request once, none twice
    assert len(plan.split(8)) == 5  # no process without a slot


def test_poisson_arrivals_split_over_processes_are_the_arrivals_of_one():
    plan = LoadPlan(concurrency=8, request_rate=40.0, limit=200, duration=None, seed=3)
    whole = plan.arrival_times()
    assert len(whole) == 200 and whole == sorted(whole)
    assert 1 / 60 < whole[-1] / 199 < 1 / 25  # the mean gap is 1/rate, give or take the noise of 199 gaps
    dealt = {share.index(k): at for share in plan.split(3) for k, at in enumerate(share.arrivals)}
    assert [dealt[i] for i in range(200)] == whole
    timed = LoadPlan(concurrency=2, request_rate=40.0, limit=None, duration=1.0, seed=3)
    assert max(timed.arrival_times()) < 1.0
    assert sum(share.limit for share in timed.split(2)) == len(timed.arrival_times())


@pytest.fixture(scope="module")
def server():
    with LiveServer(echo_chars_per_token=16) as live:
        yield live


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return write_clip(tmp_path_factory.mktemp("clip") / "pan.mp4", 64, 64, 1.0, 10, "h264", seed=1)


@pytest.mark.slow  # two bench client processes
def test_two_client_processes_send_every_request_once_within_the_concurrency(server, clip, tmp_path):
    status, results = bench(
        server.url,
        tmp_path,
        "--video",
        str(clip),
        "--unique-media",
        "--client-processes",
        "2",
        "--concurrency",
        "4",
        "--requests",
        "10",
        "--warmup",
        "2",
    )
    assert status == 0
    run = results["runs"][0]
    records = run["records"]
    assert sorted(r["number"] for r in records) == list(range(2, 12))  # the warm-up took 0 and 1
    assert [r["start_ms"] for r in records] == sorted(r["start_ms"] for r in records)
    # unique media from both processes: every request's own URL, fetched once, frames intact
    assert results["file_server"]["fetches"] == results["file_server"]["urls_fetched"] == 12
    assert all(json.loads(r["text"])["media"][0]["shape"][0] > 0 for r in records)
    spans = [(r["start_ms"], r["start_ms"] + r["latency_ms"]) for r in records]
    for start, _ in spans:  # one clock in both processes: never more than 4 in flight together
        assert sum(1 for s, e in spans if s <= start < e - 0.5) <= 4
    client = run["metrics"]["client"]
    assert client["processes"] == 2 and client["cpu_s"] > 0 and 0 < client["busiest_process_cpu"]


@pytest.mark.slow  # two bench client processes, paced
def test_a_rate_run_over_two_processes_keeps_the_arrival_schedule(server, clip, tmp_path):
    args = [
        "--video",
        str(clip),
        "--request-rate",
        "30",
        "--requests",
        "12",
        "--concurrency",
        "4",
        "--seed",
        "5",
    ]
    status, results = bench(server.url, tmp_path, *args, "--client-processes", "2")
    assert status == 0
    planned = LoadPlan(4, 30.0, 12, None, seed=5).arrival_times()
    for record in results["runs"][0]["records"]:
        assert record["start_ms"] >= planned[record["number"]] * 1000  # never before its arrival
