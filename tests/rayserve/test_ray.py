"""mmprep on Ray Serve (`--runtime ray`, app/mmprep/rayserve) on a real local cluster of two nodes,
through Serve's HTTP proxy, with the official openai client: the same answers as `mmprep
serve`, bad input still refused as such, and replicas lost mid-run (killed, or their node
removed) never leave a request hanging or answered wrongly."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypedDict

import httpx
import pytest

from tests.support.media import MEDIA

pytest.importorskip(
    "ray", reason="needs the ray extra: pip install -e '.[test,ray]' (.ci/run's 3.13 run has it)"
)

from mmprep.core.config import Settings
from tests.support.chat import (
    ask,
    assert_error,
    chat,
    data_url,
    image,
    openai_client,
    png_data_url,
    post,
    video,
)
from tests.support.raycluster import RayCluster
from tests.support.servers import AppProcess, LiveServer

pytestmark = pytest.mark.slow  # a Ray cluster, and `mmprep serve --runtime ray` processes

ON_HEAD = {"num_cpus": 0, "resources": {"head": 0.01}}  # kept off the node a test removes
SETTINGS = Settings(
    runtime="ray",
    allow_private_networks=True,
    decode_workers=2,
    ray_decode_replicas=2,
    ray_deployment_options={
        "FrontDoor": {"ray_actor_options": ON_HEAD},
        "Engine": {"ray_actor_options": ON_HEAD},
        # one decode replica on each node
        "Decode": {"ray_actor_options": {"num_cpus": 1}, "max_replicas_per_node": 1},
    },
)
CONTENT = [
    {"type": "text", "text": "Compare these."},
    video(data_url(MEDIA / "224p_6_vp9.webm", "video/webm"), num_frames=4),  # a data URL: > 64 KiB
    image(png_data_url(64, 48, noise=True)),
    video(data_url(MEDIA / "224p_6_vp9.webm", "video/webm"), num_frames=4),  # decoded once, two items
]


class Options(TypedDict):
    """The request's sampling fields, beyond its model and messages."""

    temperature: float
    seed: int
    top_p: float
    max_tokens: int


OPTIONS: Options = {"temperature": 0.3, "seed": 5, "top_p": 0.9, "max_tokens": 1000}


@pytest.fixture(scope="module")
def ray_app():
    with RayCluster(nodes=2) as cluster:
        yield cluster.deploy(SETTINGS)


@pytest.fixture(scope="module")
def local():
    with LiveServer() as live:
        yield live


def test_mmprep_serve_runtime_ray_starts_a_local_cluster_and_stops_it_on_sigterm(local):
    """The command as an operator runs it (before the module's cluster starts: one at a time
    on this machine): its own Ray cluster, the proxy on --host/--port, the same answer."""
    serving = AppProcess(
        "serve",
        "--runtime",
        "ray",
        "--allow-private-networks",
        "--decode-workers",
        "1",
        env={"RAY_ADDRESS": "local"},
    ).start()  # a new cluster, whatever else runs here
    try:
        serving.wait_ready(timeout=120)
        assert ask(openai_client(serving), CONTENT) == ask(openai_client(local), CONTENT)
        assert serving.stop() == 0, serving.log()
    finally:
        serving.close()
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{serving.url}/health")


def test_a_layout_the_cluster_cannot_place_is_refused_at_once_naming_what_it_asks():
    """Ray would wait for CPUs that never come (and mmprep with it, requests hanging); the
    command says what it asked for and what the cluster has, and exits."""
    serving = AppProcess(
        "serve", "--runtime", "ray", "--ray-decode-replicas", "64", env={"RAY_ADDRESS": "local"}
    )
    started = time.monotonic()
    try:
        assert serving.start().process.wait(timeout=120) == 2
        assert time.monotonic() - started < 60
        log = serving.log()
        assert (
            "cannot be placed: the replicas ask for 65 CPU (FrontDoor 1 x 1 + Decode 1 x 64) "
            "but the cluster has" in log
        )
    finally:
        serving.close()


STOPS = """
import _thread, signal, sys, threading, time
signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a shell leaves a command it starts with &
from mmprep.rayserve.application import _stopper
stop = _stopper() if sys.argv[1] == "mmprep" else _thread.interrupt_main
threading.Timer(0.2, stop).start()
try:
    time.sleep(5)
    print("still waiting")
except KeyboardInterrupt:
    print("stopped")
"""


