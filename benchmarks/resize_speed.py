"""`resize_bicubic` (exact integer numpy, as torchvision) against the two Pillow passes it
replaced (within one level), same frames, one process, interleaved runs.

    python benchmarks/resize_speed.py                # 1280x720 -> 1288x728 and 1920x1080 -> 448x252
    python benchmarks/resize_speed.py --repeats 5    # a quicker run

Prints the median time of each, the median of the paired ratios, and how many values each
lands away from torchvision's resize when torch and torchvision are installed.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from PIL import Image

from mmprep.processors.resize import resize_bicubic

CASES = [((720, 1280), (728, 1288)), ((1080, 1920), (252, 448))]


def resize_pillow(frame: np.ndarray, height: int, width: int) -> np.ndarray:
    """The previous resize: Pillow horizontally, then vertically (torchvision's order)."""
    old_height, old_width = frame.shape[:2]
    image = Image.fromarray(frame)
    if width != old_width:
        image = image.resize((width, old_height), Image.Resampling.BICUBIC)
    if height != old_height:
        image = image.resize((width, height), Image.Resampling.BICUBIC)
    return np.asarray(image)


def resize_torchvision(frame: np.ndarray, height: int, width: int) -> np.ndarray | None:
    try:
        import torch
        from torchvision.transforms import InterpolationMode
        from torchvision.transforms.v2.functional import resize
    except ImportError:
        return None
    chw = torch.from_numpy(frame).permute(2, 0, 1)
    out = resize(chw, [height, width], interpolation=InterpolationMode.BICUBIC, antialias=True)
    return out.permute(1, 2, 0).numpy()


def timed(resize, *args) -> float:
    start = time.perf_counter()
    resize(*args)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    for (height, width), (out_height, out_width) in CASES:
        frame = rng.integers(
            0, 256, (height, width, 3), dtype=np.uint8
        )  # noise: content does not change the work
        ours, pillow = (
            resize_bicubic(frame, out_height, out_width),
            resize_pillow(frame, out_height, out_width),
        )
        theirs = resize_torchvision(frame, out_height, out_width)
        times: dict[str, list[float]] = {"numpy": [], "pillow": []}
        for _ in range(args.repeats):
            times["numpy"].append(timed(resize_bicubic, frame, out_height, out_width))
            times["pillow"].append(timed(resize_pillow, frame, out_height, out_width))
        ratio = statistics.median(a / b for a, b in zip(times["numpy"], times["pillow"], strict=True))
        numpy_ms, pillow_ms = (statistics.median(times[side]) * 1e3 for side in ("numpy", "pillow"))
        line = (
            f"{width}x{height} -> {out_width}x{out_height}: numpy {numpy_ms:.1f} ms, "
            f"Pillow {pillow_ms:.1f} ms, numpy/Pillow {ratio:.2f}x"
        )
        if theirs is not None:
            line += (
                f"; values unlike torchvision's: numpy {int((ours != theirs).sum())}, "
                f"Pillow {int((pillow != theirs).sum())} of {theirs.size}"
            )
        print(line, flush=True)


if __name__ == "__main__":
    main()
