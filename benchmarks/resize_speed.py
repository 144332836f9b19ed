"""`resize_bicubic` (resize.py's C kernel: torchvision's exact uint8 arithmetic) against
Pillow's bicubic (within one level of it) and torchvision's own resize where torch is
installed, same frames, one process, interleaved runs; then the kernel writing straight
into Qwen-VL's patch layout (what a 720p image costs the processor, resize and reorder).

    python benchmarks/resize_speed.py                # 1280x720 -> 1288x728 and 1920x1080 -> 448x252
    python benchmarks/resize_speed.py --repeats 5    # a quicker run

Prints the median CPU time of each, the median of the paired ratios against the kernel,
and how many values each lands away from torchvision's where it runs.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
from PIL import Image

from mmprep.families import get
from mmprep.processors import load_processor
from mmprep.processors.patches import PatchWriter
from mmprep.processors.resize import resize_bicubic

CASES = [((720, 1280), (728, 1288)), ((1080, 1920), (252, 448))]


def resize_pillow(frame: np.ndarray, height: int, width: int) -> np.ndarray:
    """Pillow horizontally, then vertically (torchvision's order)."""
    old_height, old_width = frame.shape[:2]
    image = Image.fromarray(frame)
    if width != old_width:
        image = image.resize((width, old_height), Image.Resampling.BICUBIC)
    if height != old_height:
        image = image.resize((width, height), Image.Resampling.BICUBIC)
    return np.asarray(image)


def torchvision_resize() -> Callable[[np.ndarray, int, int], np.ndarray] | None:
    try:
        import torch
        from torchvision.transforms import InterpolationMode
        from torchvision.transforms.v2.functional import resize
    except ImportError:
        return None

    def run(frame: np.ndarray, height: int, width: int) -> np.ndarray:
        chw = torch.from_numpy(frame).permute(2, 0, 1)
        out = resize(chw, [height, width], interpolation=InterpolationMode.BICUBIC, antialias=True)
        return out.permute(1, 2, 0).numpy()

    return run


def cpu_seconds(function: Callable[..., object], *args: object) -> float:
    start = time.process_time()
    function(*args)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    others: dict[str, Callable[[np.ndarray, int, int], np.ndarray]] = {"Pillow": resize_pillow}
    torchvision = torchvision_resize()
    if torchvision is not None:
        others["torchvision"] = torchvision
    for (height, width), (out_height, out_width) in CASES:
        frame = rng.integers(
            0, 256, (height, width, 3), dtype=np.uint8
        )  # noise: content does not change the work
        ours = resize_bicubic(frame, out_height, out_width)
        times: dict[str, list[float]] = {"kernel": [], **{name: [] for name in others}}
        for _ in range(args.repeats):
            times["kernel"].append(cpu_seconds(resize_bicubic, frame, out_height, out_width))
            for name, other in others.items():
                times[name].append(cpu_seconds(other, frame, out_height, out_width))
        kernel_ms = statistics.median(times["kernel"]) * 1e3
        line = f"{width}x{height} -> {out_width}x{out_height}: kernel {kernel_ms:.2f} ms"
        for name in others:
            ratio = statistics.median(a / b for a, b in zip(times[name], times["kernel"], strict=True))
            line += f", {name} {statistics.median(times[name]) * 1e3:.2f} ms ({ratio:.1f}x the kernel's)"
        if torchvision is not None:
            theirs = torchvision(frame, out_height, out_width)
            line += f"; values unlike torchvision's: kernel {int((ours != theirs).sum())} of {theirs.size}"
        print(line, flush=True)
    # A 720p image into Qwen2.5-VL's patches (uint8: vLLM's default pixel form), as the processor writes it.
    config = load_processor("qwen2_5_vl").with_raw_pixels().image_config
    assert config is not None
    frame = rng.integers(0, 256, (720, 1280, 3), dtype=np.uint8)

    def into_patches() -> None:
        PatchWriter(config, get("qwen2_5_vl").image, 1, 728, 1288).write(frame, 0, copies=2)

    patches = statistics.median(cpu_seconds(into_patches) for _ in range(args.repeats))
    print(f"1280x720 into Qwen2.5-VL's uint8 patches (resize, reorder, 2 copies): {patches * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
