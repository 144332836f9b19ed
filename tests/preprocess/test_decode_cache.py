"""The media cache (decoded and processed items): a resent video or image is decoded and
processed once, by the chat and render routes alike; items made differently never share an
entry; memory stays bounded, and what it drops is counted."""

from __future__ import annotations

import asyncio
import base64
import json
import threading

import httpx
import numpy as np
import pytest

from mmprep.api.common.chat_protocol import parse_chat_request
from mmprep.core.config import Settings
from mmprep.core.metrics import Metrics
from mmprep.media.fetch import FetchLimits, MediaFetcher
from mmprep.preprocess import DecodePool, Preprocessor
from mmprep.preprocess.cache import DecodeCache
from tests.support.chat import chat, data_url, image, png_data_url, post, video
from tests.support.media import MEDIA
from tests.support.metrics import metric
from tests.support.model_folder import make_model_folder
from tests.support.servers import LiveServer

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


def test_a_resent_data_url_is_not_decoded_again_not_even_its_base64():
    """The same image sent again (a long data URL, as a chat resends it each turn) is found
    by its text: nothing fetched, nothing decoded. The same picture in other base64 (here,
    another data URL's media type) is an entry of its own, never another's answer."""
    picture = png_data_url(640, 480, noise=True)  # long: parsed from the body, not a str
    other_type = picture.replace("data:image/png", "data:image/x-png", 1)
    with LiveServer() as live:
        answers = [post(live, chat(image(url)), timeout=30) for url in (picture, picture, other_type)]
        metrics = httpx.get(f"{live.url}/metrics").text
        counts = lookups(live)
    accounts = [json.loads(a.json()["choices"][0]["message"]["content"])["media"] for a in answers]
    assert accounts[0] == accounts[1] == accounts[2]  # the same pixels all three times
    assert counts == {"hit": 1, "miss": 2}
    decoded = len(base64.b64decode(picture.split(",", 1)[1]))
    assert metric(metrics, "mmprep_fetched_bytes_total", scheme="data") == 2 * decoded  # not 3
    assert metric(metrics, "mmprep_frames_decoded_total", kind="image") == 2


def test_the_render_and_chat_routes_share_the_processed_items(tmp_path):
    """A chat that renders its turn (the render route) and then sends it (the chat route)
    decodes, resizes and patchifies each image once; the second sees the first's tensors."""
    folder = make_model_folder("qwen2_5_vl", tmp_path / "model")
    pictures = [image(png_data_url(64 + 8 * i, 48, noise=True)) for i in range(2)]
    body = chat(*pictures, {"type": "text", "text": "What changed?"}, model="m")
    with LiveServer(model=folder, served_model_name=["m"]) as live:
        rendered = httpx.post(f"{live.url}/v1/chat/completions/render", json=body, timeout=60)
        assert rendered.status_code == 200, rendered.text
        assert lookups(live) == {"hit": 0, "miss": 2}
        chatted = post(live, body)
        assert chatted.status_code == 200, chatted.text
        again = httpx.post(f"{live.url}/v1/chat/completions/render", json=body, timeout=60)
        counts, metrics = lookups(live), httpx.get(f"{live.url}/metrics").text
    assert counts == {"hit": 4, "miss": 2}
    assert metric(metrics, "mmprep_frames_decoded_total", kind="image") == 2
    assert metric(metrics, "mmprep_decode_cache_items") == 2
    assert again.json()["features"] == rendered.json()["features"]  # the same hashes and tensors


def prepare_with(settings: Settings, cache: DecodeCache, body: dict):
    """`body` prepared by a Preprocessor of `settings` over `cache`: its one media item."""

    async def go():
        fetcher = MediaFetcher(FetchLimits(max_bytes=settings.max_fetch_bytes))
        pool = DecodePool(1)
        try:
            preprocessor = Preprocessor(settings, fetcher, pool, Metrics(), cache)
            request = parse_chat_request(body).chat_input()
            prepared, _ = await preprocessor.prepare(request, "r", threading.Event())
            return prepared.media[0]
        finally:
            await fetcher.aclose()
            pool.shutdown()

    return asyncio.run(go())


def test_items_made_differently_never_share_an_entry():
    """The key holds what makes the tensors, not the bytes alone: the same image through
    processors of another pixel form or another family, or without one under another
    --max-pixels, is an item of its own; through the same ones again, the cached one."""
    body = chat(image(png_data_url(96, 64, noise=True)))
    cache = DecodeCache(max_bytes=1 << 30)
    ways = {
        "uint8": Settings(processor="qwen2_vl", mm_device_do_normalize=True),
        "float32": Settings(processor="qwen2_vl", mm_device_do_normalize=False),
        "other family": Settings(processor="qwen3_vl", mm_device_do_normalize=True),
        "no processor": Settings(),
        "scaled": Settings(max_pixels=48 * 32),
    }
    items = {name: prepare_with(settings, cache, body) for name, settings in ways.items()}
    assert len(cache) == len(ways)
    assert items["scaled"].tensor.shape == (32, 48, 3) != items.pop("no processor").tensor.shape
    assert items.pop("scaled").processed is None
    made = {name: item.processed.tensors for name, item in items.items()}
    assert made["uint8"]["pixel_values"].dtype == np.uint8
    assert made["float32"]["pixel_values"].dtype == np.float32
    assert (
        made["other family"]["pixel_values"].shape != made["uint8"]["pixel_values"].shape
    )  # patch 16, not 14
    again = prepare_with(ways["uint8"], cache, body).processed.tensors
    assert again["pixel_values"] is made["uint8"]["pixel_values"] and len(cache) == len(ways)


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


