"""Mixed load against a live `mmprep serve`: every request gets an answer, bad input never
gets a 5xx, and memory comes back near where it started.

    python benchmarks/load.py --requests 2000 --concurrency 64     # the long run
    (tests/service/test_load.py runs it with a few hundred requests)

Valid requests (WebM and PNG by data URL, MP4 by http URL, text only) and invalid ones
(damaged video, a video sent as an image, a 404 URL, a forbidden scheme, bad sampling, an
unknown model, n=2, a body that is not JSON) are interleaved at random, half streamed.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's root: tests.support

from tests.support.chat import chat, image, png_data_url, video
from tests.support.media_store import MediaStore
from tests.support.servers import AppProcess

MEDIA = Path(__file__).resolve().parent.parent / "tests" / "data" / "media"
WEBM = base64.b64encode((MEDIA / "224p_6_vp9.webm").read_bytes()).decode()
PNG = png_data_url(96, 64)


def request_kinds(media_url: str) -> dict[str, tuple[dict | bytes, int]]:
    """name -> (body, the status it must get)."""

    def ask(*parts, **extra):
        return chat({"type": "text", "text": "hi"}, *parts, **extra)

    return {
        "webm_data_url": (ask(video(f"data:video/webm;base64,{WEBM}")), 200),
        "mp4_http": (ask(video(f"{media_url}/bframes_h264.mp4", num_frames=8)), 200),
        "image_data_url": (ask(image(PNG)), 200),
        "video_as_image": (ask(image(f"{media_url}/224p_6_vp9.webm")), 400),
        "text_only": (ask(), 200),
        "damaged_video": (ask(video(f"data:video/webm;base64,{WEBM[:300]}")), 400),
        "missing_url": (ask(video(f"{media_url}/status/404")), 400),
        "forbidden_scheme": (ask(video("ftp://example.com/a.mp4")), 400),
        "bad_sampling": (ask(video(f"{media_url}/vp8.webm", num_frames=0)), 400),  # fps <= 0 is "not set"
        "unknown_model": (ask(model="nope"), 404),
        "two_choices": (ask(n=2), 400),
        "not_json": (b"{this is not json", 400),
    }


async def one_request(client: httpx.AsyncClient, name: str, body, expected: int, stream: bool) -> dict:
    started = time.perf_counter()
    try:
        if isinstance(body, bytes):
            response = await client.post(
                "/v1/chat/completions", content=body, headers={"content-type": "application/json"}
            )
            status, ok = response.status_code, response.status_code == expected
        elif stream:
            async with client.stream(
                "POST", "/v1/chat/completions", json={**body, "stream": True}
            ) as response:
                lines = [line async for line in response.aiter_lines() if line]
            status = response.status_code
            ok = status == expected and (
                status != 200
                or (lines[-1] == "data: [DONE]" and not any('"error"' in line for line in lines))
            )
        else:
            response = await client.post("/v1/chat/completions", json=body)
            status, ok = response.status_code, response.status_code == expected
    except httpx.HTTPError as error:
        return {"name": name, "status": None, "ok": False, "error": type(error).__name__}
    return {"name": name, "status": status, "ok": ok, "seconds": time.perf_counter() - started}


async def run_load(url: str, media_url: str, requests: int, concurrency: int, seed: int = 0) -> dict:
    kinds = request_kinds(media_url)
    rng = random.Random(seed)
    plan = [(name, rng.random() < 0.5) for name in rng.choices(list(kinds), k=requests)]
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:

        async def guarded(name, stream):
            async with gate:
                return await one_request(client, name, *kinds[name], stream)

        started = time.perf_counter()
        records = await asyncio.gather(*(guarded(name, stream) for name, stream in plan))
        elapsed = time.perf_counter() - started
    return {
        "requests": requests,
        "answered": sum(r["status"] is not None for r in records),
        "as_expected": sum(r["ok"] for r in records),
        "server_errors": sum((r["status"] or 0) >= 500 for r in records),
        "statuses": dict(Counter(str(r["status"]) for r in records)),
        "wrong": [r for r in records if not r["ok"]][:10],
        "requests_per_second": round(requests / elapsed, 1),
    }


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field)) / 1024


def serve_and_load(requests: int, concurrency: int, seed: int = 0) -> dict:
    """Start mmprep and a media server on loopback, warm up, load, and measure the server's RSS."""
    flags = ("--allow-private-networks", "--max-concurrent-requests", str(max(64, concurrency)))
    with AppProcess("serve", *flags) as server, MediaStore(folder=MEDIA) as media:
        assert server.process is not None  # started on entering the block
        pid = server.process.pid
        asyncio.run(run_load(server.url, media.url, 40, 8, seed + 1))  # warm-up: allocators, pools
        before = rss_mib(pid)
        summary = asyncio.run(run_load(server.url, media.url, requests, concurrency, seed))
        time.sleep(1.0)
        summary.update(
            rss_before_mib=round(before, 1),
            rss_peak_mib=round(rss_mib(pid, "VmHWM"), 1),
            rss_after_mib=round(rss_mib(pid), 1),
        )
        return summary


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(json.dumps(serve_and_load(args.requests, args.concurrency, args.seed), indent=2))


if __name__ == "__main__":
    main()
