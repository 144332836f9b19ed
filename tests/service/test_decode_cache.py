"""The decoded-media cache: a resent video is decoded once; memory stays bounded."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from conftest import MEDIA

from mmprep.preprocess.cache import DecodeCache
from mmprep.testing.chat import chat, data_url, post, video
from mmprep.testing.metrics import metric
from mmprep.testing.servers import LiveServer

WEBM = data_url(MEDIA / "224p_6_vp9.webm", "video/webm")


def turn(server, text: str, **sampling) -> httpx.Response:
    return post(server, chat({"type": "text", "text": text}, video(WEBM, **sampling)), timeout=30)


def lookups(server) -> dict:
    text = httpx.get(f"{server.url}/metrics").text
    return {
        result: metric(text, "mmprep_decode_cache_lookups_total", result=result) for result in ("hit", "miss")
    }


def test_a_multi_turn_chat_decodes_its_video_once():
    with LiveServer() as live:
        first, second = turn(live, "what is this?"), turn(live, "and now?")
        other_sampling = turn(live, "one frame", num_frames=1)
        counts = lookups(live)
        metrics = httpx.get(f"{live.url}/metrics").text
    account = [json.loads(r.json()["choices"][0]["message"]["content"])["media"][0] for r in (first, second)]
    assert account[0] == account[1]  # the same frames, timestamps and metadata
    assert counts == {"hit": 1, "miss": 2}
    assert 'mmprep_decode_cache_lookups_total{result="hit"} 1.0' in metrics
    assert live.service.preprocessing.cache.bytes == 224 * 224 * 3 * (6 + 1)  # six frames, then one
    assert "mmprep_decode_cache_bytes 1.053696e+06" in metrics
    assert other_sampling.status_code == 200


def test_the_cache_can_be_turned_off():
    with LiveServer(decode_cache_bytes=0) as live:
        turn(live, "a"), turn(live, "b")
        assert lookups(live) == {"hit": 0, "miss": 0}
        frames = metric(httpx.get(f"{live.url}/metrics").text, "mmprep_frames_decoded_total", kind="video")
        assert frames == 12  # decoded twice


def run(coro):
    return asyncio.run(coro)


def test_least_recently_used_goes_first_and_bytes_stay_under_the_bound():
    async def scenario():
        cache = DecodeCache(max_bytes=100)
        decoded = []

        async def make(name):
            decoded.append(name)
            return name

        for name in ("a", "b", "c"):
            await cache.get_or_decode(name, lambda n=name: make(n), lambda _: 40)  # 3 x 40 > 100
        await cache.get_or_decode("b", lambda: make("b"), lambda _: 40)  # still there
        await cache.get_or_decode("a", lambda: make("a"), lambda _: 40)  # evicted: decoded again
        return decoded, cache.bytes

    decoded, size = run(scenario())
    assert decoded == ["a", "b", "c", "a"]
    assert size <= 100


def test_identical_decodes_at_once_run_once():
    async def scenario():
        cache, calls, gate = DecodeCache(max_bytes=1000), [], asyncio.Event()

        async def slow():
            calls.append(1)
            await gate.wait()
            return "frames"

        waiting = [asyncio.ensure_future(cache.get_or_decode("k", slow, len)) for _ in range(3)]
        # Turns of this event loop, not a wait on another thread: each task runs up to the gate.
        await asyncio.sleep(0.01)
        gate.set()
        return await asyncio.gather(*waiting), calls

    results, calls = run(scenario())
    assert results == ["frames"] * 3 and calls == [1]


def test_a_request_that_leaves_does_not_fail_those_that_joined_it():
    async def scenario():
        cache, gate = DecodeCache(max_bytes=1000), asyncio.Event()

        async def slow():
            await gate.wait()
            return "frames"

        owner = asyncio.ensure_future(cache.get_or_decode("k", slow, len))
        # Turns of this event loop (the order of the scenario), not waits on another thread.
        await asyncio.sleep(0.01)
        joiner = asyncio.ensure_future(cache.get_or_decode("k", slow, len))
        await asyncio.sleep(0.01)
        owner.cancel()  # its client went away
        await asyncio.sleep(0.01)
        gate.set()
        return await joiner

    assert run(scenario()) == "frames"


def test_a_failed_decode_is_not_cached():
    async def scenario():
        cache, calls = DecodeCache(max_bytes=1000), []

        async def broken():
            calls.append(1)
            raise ValueError("corrupt")

        for _ in range(2):
            with pytest.raises(ValueError):
                await cache.get_or_decode("k", broken, len)
        return calls

    assert run(scenario()) == [1, 1]
