"""What a request costs in CPU-seconds: decode_video against the loaders users pick instead.

    apt-get install ffmpeg                 # torchcodec loads the system FFmpeg libraries
    pip install -e '.[bench-peers]'        # torch 2.13 (CPU) + torchcodec 0.13, decord2, OpenCV
    python benchmarks/cost.py              # both tables, 3 interleaved repeats (about 30 min on 2 cores)
    python benchmarks/cost.py --repeats 1 --clips vp9_720p_60s --modes one --output cost.json

At scale every core is busy, so the bill is CPU time, not wall time. Each request is timed
by getrusage(RUSAGE_SELF) before and after (user + system time of every thread of the
process, so decoder threads count) and by the wall clock. Everything runs in one process,
interleaved: each repeat runs every loader on every clip and request in turn, so a noisy
neighbour slows all of them alike; medians are reported. Nothing is garbage-collected
between runs: a loader whose memory outlives its request pays for that as a service would.

Requests: 32 frames evenly spread, and fps=2 capped at 120 frames (mmprep's sampling).
Every peer is asked for as many frames as mmprep returned, spread by np.linspace over its
own frame count (vLLM's rule), and must return that many. decode-all decodes every frame
and converts none: the floor of any loader that decodes the whole video.

Threads ("one": one decoder thread each; "all": the whole machine):
- mmprep: decode_video(threads=1), or threads=0 (one per core);
- torchcodec: VideoDecoder(num_ffmpeg_threads=1 or 0 = FFmpeg's choice), torch.set_num_threads;
- decord2: VideoReader(num_threads=1 or 0 = automatic);
- vLLM's OpenCV loop: CAP_PROP_N_THREADS=1 and cv2.setNumThreads(1), or OpenCV's defaults;
- transformers' PyAV loop and decode-all: the codec context's thread_count=1, or PyAV's default.
A peer that is not installed is reported as missing; one that fails, with its error.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mmprep.bench.config import SyntheticOptions
from mmprep.bench.decode import decode_every_frame, transformers_pyav, vllm_opencv
from mmprep.bench.inputs import generate_synthetic
from mmprep.decoders import decode_video

# name: (label, size, seconds, codec). libx264's default keyframe interval is 250 frames.
CLIPS = {
    "h264_1080p_60s": ("H.264 1080p 60 s (GOP 250)", "1920x1080", 60, "h264"),
    "vp9_720p_60s": ("VP9 720p 60 s", "1280x720", 60, "vp9"),
    "h264_480p_600s": ("H.264 480p 600 s", "854x480", 600, "h264"),
}
REQUESTS: dict[str, dict[str, Any]] = {
    "32 frames": {"num_frames": 32},
    "fps 2": {"fps": 2.0, "max_frames": 120},
}
MODES = {"one": 1, "all": 0}  # mode: the threads argument each loader is given (0: its own default)
WARM_UP = Path(__file__).resolve().parent.parent / "tests" / "data" / "media" / "bt709_720p_h264.mp4"

Peer = Callable[[bytes, int, int], int]  # (video bytes, frames wanted, threads) -> frames returned


def mmprep_frames(data: bytes, sampling: dict, threads: int) -> int:
    return len(decode_video(data, **sampling, threads=threads).frames)


def torchcodec_frames(data: bytes, count: int, threads: int) -> int:
    import torch
    from torchcodec.decoders import VideoDecoder

    torch.set_num_threads(threads or os.cpu_count() or 1)
    decoder = VideoDecoder(data, dimension_order="NHWC", num_ffmpeg_threads=threads, seek_mode="exact")
    indices = np.linspace(0, decoder.metadata.num_frames - 1, count, dtype=int).tolist()
    return len(decoder.get_frames_at(indices).data)


def decord_frames(data: bytes, count: int, threads: int) -> int:
    import decord

    reader = decord.VideoReader(io.BytesIO(data), num_threads=threads)
    indices = np.linspace(0, len(reader) - 1, count, dtype=int).tolist()
    return len(reader.get_batch(indices).asnumpy())


def opencv_frames(data: bytes, count: int, threads: int) -> int:
    import cv2

    cv2.setNumThreads(threads or -1)  # -1: OpenCV's default, one per core
    return vllm_opencv(data, count, threads)


def decode_all(data: bytes, count: int, threads: int) -> int:
    return decode_every_frame(data, threads=threads)


PEERS: dict[str, tuple[Peer, str | None]] = {  # name: (loader, module it needs)
    "torchcodec": (torchcodec_frames, "torchcodec"),
    "decord2": (decord_frames, "decord"),
    "OpenCV (vLLM)": (opencv_frames, "cv2"),
    "transformers PyAV": (transformers_pyav, None),
    "decode-all": (decode_all, None),
}
EXACT_COUNT = set(PEERS) - {"decode-all"}


def installed(module: str | None) -> bool:
    if module is None:
        return True
    try:
        __import__(module)
    except ImportError:
        return False
    return True


@dataclass
class Cell:
    """One loader on one clip, request and thread mode: its runs, or why it has none."""

    user: list[float] = field(default_factory=list)
    sys: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)
    frames: int | None = None
    error: str | None = None

    def median(self, what: str) -> float:
        if what == "cpu":
            return statistics.median(u + s for u, s in zip(self.user, self.sys, strict=True))
        return statistics.median(getattr(self, what))

    def summary(self) -> dict:
        if self.error or not self.wall:
            return {"error": self.error}
        return {
            "frames": self.frames,
            **{k: round(self.median(k), 3) for k in ("cpu", "user", "sys", "wall")},
        }


def timed(cell: Cell, run: Callable[[], int]) -> int | None:
    """Run once, adding its CPU and wall time to `cell`; a failure is recorded there instead."""
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    try:
        frames = run()
    except Exception as error:  # each peer fails its own way (cv2.error, RuntimeError...)
        cell.error = f"{type(error).__name__}: {error}"[:120]
        return None
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF)
    cell.user.append(after.ru_utime - before.ru_utime)
    cell.sys.append(after.ru_stime - before.ru_stime)
    cell.wall.append(wall)
    cell.frames = frames
    return frames


def run_repeat(results, clips: dict[str, bytes], peers: dict[str, Peer], modes: list[str]) -> None:
    """One repeat: every mode, clip, request and loader, mmprep first in each (its frame
    count is what the peers are asked for)."""
    for mode in modes:
        threads = MODES[mode]
        for clip, data in clips.items():
            for request, sampling in REQUESTS.items():
                cells = results[mode][clip][request]
                count = timed(cells["mmprep"], partial(mmprep_frames, data, sampling, threads))
                for name, peer in peers.items():
                    cell = cells[name]
                    if cell.error or count is None:
                        continue
                    frames = timed(cell, partial(peer, data, count, threads))
                    if frames is not None and name in EXACT_COUNT and frames != count:
                        cell.error = f"returned {frames} frames, not mmprep's {count}"
                print(
                    f"  {mode} thread(s), {clip}, {request}: "
                    + ", ".join(
                        f"{n} {c.user[-1] + c.sys[-1]:.2f}"
                        for n, c in cells.items()
                        if c.wall and not c.error
                    ),
                    file=sys.stderr,
                    flush=True,
                )


def table(results, mode: str, loaders: list[str], missing: list[str]) -> str:
    """Markdown: median CPU-seconds per request (system part in brackets), or with the whole
    machine, wall seconds and CPU-seconds."""
    lines = [
        "| clip, request | " + " | ".join(loaders) + " | mmprep / cheapest peer (CPU) |",
        "|---|" + "---|" * (len(loaders) + 1),
    ]
    for clip, requests in results[mode].items():
        for request, cells in requests.items():
            row = [_cell(cells[name], mode) for name in loaders]
            peers = [
                cells[n].median("cpu")
                for n in loaders
                if n in EXACT_COUNT and cells[n].wall and not cells[n].error
            ]
            mine = cells["mmprep"]
            ratio = f"{mine.median('cpu') / min(peers):.2f}" if peers and mine.wall else "–"
            lines.append(f"| {CLIPS[clip][0]}, {request} | " + " | ".join(row) + f" | {ratio} |")
    if missing:
        lines.append("\nnot installed: " + ", ".join(missing))
    return "\n".join(lines)


def _cell(cell: Cell, mode: str) -> str:
    if cell.error:
        return f"failed: {cell.error}"
    if not cell.wall:
        return "–"
    if mode == "one":
        return f"{cell.median('cpu'):.2f} ({cell.median('sys'):.2f} sys)"
    return f"{cell.median('wall'):.2f} s, {cell.median('cpu'):.2f} CPU-s"


def load_clips(names: list[str]) -> dict[str, bytes]:
    """The clips, from the synthetic cache bench uses (made there first when missing)."""
    clips = {}
    for name in names:
        _, size, seconds, codec = CLIPS[name]
        options = SyntheticOptions(
            synthetic=1, synthetic_size=size, synthetic_duration=seconds, synthetic_codec=codec
        )
        (path,) = generate_synthetic(options, note=lambda text: print(text, file=sys.stderr))
        clips[name] = path.read_bytes()
    return clips


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats; medians are reported")
    parser.add_argument("--clips", nargs="+", choices=list(CLIPS), default=list(CLIPS))
    parser.add_argument(
        "--modes",
        nargs="+",
        choices=list(MODES),
        default=list(MODES),
        help="one: one decoder thread per loader; all: the whole machine",
    )
    parser.add_argument("--peers", nargs="+", choices=list(PEERS), default=list(PEERS))
    parser.add_argument("--output", type=Path, help="also write the medians here as JSON")
    args = parser.parse_args()

    peers = {name: PEERS[name][0] for name in args.peers if installed(PEERS[name][1])}
    missing = [f"{name} ({PEERS[name][1]} does not import)" for name in args.peers if name not in peers]
    clips = load_clips(args.clips)
    warm_up = WARM_UP.read_bytes()  # first calls pay imports and one-time set-up: not a request's cost
    for name, peer in list(peers.items()):
        try:
            peer(warm_up, 2, 1)
        except Exception as error:  # reported below, as for a failing run
            print(f"{name} fails on the warm-up clip: {type(error).__name__}: {error}", file=sys.stderr)
    decode_video(warm_up, num_frames=2, threads=1)

    loaders = ["mmprep", *peers]
    results = {
        mode: {clip: {request: {name: Cell() for name in loaders} for request in REQUESTS} for clip in clips}
        for mode in args.modes
    }
    for repeat in range(args.repeats):
        print(f"repeat {repeat + 1} of {args.repeats}", file=sys.stderr, flush=True)
        run_repeat(results, clips, peers, args.modes)

    titles = {
        "one": "CPU-seconds per request, one decoder thread each (system time in brackets)",
        "all": f"The whole machine ({os.cpu_count()} cores): wall seconds and CPU-seconds per request",
    }
    for mode in args.modes:
        print(f"\n{titles[mode]}, median of {args.repeats}:\n")
        print(table(results, mode, loaders, missing))
    if args.output:
        summary = {
            mode: {
                clip: {
                    request: {name: cell.summary() for name, cell in cells.items()}
                    for request, cells in requests.items()
                }
                for clip, requests in clips_.items()
            }
            for mode, clips_ in results.items()
        }
        args.output.write_text(
            json.dumps({"repeats": args.repeats, "missing": missing, "results": summary}, indent=2)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