def test_evictions_are_counted_in_metrics():
    """A cache that holds one of these videos: each other video in turn evicts the last."""
    one_video = 224 * 224 * 3 * 6
    with LiveServer(decode_cache_bytes=one_video + 1000) as live:
        for frames in (6, 3, 6):  # three decodes of other sampling, each pushing the last out
            assert turn(live, "a", num_frames=frames).status_code == 200
        metrics = httpx.get(f"{live.url}/metrics").text
    assert metric(metrics, "mmprep_decode_cache_evictions_total") == 2
    assert metric(metrics, "mmprep_decode_cache_items") == 1
    assert metric(metrics, "mmprep_decode_cache_lookups_total", result="miss") == 3


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


def render_lookups(server) -> dict:
    text = httpx.get(f"{server.url}/metrics").text
    return {
        result: metric(text, "mmprep_render_cache_lookups_total", result=result) for result in ("hit", "miss")
    }


@pytest.mark.parametrize("decode_cache_bytes", [1024**3, 0], ids=["cached", "no-decode-cache"])
def test_media_sent_again_is_neither_hashed_nor_encoded_again(tmp_path, decode_cache_bytes):
    """The render answer for media sent again reuses the media's mm_hashes from the second time,
    and each item's encoded form from the third (app/mmprep/vllm/wire_cache.py: a new item's
    is not kept, the second time it is), and writes the same answer, byte for byte; where the
    tensors were not kept (no decode cache) the hash went with them, and all is made anew, the
    same."""
    folder = make_model_folder("qwen2_5_vl", tmp_path / "model")
    body = chat(
        video(WEBM), image(png_data_url(64, 48, noise=True)), {"type": "text", "text": "?"}, model="m"
    )
    settings = {"model": folder, "served_model_name": ["m"], "decode_cache_bytes": decode_cache_bytes}
    answers, seen = [], []
    with LiveServer(**settings) as live:
        kept = live.service.generate_options.wire_cache
        for _ in range(3):
            answer = httpx.post(f"{live.url}/v1/chat/completions/render", json=body, timeout=60)
            assert answer.status_code == 200, answer.text
            metrics = httpx.get(f"{live.url}/metrics").text
            seen.append((render_lookups(live), metric(metrics, "mmprep_render_cache_items")))
            answers.append(answer.json())
        if decode_cache_bytes:  # the two media's hashes, then each item the answer writes
            items = int(seen[0][0]["miss"]) - 2
            assert items >= 2
            assert seen == [
                ({"hit": 0, "miss": 2 + items}, 2),  # only the hashes kept: the items are new
                ({"hit": 2, "miss": 2 + 2 * items}, 2 + items),  # sent again: the items kept now
                ({"hit": 4 + items, "miss": 2 + 2 * items}, 2 + items),
            ]
            assert metric(metrics, "mmprep_render_cache_bytes") == kept.bytes > 128  # 2 hex hashes, more
        else:  # the hashes went with the tensors; no item was kept the first time
            assert [counts["hit"] for counts, _ in seen[:2]] == [0, 0]
    strip = {"request_id"}
    first = {k: v for k, v in answers[0].items() if k not in strip}
    assert all({k: v for k, v in again.items() if k not in strip} == first for again in answers[1:])


def test_the_render_cache_stays_in_its_bytes_and_can_be_turned_off(tmp_path):
    folder = make_model_folder("qwen2_5_vl", tmp_path / "model")
    body = chat(video(WEBM), {"type": "text", "text": "?"}, model="m")
    with LiveServer(model=folder, served_model_name=["m"], render_cache_bytes=63) as live:
        counts = []
        for _ in range(2):
            assert (
                httpx.post(f"{live.url}/v1/chat/completions/render", json=body, timeout=60).status_code == 200
            )
            counts.append(render_lookups(live))
        kept = live.service.generate_options.wire_cache
        assert kept.bytes == 0  # a hash is 64 bytes, an item more: none fits
        # the hash and the items looked up alike each time, and nothing found the second
        assert counts[0]["hit"] == 0 and counts[0]["miss"] >= 2
        assert counts[1] == {"hit": 0, "miss": 2 * counts[0]["miss"]}
    with LiveServer(model=folder, served_model_name=["m"], render_cache_bytes=0) as live:
        assert httpx.post(f"{live.url}/v1/chat/completions/render", json=body, timeout=60).status_code == 200
        assert live.service.generate_options.wire_cache is None
        assert render_lookups(live) == {"hit": 0, "miss": 0}
