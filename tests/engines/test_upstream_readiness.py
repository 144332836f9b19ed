"""An upstream's version and readiness: --engine vllm-generate reads vLLM's GET /version at
start and refuses a release outside the tested ones (or warns, with
--upstream-allow-untested-version); /ready follows the upstream's GET /health, probed in the
background and cached, for vllm-generate and openai alike. Real servers on loopback
(tests/support/vllm_like.py's fake vLLM, mmprep in a thread); nothing of mmprep is mocked."""

from __future__ import annotations

import asyncio
import logging
import time

import httpx
import pytest
from fastapi import FastAPI

from mmprep.core.config import Settings
from mmprep.core.lifespan import StartupError
from mmprep.engines.upstream import OpenAIUpstreamEngine
from mmprep.engines.vllm_generate import VllmGenerateEngine, version_problem
from mmprep.vllm import TESTED_VLLM_VERSIONS
from tests.support.chat import assert_error, chat, post
from tests.support.cli import run_mmprep
from tests.support.model_folder import make_model_folder
from tests.support.servers import LiveServer, ThreadServer, free_port
from tests.support.vllm_cases import build_case
from tests.support.vllm_like import VllmGenerateLike, VllmLike

MODEL = "mmprep-echo"  # the chat helper's model name
PROBE = 0.05  # seconds between probes in these tests


@pytest.fixture
def vllm():
    """A fake vLLM of its own per test: the tests change its version and health."""
    server = VllmGenerateLike(model=MODEL)
    with ThreadServer(server.app) as running:
        server.url = running.url
        yield server


def engine_for(url: str, **options) -> VllmGenerateEngine:
    return VllmGenerateEngine(url, build_case("qwen3_vl_image").options, probe_interval=PROBE, **options)


async def started(engine) -> None:
    await engine.start()
    await engine.stop()


def test_the_tested_versions_are_named():
    assert TESTED_VLLM_VERSIONS == ("0.32", "0.33")
    for version in ("0.33.0", "0.32.0", "0.33.1rc1", "0.32.0+cpu", "0.33.0.dev12+g4ba787e"):
        assert version_problem(version, "u") is None, version
    for version in ("0.34.0", "0.31.2", "0.330.0", "1.33.0"):
        assert version_problem(version, "u") is not None, version


@pytest.mark.parametrize("version", ["0.33.0", "0.32.0"])
def test_a_tested_vllm_is_taken(vllm, version):
    vllm.version = version
    engine = engine_for(vllm.url)

    async def go():
        await engine.start()
        try:
            return engine.ready(), engine.upstream_version
        finally:
            await engine.stop()

    assert asyncio.run(go()) == (True, version)


def test_an_untested_vllm_is_refused_at_start_naming_both(vllm):
    vllm.version = "0.34.0"
    with pytest.raises(StartupError) as refused:
        asyncio.run(started(engine_for(vllm.url)))
    message = str(refused.value)
    assert "vLLM 0.34.0" in message and "tested: vLLM 0.32.x, 0.33.x" in message
    assert "--upstream-allow-untested-version" in message


def test_the_opt_out_turns_the_refusal_into_a_warning(vllm, caplog, tmp_path):
    vllm.version = "0.34.0"
    engine = engine_for(vllm.url, allow_untested_version=True)

    async def go():
        await engine.start()
        try:
            return engine.ready()
        finally:
            await engine.stop()

    with caplog.at_level(logging.WARNING, logger="mmprep.engines"):
        assert asyncio.run(go()) is True
    assert any("vLLM 0.34.0" in r.getMessage() and "serving anyway" in r.getMessage() for r in caplog.records)
    settings = Settings(
        engine="vllm-generate",
        upstream_url=vllm.url,
        upstream_model=MODEL,
        model=make_model_folder("qwen2_vl", tmp_path / "Qwen2-VL-2B-Instruct"),
        upstream_allow_untested_version=True,
    )
    assert settings.upstream_allow_untested_version
    with pytest.raises(
        ValueError, match="--upstream-allow-untested-version only applies with --engine vllm-generate"
    ):
        Settings(
            engine="openai", upstream_url=vllm.url, upstream_model=MODEL, upstream_allow_untested_version=True
        )