def test_the_placement_checks_stop_reaches_a_command_that_ignores_sigint():
    """What the check below stops `serve run` with, without Ray's start in the way: where SIGINT
    is ignored, _thread.interrupt_main() (Ctrl-C's own path, which the check used) does
    nothing, and mmprep's stop signal still interrupts the main thread's wait at once."""
    said = {
        way: subprocess.run([sys.executable, "-c", STOPS, way], capture_output=True, text=True, timeout=60)
        for way in ("interrupt_main", "mmprep")
    }
    assert said["interrupt_main"].stdout.strip() == "still waiting", said["interrupt_main"].stderr
    assert said["mmprep"].stdout.strip() == "stopped", said["mmprep"].stderr


@pytest.mark.parametrize("sigint", ["default", "ignored"], ids=["in the foreground", "in the background"])
def test_rays_own_serve_run_of_a_layout_it_cannot_place_stops_at_once_naming_what_it_asks(sigint):
    """Ray's `serve run` builds the application before it starts Ray, so the check waits for
    Ray to be up, then stops the command, as Ctrl-C would. Also where SIGINT is ignored, as
    for a command a shell starts in the background (`serve run ... &`), where Ctrl-C's own
    path (_thread.interrupt_main) does nothing and the command waited forever."""
    serve_command = Path(sys.executable).with_name("serve")
    disposition = signal.SIG_IGN if sigint == "ignored" else signal.SIG_DFL
    started = time.monotonic()
    # Output to a file and the command in a session of its own: Ray's processes inherit its
    # output, so with pipes a timeout would wait on them for ever, as it once did when Ray's
    # own shutdown hung; on a timeout the whole session is killed.
    with tempfile.TemporaryFile("w+") as stderr:
        command = subprocess.Popen(
            [str(serve_command), "run", "mmprep.rayserve.application:build", "ray_decode_replicas=64"],
            env={**os.environ, "RAY_ADDRESS": "local"},
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, disposition),
        )
        try:
            # a hang is a failure here, not a slow start: Ray starts in 5-10 s
            returncode = command.wait(timeout=240)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(command.pid, signal.SIGKILL)
            command.wait()
        stderr.seek(0)
        said = stderr.read()
    assert returncode != 0 and time.monotonic() - started < 120, said[-2000:]
    assert "mmprep: the replicas ask for 65 CPU (FrontDoor 1 x 1 + Decode 1 x 64) but the cluster has" in (
        said
    ), said[-2000:]


@pytest.mark.parametrize(
    ("settings", "cluster", "says"),
    [
        ({}, {"CPU": 2}, None),  # the defaults fit two cores
        (
            {"ray_decode_replicas": 2},
            {"CPU": 2},
            "ask for 3 CPU (FrontDoor 1 x 1 + Decode 1 x 2) but the cluster has 2",
        ),
        ({"ray_decode_replicas": 2, "ray_max_decode_replicas": 8}, {"CPU": 3}, None),  # autoscaled: its least
        (
            {"ray_deployment_options": {"Engine": {"ray_actor_options": {"num_gpus": 1}}}},
            {"CPU": 8},
            "ask for 1 GPU (Engine 1 x 1) but the cluster has 0",
        ),
        (
            {
                "ray_deployment_options": {"FrontDoor": {"ray_actor_options": {"num_cpus": 0.5}}},
                "ray_decode_replicas": 3,
            },
            {"CPU": 3.5},
            None,
        ),
    ],
)
def test_placement_is_checked_against_the_clusters_resources(settings, cluster, says):
    from mmprep.rayserve.application import PlacementError, check_placement

    if says is None:
        check_placement(Settings(runtime="ray", **settings), cluster)
    else:
        with pytest.raises(PlacementError, match=re.escape(says)):
            check_placement(Settings(runtime="ray", **settings), cluster)


def test_the_settings_check_the_applications_own_deployment_names():
    """--ray-deployment-options' keys, which the settings check, are the deployments' names."""
    from mmprep.core.config import RAY_DEPLOYMENTS
    from mmprep.rayserve.application import DEPLOYMENTS

    assert tuple(DEPLOYMENTS) == RAY_DEPLOYMENTS


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_the_openai_client_gets_the_account_mmprep_serve_gives(ray_app, local, stream):
    on_ray = ask(openai_client(ray_app), CONTENT, stream=stream, **OPTIONS)
    assert on_ray == ask(openai_client(local), CONTENT, stream=stream, **OPTIONS)
    media = json.loads(on_ray[0])["media"]
    assert [item["shape"] for item in media] == [[4, 224, 224, 3], [48, 64, 3], [4, 224, 224, 3]]


def test_the_front_door_serves_the_same_routes(ray_app):
    assert httpx.get(f"{ray_app.url}/v1/models").json()["data"][0]["id"] == "mmprep-echo"
    assert httpx.get(f"{ray_app.url}/ready").status_code == 200
    post(ray_app, chat({"type": "text", "text": "hi"}))
    assert 'mmprep_requests_total{status="200"}' in httpx.get(f"{ray_app.url}/metrics").text


