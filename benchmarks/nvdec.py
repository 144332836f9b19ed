"""What NVDEC saves: CPU-seconds and wall time per request with `device="cuda"` against the
CPU, on the clips of benchmarks/cost.py, and throughput at 16 requests in flight.

    python benchmarks/nvdec.py                      # on a machine with an NVIDIA GPU
    python benchmarks/nvdec.py --clips vp9_720p_60s --repeats 5

Per request: the CPU path on one thread (its cheapest) and on the whole machine, against
NVDEC; CPU time is getrusage over every thread of this process. At concurrency 16: 16
threads each decoding a request at a time (the CPU path one FFmpeg thread each, as the
service's thread budget gives when 16 decodes are in flight), for `--requests` requests.
Every CUDA result is checked against the CPU's frames first.
"""

from __future__ import annotations

import argparse
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import numpy as np
from cost import CLIPS, REQUESTS, Cell, load_clips, timed

from mmprep.decoders import decode_video, gpu

WAYS: dict[str, dict[str, Any]] = {
    "cpu, 1 thread": {"threads": 1},
    "cpu, all cores": {"threads": 0},
    "cuda (NVDEC)": {"device": "cuda"},
}


def check_same_frames(data: bytes, sampling: dict) -> None:
    cpu, cuda = decode_video(data, **sampling), decode_video(data, **sampling, device="cuda")
    assert cuda.indices.tolist() == cpu.indices.tolist(), "NVDEC picked other frames"
    worst = int(np.abs(cuda.frames.astype(np.int16) - cpu.frames).max()) if len(cpu.frames) else 0
    print(f"  same frames as the CPU; largest pixel difference {worst}")


def frames_decoded(data: bytes, sampling: dict[str, Any], how: dict[str, Any]) -> int:
    return len(decode_video(data, **sampling, **how).frames)


Job = tuple[bytes, dict[str, Any]]  # (video, decode_video's sampling arguments)


def decode_all(pool: ThreadPoolExecutor, work: list[Job], how: dict[str, Any]) -> int:
    """Every job of `work` decoded on `pool`: the number of videos decoded."""
    return len(list(pool.map(lambda job: decode_video(job[0], **job[1], **how), work)))


def per_request(clips: dict[str, bytes], repeats: int) -> None:
    print("\nPer request (median of", repeats, "interleaved): CPU-s / wall s")
    print("| clip | request | " + " | ".join(WAYS) + " | CPU saved by NVDEC vs 1 thread |")
    print("|---|---|" + "---|" * (len(WAYS) + 1))
    for name, data in clips.items():
        for label, sampling in REQUESTS.items():
            check_same_frames(data, sampling)
            cells = {way: Cell() for way in WAYS}
            for _ in range(repeats):
                for way, how in WAYS.items():
                    timed(cells[way], partial(frames_decoded, data, sampling, how))
            saved = cells["cpu, 1 thread"].median("cpu") / cells["cuda (NVDEC)"].median("cpu")
            row = " | ".join(
                f"{cell.median('cpu'):.2f} / {cell.median('wall'):.2f}" for cell in cells.values()
            )
            print(f"| {CLIPS[name][0]} | {label} | {row} | {saved:.1f}x |", flush=True)


def at_concurrency(clips: dict[str, bytes], requests: int, concurrency: int) -> None:
    print(f"\nThroughput, {concurrency} requests in flight, {requests} requests of 32 frames over the clips")
    print("| way | requests/s | CPU-s per request |")
    print("|---|---|---|")
    work: list[Job] = [(data, {"num_frames": 32}) for data in clips.values()] * (requests // len(clips) + 1)
    work = work[:requests]
    ways: dict[str, dict[str, Any]] = {"cpu": {"threads": 1}, "cuda (NVDEC)": {"device": "cuda"}}
    for way, how in ways.items():
        cell = Cell()
        with ThreadPoolExecutor(concurrency) as pool:
            timed(cell, partial(decode_all, pool, work, how))
        print(
            f"| {way} | {requests / cell.median('wall'):.2f} | {cell.median('cpu') / requests:.2f} |",
            flush=True,
        )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clips", nargs="+", choices=list(CLIPS), default=list(CLIPS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--requests", type=int, default=48)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    if not gpu.cuda_usable():
        print("no CUDA device here: nothing to compare")
        return 1
    clips = load_clips(args.clips)
    per_request(clips, args.repeats)
    at_concurrency(clips, args.requests, args.concurrency)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
