"""`mmprep serve` as an operator runs it: a real process, flags and MMPREP_* variables."""

from __future__ import annotations

import httpx
import pytest

from tests.support.cli import run_mmprep
from tests.support.metrics import metric
from tests.support.servers import AppProcess
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow  # every test runs `python -m mmprep` as a process


@pytest.mark.parametrize("args", [["--help"], ["serve", "--help"]])
def test_help_lists_the_settings(args):
    out = run_mmprep(*args).stdout
    for flag in (
        "--port",
        "--served-model-name",
        "--engine",
        "--allowed-local-media-path",
        "--max-frames",
        "--log-level",
        "--worker-url",
        "--upstream-url",
        "--upstream-model",
    ):
        assert flag in out


def test_version_is_the_installed_packages():
    from importlib.metadata import version

    result = run_mmprep("--version")
    assert result.returncode == 0 and result.stdout == f"mmprep {version('mmprep')}\n"


def test_worker_help_lists_its_settings():
    out = run_mmprep("worker", "--help").stdout
    for flag in ("--host", "--port", "--engine-class", "--max-request-bytes", "--log-level"):
        assert flag in out


@pytest.mark.parametrize(
    "args, env, says",
    [
        (["--engine", "vllm-magic"], {}, "unknown engine 'vllm-magic'"),
        (["--allowed-local-media-path", "/no/such/dir"], {}, "'/no/such/dir' is not an existing directory"),
        (
            ["--default-max-frames", "500", "--max-frames", "100"],
            {},
            "default_max_frames (500) exceeds max_frames (100)",
        ),
        (["--max-pixels", "0"], {}, "max_pixels"),
        (["--served-model-name", "a", "--served-model-name", "a"], {}, "model names repeat"),
        (["--no-such-flag", "1"], {}, "unrecognized arguments"),
        ([], {"MMPREP_MAX_FRAMS": "4"}, "MMPREP_MAX_FRAMS"),
        ([], {"MMPREP_PORT": "eighty"}, "port"),
        (["--engine", "workers"], {}, "engine 'workers' needs at least one worker_url"),
        (
            ["--engine", "workers", "--worker-url", "ftp://w:1"],
            {},
            "worker_url: 'ftp://w:1' is not an http:// or https:// URL",
        ),
        (
            ["--engine", "workers", "--worker-url", "http://w:port"],
            {},
            "worker_url: 'http://w:port' is not a valid URL",
        ),
        (
            ["--engine", "openai", "--upstream-model", "m"],
            {},
            "engine 'openai' needs upstream_url (--upstream-url)",
        ),
        (
            ["--engine", "openai", "--upstream-url", "http://v/v1"],
            {},
            "needs upstream_model (--upstream-model)",
        ),
        (["--upstream-url", "vllm:8000"], {}, "upstream_url: 'vllm:8000' is not an http:// or https:// URL"),
        # a setting the engine would not read is refused, not ignored
        (
            ["--worker-url", "http://w:1"],
            {},
            "--worker-url only applies with --engine workers, not with --engine echo",
        ),
        ([], {"MMPREP_UPSTREAM_URL": "http://v/v1"}, "--upstream-url only applies with --engine openai"),
        (
            [
                "--engine",
                "openai",
                "--upstream-url",
                "http://v/v1",
                "--upstream-model",
                "m",
                "--worker-url",
                "http://w:1",
            ],
            {},
            "--worker-url only applies with --engine workers, not with --engine openai",
        ),
        (["--ray-decode-replicas", "2"], {}, "--ray-decode-replicas only applies with --runtime ray"),
        (
            ["--ray-deployment-options", '{"Engine": {"ray_actor_options": {"num_gpus": 1}}}'],
            {},
            "--ray-deployment-options only applies with --runtime ray",
        ),
    ],
)
def test_a_wrong_setting_stops_the_process_and_says_which(args, env, says):
    result = run_mmprep("serve", *args, env=env)
    assert result.returncode == 2
    assert says in result.stderr


@pytest.mark.parametrize(
    "engine_class, says",
    [
        ("no_colon", "'no_colon' is not of the form package.module:ClassName"),
        ("no_such_module:Engine", "cannot import 'no_such_module'"),
        ("mmprep.engines.echo:Nothing", "module 'mmprep.engines.echo' has no 'Nothing'"),
        ("mmprep.engines.echo:json", "'mmprep.engines.echo:json' is not a class"),
        (
            "mmprep.interface.prepared:SamplingParams",
            "is not an engine: it lacks start, stop, ready, generate",
        ),
        (
            "mmprep.interface.prepared:MediaItem",
            "cannot make the engine mmprep.interface.prepared:MediaItem: MediaItem.__init__() missing",
        ),
    ],
)
def test_a_worker_with_a_wrong_engine_class_stops_and_says_why(engine_class, says):
    result = run_mmprep("worker", "--engine-class", engine_class)
    assert result.returncode == 2
    assert says in result.stderr


