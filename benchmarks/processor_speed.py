"""The processors against transformers' own (torch + torchvision), same frames, one process.

    python benchmarks/processor_speed.py               # the figures quoted in docs/benchmarks.md
    python benchmarks/processor_speed.py --repeats 3   # a quicker run

For each processor: 32 frames of 1280x720 through transformers' video processor built with
the same configuration and through ours, in interleaved runs (a noisy neighbour slows both
alike): the median of each and the median of the paired ratios; how far ours lands from
transformers' (in uint8 levels after normalization); and the peak memory each adds, in a fresh process
(VmHWM less the RSS before processing: Pillow's buffers are not seen by tracemalloc).
Needs torch, torchvision and transformers, which mmprep itself does not.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from mmprep.processors import Processor, load_processor

PROCESSORS = ["qwen2_vl", "Qwen/Qwen2.5-VL-7B-Instruct", "Qwen/Qwen3-VL-8B-Instruct"]
FRAMES, HEIGHT, WIDTH = 32, 720, 1280


def test_frames(count: int = FRAMES, height: int = HEIGHT, width: int = WIDTH) -> np.ndarray:
    """Deterministic frames with smooth gradients and fine grain (content does not change
    the work either processor does, but this keeps the tolerance figures meaningful)."""
    rng = np.random.default_rng(12)
    y, x = np.mgrid[0:height, 0:width]
    frames = np.empty((count, height, width, 3), np.uint8)
    for t in range(count):
        base = np.stack([x * 0.2 + t * 3, y * 0.3 + x * 0.05, (x + y) * 0.1 - t * 2], axis=-1)
        frames[t] = (base + rng.normal(0, 12, base.shape)).clip(0, 255).astype(np.uint8)
    return frames


def transformers_processor(processor: Processor):
    """transformers' video processor with the same configuration as ours."""
    from transformers import Qwen2VLVideoProcessor, Qwen3VLVideoProcessor

    cls = Qwen3VLVideoProcessor if processor.family == "qwen3_vl" else Qwen2VLVideoProcessor
    return cls(**processor.video_config.transformers_kwargs())


def run_transformers(reference, frames: np.ndarray) -> dict[str, np.ndarray]:
    return dict(reference(videos=[frames], do_sample_frames=False, return_tensors="np"))


def levels_off(ours: np.ndarray, theirs: np.ndarray, std) -> tuple[float, float]:
    """(share of values within one uint8 level, largest difference in levels)."""
    level = np.repeat(1 / 255 / np.asarray(std, np.float32), ours.shape[1] // 3)
    off = np.abs(ours - theirs) / level
    return float((off <= 1.001).mean()), float(off.max())


def timed(work) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def peak_added_mib(name: str, side: str, threads: int | None) -> float:
    """Peak memory the processing adds to a fresh process holding the frames already."""
    here = Path(__file__).resolve().parent
    work = (
        "transformers_processor(proc)(videos=[frames], do_sample_frames=False, return_tensors='np')"
        if side == "transformers"
        else f"proc.process_video(frames, threads={threads})"
    )
    code = "\n".join(
        [
            "import warnings; warnings.simplefilter('ignore')",
            "from processor_speed import *",
            f"proc = load_processor({name!r}); frames = test_frames()",
            "import transformers.models.qwen2_vl.video_processing_qwen2_vl, torchvision"
            if side == "transformers"
            else "",
            "rss = lambda key: int(next(line for line in open('/proc/self/status')"
            " if line.startswith(key)).split()[1])",
            "before = rss('VmRSS')",
            f"out = {work}",
            "print(rss('VmHWM') - before)",
        ]
    )
    # Run from this folder, so the child imports this script as a module.
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=here
    )
    return int(result.stdout.split()[-1]) / 1024


def measure(name: str, frames: np.ndarray, repeats: int, threads: int | None) -> None:
    processor = load_processor(name)
    reference = transformers_processor(processor)
    ours = processor.process_video(frames, threads=threads)  # warm up both
    theirs = run_transformers(reference, frames)
    within, worst = levels_off(
        ours.tensors["pixel_values_videos"], theirs["pixel_values_videos"], processor.video_config.image_std
    )
    ours_times, theirs_times = [], []
    for _ in range(repeats):
        theirs_times.append(timed(lambda: run_transformers(reference, frames)))
        ours_times.append(timed(lambda: processor.process_video(frames, threads=threads)))
    ours_s, theirs_s = statistics.median(ours_times), statistics.median(theirs_times)
    # each run of ours against the transformers run just before it: a neighbour's load that
    # comes and goes slows both of a pair alike
    speedup = statistics.median(theirs / ours for theirs, ours in zip(theirs_times, ours_times, strict=True))
    output = ours.tensors["pixel_values_videos"]
    frame_mib = HEIGHT * WIDTH * 3 / 2**20
    ours_peak = peak_added_mib(name, "ours", threads)
    theirs_peak = peak_added_mib(name, "transformers", None)
    grid = ours.tensors["video_grid_thw"][0].tolist()
    print(
        f"| {name} | {grid} | {theirs_s * 1000:.0f} ms | {ours_s * 1000:.0f} ms | **{speedup:.2f}x** "
        f"| {within * 100:.4f}% | {worst:.2f} | {output.nbytes / 2**20:.0f} | {theirs_peak:.0f} "
        f"| {ours_peak:.0f} "
        f"({(ours_peak - output.nbytes / 2**20) / frame_mib:+.1f} frames) |",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=11, help="interleaved runs of each (default 11)")
    parser.add_argument(
        "--threads", type=int, default=None, help="our threads (default: every core, as torch)"
    )
    parser.add_argument(
        "processors", nargs="*", default=PROCESSORS, help="family names, preset ids or folders"
    )
    args = parser.parse_args()

    import warnings

    import torch

    warnings.simplefilter("ignore")  # transformers' notices about cap_pixels_per_frame's future default
    frames = test_frames()
    print(
        f"{FRAMES} frames of {WIDTH}x{HEIGHT}; torch {torch.__version__} "
        f"on {torch.get_num_threads()} threads; medians of {args.repeats} interleaved runs\n"
    )
    print(
        "| processor | grid (t, h, w) | transformers | ours | speed-up (paired) | within 1 level "
        "| max levels | output MiB | transformers peak MiB | ours peak MiB (beyond the output) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.processors:
        measure(name, frames, args.repeats, args.threads)


if __name__ == "__main__":
    main()
