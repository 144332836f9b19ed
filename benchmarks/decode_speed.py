"""Decoder speed and memory, each against its baseline from the same run.

    python benchmarks/decode_speed.py            # the figures quoted in the README
    python benchmarks/decode_speed.py --quick    # short clips, a smoke run

Clips are camera-like footage generated once into benchmarks/.cache (see footage.py).
Every timing is the median of interleaved repeats, so a noisy neighbour slows the
baseline and mmprep alike; the ratio is what to read.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from footage import camera_clip

from app.bench.decode import decode_every_frame, median_seconds
from decoders import decode_video

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


def sample_32(data: bytes) -> int:
    return len(decode_video(data, num_frames=32).frames)


def peak_rss_mib(clip: Path, work: str) -> float:
    """Peak RSS of a fresh process that reads the clip and then does `work`.

    Read from VmHWM: getrusage's ru_maxrss would carry over this (large) process's peak
    into the child across fork and exec.
    """
    here = Path(__file__).resolve().parent
    code = "\n".join(
        [
            f"import sys; sys.path[:0] = [{str(here.parent)!r}, {str(here)!r}]",
            "from decode_speed import *",
            f"data = open({str(clip)!r}, 'rb').read()",
            work,
            "print(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1])",
        ]
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short clips, for a smoke run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    clips = QUICK if args.quick else CLIPS

    results = {}
    for label, (name, width, height, seconds) in clips.items():
        path = camera_clip(name, width, height, seconds)
        data = path.read_bytes()
        timed = median_seconds({"every_frame": decode_every_frame, "mmprep_32": sample_32}, data, args.repeats)
        frames_mib = 32 * width * height * 3 / 2**20
        base = peak_rss_mib(path, "pass")
        sampled = peak_rss_mib(path, "video = decode_video(data, num_frames=32)")
        results[label] = {
            "clip": f"{width}x{height}, {seconds} s, {len(data) / 2**20:.1f} MiB",
            "every_frame_s": round(timed["every_frame"], 3),
            "mmprep_32_frames_s": round(timed["mmprep_32"], 3),
            "speedup": round(timed["every_frame"] / timed["mmprep_32"], 2),
            "returned_frames_mib": round(frames_mib, 1),
            "peak_rss_over_baseline_mib": round(sampled - base, 1),
        }
        print(f"{label}: {json.dumps(results[label])}", flush=True)

    print()
    print("| clip | decode every frame | mmprep, 32 frames | speed-up | returned frames | peak RSS added |")
    print("|---|---|---|---|---|---|")
    for label, r in results.items():
        print(
            f"| {label} ({r['clip']}) | {r['every_frame_s']:.2f} s | {r['mmprep_32_frames_s']:.2f} s "
            f"| {r['speedup']:.2f}x | {r['returned_frames_mib']:.0f} MiB | {r['peak_rss_over_baseline_mib']:.0f} MiB |"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
