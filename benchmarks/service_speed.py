"""What the HTTP path costs, and throughput under load, each against its baseline from
the same run.

    python benchmarks/service_speed.py            # the figures quoted in docs/benchmarks.md
    python benchmarks/service_speed.py --quick

1. Latency at concurrency 1: a request for 8 frames of a small clip (2 s of camera-like
   480p H.264, sent as a data URL), against decode_video() on the same bytes in process,
   taken in turn. With the decode cache off (every request decodes) and on (a multi-turn
   chat's resend: the cached video's request, fetch to answer).
2. Throughput at concurrency 16: the service (cache off) against 16 decodes at once in
   process through the same DecodePool (same workers, same thread budget), in turn, 3 each.
3. Throughput at concurrency 1, 4, 16 and 64 with the thread budget, against every decode
   getting a fixed thread count (all the cores) and a worker per request.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from footage import camera_clip

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's root: tests.support

from mmprep.decoders import decode_video
from mmprep.preprocess.pool import DecodePool
from tests.support.chat import chat, video
from tests.support.servers import AppProcess

SAMPLING: dict[str, Any] = {"num_frames": 8}
CORES = os.cpu_count() or 1


def request_body(data: bytes) -> bytes:
    url = "data:video/mp4;base64," + base64.b64encode(data).decode()
    return json.dumps(chat(video(url, **SAMPLING))).encode()


def Server(*flags: str) -> AppProcess:
    """`mmprep serve` in a subprocess, with extra flags; a context manager."""
    return AppProcess("serve", "--max-concurrent-requests", "256", *flags)


async def http_run(url: str, body: bytes, requests: int, concurrency: int) -> tuple[list[float], float]:
    """(per-request seconds, requests per second) for `requests` posts, `concurrency` at a time.

    A lean HTTP/1.1 keep-alive client (the request bytes built once, responses read by
    Content-Length): on a 2-core machine the load generator shares the cores with the
    server, and httpx's own per-request work would be measured as the server's.
    """
    host, port = url.removeprefix("http://").split(":")
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    request, latencies = head + body, []
    queue: asyncio.Queue[None] = asyncio.Queue()
    for _ in range(requests):
        queue.put_nowait(None)

    async def connection():
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            while not queue.empty():
                queue.get_nowait()
                started = time.perf_counter()
                writer.write(request)
                status = await reader.readline()
                if b" 200 " not in status:
                    raise RuntimeError(f"the server answered {status!r}")
                length = 0
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                await reader.readexactly(length)
                latencies.append(time.perf_counter() - started)
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(connection() for _ in range(concurrency)))
    return latencies, requests / (time.perf_counter() - started)


async def in_process_run(data: bytes, requests: int, concurrency: int) -> tuple[list[float], float]:
    """The same decodes through the service's DecodePool, without HTTP."""
    pool, gate, latencies = DecodePool(CORES), asyncio.Semaphore(concurrency), []

    async def one():
        async with gate:
            started = time.perf_counter()
            await pool.run_with_threads(decode_video, data, **SAMPLING, max_pixels=1920 * 1080)
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(requests)))
    pool.shutdown()
    return latencies, requests / (time.perf_counter() - started)


def p50_ms(latencies: list[float]) -> float:
    return round(statistics.median(latencies) * 1000, 2)