def test_an_unreachable_upstream_at_start_is_logged_not_fatal(caplog):
    engine = engine_for(f"http://127.0.0.1:{free_port()}/v1")

    async def go():
        await engine.start()
        try:
            return engine.ready()
        finally:
            await engine.stop()

    with caplog.at_level(logging.WARNING, logger="mmprep.engines"):
        assert asyncio.run(go()) is False
    (record,) = [r for r in caplog.records if "not healthy at start" in r.getMessage()]
    assert "/health" in record.getMessage() and "/ready answers 503" in record.getMessage()


def ready(server) -> int:
    return httpx.get(f"{server.url}/ready", timeout=10).status_code


def wait_for(check, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return False


def test_ready_follows_the_vllm_upstreams_health_without_a_probe_per_call(vllm):
    vllm.healthy = False  # up, its engine dead: vLLM's /health answers 503
    interval = 0.5
    engine = VllmGenerateEngine(vllm.url, build_case("qwen3_vl_image").options, probe_interval=interval)
    with LiveServer(engine=engine) as live:
        assert ready(live) == 503
        vllm.healthy = True
        assert wait_for(lambda: ready(live) == 200)
        before, started_at = vllm.health_probes, time.monotonic()
        assert all(ready(live) == 200 for _ in range(40))
        elapsed = time.monotonic() - started_at
        # the background probe's pace, not one probe per /ready call
        assert vllm.health_probes - before <= elapsed / interval + 2 < 40
        vllm.healthy = False
        assert wait_for(lambda: ready(live) == 503)


def test_a_vllm_that_comes_up_later_is_checked_then(vllm):
    vllm.healthy, vllm.version = False, "0.35.1"
    with LiveServer(engine=engine_for(vllm.url)) as live:
        vllm.healthy = True
        engine = live.service.engine
        assert wait_for(lambda: engine.upstream_version == "0.35.1")
        assert ready(live) == 503  # reachable, but not a release mmprep was tested against
        error = assert_error(
            post(live, chat({"type": "text", "text": "hi"})), 502, "upstream_version_untested"
        )
        assert "vLLM 0.35.1" in error["message"]


def test_ready_follows_an_openai_upstream_too():
    upstream = VllmLike(model=MODEL)
    with ThreadServer(upstream.app) as running:
        upstream.url = running.url
        engine = OpenAIUpstreamEngine(f"{upstream.url}/v1", MODEL, probe_interval=PROBE)
        with LiveServer(engine=engine) as live:
            assert ready(live) == 200
            upstream.healthy = False
            assert wait_for(lambda: ready(live) == 503)
    # Gone altogether: 503 too (it was 200 while every chat was a 502).
    gone = OpenAIUpstreamEngine(f"http://127.0.0.1:{free_port()}/v1", MODEL, probe_interval=PROBE)
    with LiveServer(engine=gone) as live:
        assert ready(live) == 503


def test_an_openai_server_without_health_is_probed_at_its_models():
    plain = FastAPI()  # an OpenAI-compatible server that is not vLLM: no /health
    plain.get("/v1/models")(lambda: {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
    with ThreadServer(plain) as running:
        engine = OpenAIUpstreamEngine(f"{running.url}/v1", MODEL, probe_interval=PROBE)
        with LiveServer(engine=engine) as live:
            assert ready(live) == 200


@pytest.mark.slow  # a `mmprep serve` process
def test_mmprep_serve_stops_at_start_naming_the_untested_version(vllm, tmp_path):
    vllm.version = "0.34.0"
    folder = make_model_folder("qwen2_vl", tmp_path / "Qwen2-VL-2B-Instruct")
    flags = ["--model", str(folder), "--engine", "vllm-generate", "--upstream-url", vllm.url]
    done = run_mmprep("serve", "--port", str(free_port()), *flags, "--upstream-model", MODEL, timeout=60)
    assert done.returncode != 0
    assert (
        "is vLLM 0.34.0, whose wire mmprep was not tested against (tested: vLLM 0.32.x, 0.33.x)"
        in done.stderr
    )
    # said once, on one line, with no stack under it: it is the operator's to mend, not a bug
    assert done.stderr.count("whose wire mmprep was not tested") == 1 and "Traceback" not in done.stderr
