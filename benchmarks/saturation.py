"""Throughput at saturation: 16 different videos in flight, through `mmprep serve`, against
torchcodec decoding the same requests in a thread pool, on this machine's cores.

    python benchmarks/saturation.py                 # needs the bench-peers extra for torchcodec

Each request asks for 32 frames of one of 16 camera-like 10 s 1280x720 H.264 clips (made
once into bench's synthetic cache), as file:// URLs, so no cache and no network is in the
way. mmprep: a real server with its defaults (one decoder per core, its thread budget, so
keyframe intervals run side by side only when decoders are idle), clients 16 at a time; and
the same server with `--decode-threads 1`, where they never do (one FFmpeg thread a decode).
torchcodec: the same clips and frame positions, in a pool of 16 threads (16 in flight) and
of one per core, one FFmpeg thread per decoder. Runs alternate; requests per second.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's root: tests.support

from mmprep.bench.config import SyntheticOptions
from mmprep.bench.inputs import generate_synthetic
from tests.support.chat import chat, video
from tests.support.servers import AppProcess

CLIPS, FRAMES, IN_FLIGHT = 16, 32, 16


def through_mmprep(server: AppProcess, paths: list, requests: int) -> float:
    bodies = [chat(video(paths[i % len(paths)].as_uri(), num_frames=FRAMES)) for i in range(requests)]
    with httpx.Client(timeout=300, limits=httpx.Limits(max_connections=IN_FLIGHT)) as client:

        def ask(body) -> None:
            response = client.post(f"{server.url}/v1/chat/completions", json=body)
            assert response.status_code == 200, response.text

        started = time.perf_counter()
        with ThreadPoolExecutor(IN_FLIGHT) as pool:
            list(pool.map(ask, bodies))
    return requests / (time.perf_counter() - started)


def through_torchcodec(paths: list, requests: int, threads: int) -> float:
    from torchcodec.decoders import VideoDecoder

    def decode(path) -> None:
        decoder = VideoDecoder(str(path), num_ffmpeg_threads=1, seek_mode="exact")
        positions = np.linspace(0, decoder.metadata.num_frames - 1, FRAMES, dtype=int).tolist()
        assert len(decoder.get_frames_at(positions).data) == FRAMES

    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(decode, [paths[i % len(paths)] for i in range(requests)]))
    return requests / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    options = SyntheticOptions(synthetic=CLIPS, synthetic_size="1280x720", synthetic_duration=10.0)
    paths = generate_synthetic(options)
    flags = (
        "--allowed-local-media-path",
        str(paths[0].parent),
        "--decode-cache-bytes",
        "0",
        "--max-concurrent-requests",
        "64",
    )
    runs: dict[str, list[float]] = {
        "mmprep serve": [],
        "mmprep serve, no runs side by side": [],
        "torchcodec, 16 threads": [],
        "torchcodec, one per core": [],
    }
    with (
        AppProcess("serve", *flags) as server,
        AppProcess("serve", *flags, "--decode-threads", "1") as one_thread,
    ):
        through_mmprep(server, paths, IN_FLIGHT)  # warm up
        through_mmprep(one_thread, paths, IN_FLIGHT)
        for _ in range(args.repeats):
            runs["mmprep serve"].append(through_mmprep(server, paths, args.requests))
            runs["mmprep serve, no runs side by side"].append(
                through_mmprep(one_thread, paths, args.requests)
            )
            runs["torchcodec, 16 threads"].append(through_torchcodec(paths, args.requests, IN_FLIGHT))
            runs["torchcodec, one per core"].append(
                through_torchcodec(paths, args.requests, os.cpu_count() or 1)
            )
    print(
        f"{args.requests} requests of {FRAMES} frames over {CLIPS} clips, {IN_FLIGHT} in flight, "
        f"{os.cpu_count()} cores; median of {args.repeats} alternated runs"
    )
    print("| way | requests/s | runs | mmprep / it |\n|---|---|---|---|")
    ours = statistics.median(runs["mmprep serve"])
    for way, rates in runs.items():
        spread = f"{min(rates):.2f}-{max(rates):.2f}"
        print(
            f"| {way} | {statistics.median(rates):.2f} | {spread} | {ours / statistics.median(rates):.2f}x |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