def run_options(description: str):
    """This script's and ray_speed.py's options (--quick, --json), and `n(count)`: a run
    count, a quarter of it with --quick, at least 8."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    scale = 0.25 if args.quick else 1.0
    return args, lambda count: max(8, int(count * scale))


def clip_bytes() -> bytes:
    """The clip both scripts send: 2 s of camera-like 854x480 H.264."""
    return camera_clip("h264_480p_2s.mp4", 854, 480, 2).read_bytes()


def main() -> None:
    args, n = run_options(__doc__)
    data = clip_bytes()
    body = request_body(data)
    results: dict = {"clip": f"854x480, 2 s, {len(data) / 1024:.0f} KiB, {SAMPLING}", "cores": CORES}

    # 1. latency at concurrency 1, one in-process decode and one request in turn
    inproc, uncached = [], []
    with Server("--decode-cache-bytes", "0") as server:
        asyncio.run(http_run(server.url, body, 5, 1))
        asyncio.run(in_process_run(data, 5, 1))
        for _ in range(n(60)):
            started = time.perf_counter()
            decode_video(data, **SAMPLING, max_pixels=1920 * 1080, threads=CORES)  # what one request gets
            inproc.append(time.perf_counter() - started)
            uncached += asyncio.run(http_run(server.url, body, 1, 1))[0]
    with Server() as server:
        asyncio.run(http_run(server.url, body, 5, 1))
        cached, _ = asyncio.run(http_run(server.url, body, n(60), 1))
    results["latency_ms"] = {
        "in_process_decode_p50": p50_ms(inproc),
        "service_cache_off_p50": p50_ms(uncached),
        "service_cache_hit_p50": p50_ms(cached),
        "http_path_overhead_p50": round(p50_ms(uncached) - p50_ms(inproc), 2),
    }
    print(json.dumps(results["latency_ms"]), flush=True)

    # 2. throughput at concurrency 16, same pool and thread budget, A/B/A/B/A/B
    inproc_runs, service_runs = [], []
    with Server("--decode-cache-bytes", "0") as server:
        asyncio.run(http_run(server.url, body, 16, 16))
        for _ in range(3):
            inproc_runs.append(asyncio.run(in_process_run(data, n(120), 16))[1])
            service_runs.append(asyncio.run(http_run(server.url, body, n(120), 16))[1])
    inproc_rps, service_rps = statistics.median(inproc_runs), statistics.median(service_runs)
    results["throughput_c16"] = {
        "in_process_per_s": round(inproc_rps, 1),
        "service_per_s": round(service_rps, 1),
        "service_over_in_process": round(service_rps / inproc_rps, 3),
    }
    print(json.dumps(results["throughput_c16"]), flush=True)

    # 3. the thread budget against fixed threads and a worker per request
    sweep = {}
    for concurrency in (1, 4, 16, 64):
        count = n(max(40, concurrency * 4))
        row = {}
        for label, flags in (
            ("budget", ["--decode-cache-bytes", "0"]),
            (
                "fixed",
                [
                    "--decode-cache-bytes",
                    "0",
                    "--decode-workers",
                    str(concurrency),
                    "--decode-threads",
                    str(CORES),
                ],
            ),
        ):
            with Server(*flags) as server:
                asyncio.run(http_run(server.url, body, min(count, 16), concurrency))
                _, rps = asyncio.run(http_run(server.url, body, count, concurrency))
            row[label] = round(rps, 1)
        row["budget_over_fixed"] = round(row["budget"] / row["fixed"], 2)
        sweep[concurrency] = row
        print(concurrency, json.dumps(row), flush=True)
    results["sweep"] = sweep

    print()
    lat = results["latency_ms"]
    print(
        f"latency p50: in-process decode {lat['in_process_decode_p50']} ms, "
        f"service {lat['service_cache_off_p50']} ms (HTTP path +{lat['http_path_overhead_p50']} ms), "
        f"cache hit {lat['service_cache_hit_p50']} ms"
    )
    t = results["throughput_c16"]
    print(
        f"concurrency 16: service {t['service_per_s']}/s vs in-process {t['in_process_per_s']}/s "
        f"= {t['service_over_in_process']:.0%}"
    )
    print("| concurrency | thread budget (req/s) | fixed threads, worker per request (req/s) | ratio |")
    print("|---|---|---|---|")
    for concurrency, row in sweep.items():
        print(f"| {concurrency} | {row['budget']} | {row['fixed']} | {row['budget_over_fixed']}x |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