def test_serve_starts_answers_and_stops_on_sigterm():
    with AppProcess("serve", "--served-model-name", "my-vlm", env={"MMPREP_LOG_LEVEL": "info"}) as server:
        models = httpx.get(f"{server.url}/v1/models").json()
        assert [m["id"] for m in models["data"]] == ["my-vlm"]
        # uvicorn shuts down cleanly, then re-raises SIGTERM so the exit status says why.
        assert server.stop() in (0, -15)
        log = server.log()
    assert "Finished server process" in log and '"level": "error"' not in log


def test_list_flags_take_vllms_form_several_values_after_one_flag():
    """`vllm serve --served-model-name a b --allowed-media-domains x.org y.org`, as written
    for vLLM, means the same here (and the repeated form still works)."""
    args = ["--served-model-name", "vlm", "vlm-alias", "--allowed-media-domains", "example.org", "media.net"]
    with AppProcess("serve", *args, "--served-model-name=third") as server:
        models = httpx.get(f"{server.url}/v1/models").json()
        assert [m["id"] for m in models["data"]] == ["vlm", "vlm-alias", "third"]
        image = {"type": "image_url", "image_url": {"url": "http://elsewhere.com/cat.png"}}
        refused = httpx.post(
            f"{server.url}/v1/chat/completions",
            json={"model": "vlm", "messages": [{"role": "user", "content": [image]}]},
        )
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "media_forbidden"


def test_sigterm_drains_in_flight_requests_and_refuses_new_ones(media_server):
    import threading

    server = AppProcess("serve", "--allow-private-networks").start().wait_ready()
    url = server.url
    body = {
        "model": "mmprep-echo",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "video_url", "video_url": {"url": f"{media_server.url}/slow/2/224p_6_vp9.webm"}}
                ],
            }
        ],
    }
    answers = []
    slow = threading.Thread(
        target=lambda: answers.append(httpx.post(f"{url}/v1/chat/completions", json=body, timeout=30))
    )
    slow.start()
    wait_until(lambda: in_flight(url) == 1, "the slow request to be in flight")
    server.process.terminate()
    wait_until(lambda: refuses(url), "the draining server to refuse new connections")
    assert slow.is_alive()  # no new work once draining, while the one in flight is still answered
    slow.join()
    assert answers[0].status_code == 200  # the one in flight finished
    assert json_account(answers[0])["media"][0]["shape"][0] == 6
    assert server.stop() in (0, -15)
    server.close()


def in_flight(url: str) -> float:
    return metric(httpx.get(f"{url}/metrics", timeout=5).text, "mmprep_requests_in_flight")


def refuses(url: str) -> bool:
    """Whether a new request to `url` finds no server to answer it."""
    try:
        httpx.get(f"{url}/health", timeout=2)
    except httpx.TransportError:
        return True
    return False


def json_account(response) -> dict:
    import json

    return json.loads(response.json()["choices"][0]["message"]["content"])


def test_logs_are_json_with_request_ids_and_never_hold_data_url_bodies():
    import base64
    import json

    from tests.support.media import MEDIA

    payload = base64.b64encode((MEDIA / "224p_6_vp9.webm").read_bytes()).decode()
    server = AppProcess("serve", "--log-level", "debug").start().wait_ready()
    good = {"type": "video_url", "video_url": {"url": f"data:video/webm;base64,{payload}"}}
    bad = {"type": "video_url", "video_url": {"url": f"data:video/webm;base64,{payload[:-9]}!!"}}
    for part in (good, bad):
        body = {"model": "mmprep-echo", "messages": [{"role": "user", "content": [part]}]}
        httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=30)
    server.stop()
    lines = server.log().splitlines()
    server.close()
    entries = [json.loads(line) for line in lines]  # every line is one JSON object
    with_ids = [e for e in entries if e.get("logger", "").startswith("mmprep")]
    assert len({e["request_id"] for e in with_ids}) == 2  # one id per request, on each of its lines
    middle = payload[len(payload) // 2 :][:40]
    assert len(middle) == 40 and not any(middle in line for line in lines)