@pytest.mark.parametrize(
    ("body", "status", "code", "param"),
    [
        (
            chat(video(data_url(MEDIA / "unknown_codec.avi", "video/x-msvideo"))),
            400,
            "unsupported_codec",
            "messages[0].content[0].video_url",
        ),
        (chat(video("http://127.0.0.1:9/nothing.mp4"), max_tokens=0), 400, "invalid_request", "max_tokens"),
        (
            chat({"type": "file", "file": {"file_id": "x"}}),
            400,
            "unsupported_content_type",
            "messages[0].content[0].type",
        ),
        (chat({"type": "text", "text": "hi"}, model="nope"), 404, "model_not_found", "model"),
    ],
    ids=["undecodable", "bad-field", "bad-part", "unknown-model"],
)
def test_bad_input_is_refused_as_in_one_process(ray_app, body, status, code, param):
    assert_error(post(ray_app, body), status, code, param)


def test_a_body_that_is_not_json_is_a_400(ray_app):
    response = httpx.post(
        f"{ray_app.url}/v1/chat/completions",
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    assert_error(response, 400, "invalid_request")


# -- faults -----------------------------------------------------------------------------


class Load:
    """Clients sending the same request over and over, until stopped; every answer kept."""

    def __init__(self, server, clients: int = 6):
        self._server, self._stop = server, threading.Event()
        self._pool = ThreadPoolExecutor(clients)
        self._runs = [self._pool.submit(self._client) for _ in range(clients)]

    def _client(self) -> list[httpx.Response]:
        answers = []
        while not self._stop.is_set():
            answers.append(post(self._server, chat(*CONTENT, **OPTIONS), timeout=60))  # a hang fails here
        return answers

    def stop(self) -> list[httpx.Response]:
        self._stop.set()
        answers = [answer for run in self._runs for answer in run.result()]
        self._pool.shutdown()
        return answers


def assert_right_or_unavailable(answers: list[httpx.Response], expected: str) -> None:
    """Each answer is the right one, or a 503 saying a replica is gone."""
    assert answers
    for answer in answers:
        if answer.status_code == 503:
            assert_error(answer, 503, "replica_unavailable")
            assert answer.headers["retry-after"] == "1"
        else:
            assert answer.status_code == 200, answer.text
            assert answer.json()["choices"][0]["message"]["content"] == expected


def answer_after_recovery(server, seconds: float = 30) -> httpx.Response:
    """The first answer that is not a 503 once the replacement runs: Ray's routers may still
    hold the lost replica for a moment (a 503 then is allowed: the client is told to retry)."""
    deadline = time.monotonic() + seconds
    while True:
        answer = post(server, chat(*CONTENT, **OPTIONS))
        if answer.status_code != 503 or time.monotonic() > deadline:
            return answer
        time.sleep(0.5)


def expected_answer(local) -> str:
    return post(local, chat(*CONTENT, **OPTIONS)).json()["choices"][0]["message"]["content"]


def test_an_engine_replica_killed_mid_run_is_replaced(ray_app, local):
    (engine,) = ray_app.replicas("Engine")
    load = Load(ray_app)
    try:
        post(ray_app, chat(*CONTENT, **OPTIONS))  # the load is running
        ray_app.kill_replica(engine)
        assert httpx.get(f"{ray_app.url}/health").status_code == 200  # the front door answers meanwhile
        ray_app.wait_running("Engine", 1, replacing=(engine,))
        after = answer_after_recovery(ray_app)
    finally:
        answers = load.stop()
    assert_right_or_unavailable([*answers, after], expected_answer(local))
    assert after.status_code == 200


def test_a_node_removed_mid_run_takes_its_decode_replica_and_no_request_with_it(ray_app, local):
    """Ray places the lost decode replica again, on a node added in its stead."""
    ray_app.wait_running("Decode", 2)
    before = ray_app.replicas("Decode")
    load = Load(ray_app)
    try:
        post(ray_app, chat(*CONTENT, **OPTIONS))
        node = ray_app.workers.pop()
        (lost,) = [name for name in before if ray_app.node_of(name) == node.node_id]
        ray_app.cluster.remove_node(node)
        assert httpx.get(f"{ray_app.url}/health").status_code == 200  # the front door answers meanwhile
        ray_app.workers.append(ray_app.add_node())
        ray_app.wait_running("Decode", 2, replacing=(lost,))  # Ray places a new one on the new node
        after = answer_after_recovery(ray_app)
    finally:
        answers = load.stop()
    assert_right_or_unavailable([*answers, after], expected_answer(local))
    assert after.status_code == 200
