"""Decoder speed and memory, each against its baselines from the same run.

    python benchmarks/decode_speed.py            # the figures quoted in docs/benchmarks.md
    python benchmarks/decode_speed.py --quick    # short clips, a smoke run

For 32 frames of each clip: decode_video against decoding every frame with PyAV (the
floor any full-decode loader pays), transformers' PyAV loop and vLLM's OpenCV loader
(when OpenCV is installed: pip install -e '.[opencv]'); and the peak RSS decode_video
adds, in a fresh process. Clips are camera-like footage generated once into
benchmarks/.cache (see footage.py). Every timing is the median of interleaved repeats,
so a noisy neighbour slows the baselines and mmprep alike; the ratio is what to read.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from footage import camera_clip

from mmprep.bench.decode import time_loaders
from mmprep.decoders import decode_video  # noqa: F401  (the RSS child imports it from here)

CLIPS = {
    # name: (file, width, height, seconds). The 1-minute 480p clip is there to show that
    # peak memory follows the frames returned, not the video's length.
    "10min_480p": ("h264_480p_600s.mp4", 854, 480, 600),
    "1min_480p": ("h264_480p_60s.mp4", 854, 480, 60),
    "60s_1080p": ("h264_1080p_60s.mp4", 1920, 1080, 60),
}
QUICK = {
    "1min_480p": ("h264_480p_60s.mp4", 854, 480, 60),
    "10s_1080p": ("h264_1080p_10s.mp4", 1920, 1080, 10),
}


def peak_rss_mib(clip: Path, work: str) -> float:
    """Peak RSS of a fresh process that reads the clip and then does `work`.

    Read from VmHWM: getrusage's ru_maxrss would carry over this (large) process's peak
    into the child across fork and exec.
    """
    here = Path(__file__).resolve().parent
    code = "\n".join(
        [
            "from decode_speed import *",
            f"data = open({str(clip)!r}, 'rb').read()",
            work,
            "print(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1])",
        ]
    )
    # run in this folder: `python -c` imports from the working directory
    out = subprocess.run([sys.executable, "-c", code], cwd=here, capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="short clips, for a smoke run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    clips = QUICK if args.quick else CLIPS

    results: dict[str, dict[str, Any]] = {}
    for label, (name, width, height, seconds) in clips.items():
        path = camera_clip(name, width, height, seconds)
        data = path.read_bytes()
        timed = {t.loader: t.seconds for t in time_loaders(data, 32, args.repeats)}
        mmprep = timed.pop("mmprep decode_video")
        assert mmprep is not None, "mmprep's own decode failed"
        base = peak_rss_mib(path, "pass")
        sampled = peak_rss_mib(path, "video = decode_video(data, num_frames=32)")
        results[label] = {
            "clip": f"{width}x{height}, {seconds} s, {len(data) / 2**20:.1f} MiB",
            "mmprep_32_frames_s": round(mmprep, 3),
            "baselines_s": {loader: None if t is None else round(t, 3) for loader, t in timed.items()},
            "baseline_over_mmprep": {
                loader: None if t is None else round(t / mmprep, 2) for loader, t in timed.items()
            },
            "returned_frames_mib": round(32 * width * height * 3 / 2**20, 1),
            "peak_rss_over_baseline_mib": round(sampled - base, 1),
        }
        print(f"{label}: {json.dumps(results[label])}", flush=True)

    loaders = list(next(iter(results.values()))["baselines_s"])
    print()
    print(
        "| clip | mmprep, 32 frames | "
        + " | ".join(f"{loader} (x mmprep)" for loader in loaders)
        + " | returned frames | peak RSS added |"
    )
    print("|---|---|" + "---|" * len(loaders) + "---|---|")
    for label, r in results.items():
        cells = [
            "failed"
            if r["baselines_s"][loader] is None
            else f"{r['baselines_s'][loader]:.2f} s ({r['baseline_over_mmprep'][loader]:.2f}x)"
            for loader in loaders
        ]
        print(
            f"| {label} ({r['clip']}) | {r['mmprep_32_frames_s']:.2f} s | "
            + " | ".join(cells)
            + f" | {r['returned_frames_mib']:.0f} MiB | {r['peak_rss_over_baseline_mib']:.0f} MiB |"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
