"""Golden outputs of transformers' Qwen-VL processors, made once, checked by
tests/processors/test_processors_golden.py with numpy alone.

    .venv/bin/python tests/data/processors/make_goldens.py   # needs torch, torchvision, transformers

Inputs are generated from a seed (`case_input`), so only the outputs are stored, in
goldens.npz beside cases.json (what each case ran, and the keys, shapes, dtypes and grids
transformers returned). Where no resize happens the float32 values are stored as they are;
where one does, they are stored as uint8 levels (value * std / rescale_factor + mean /
rescale_factor, rounded), which is exact for transformers' output; the test compares
those levels for equality.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

SMALL = {"size": {"shortest_edge": 56 * 56, "longest_edge": 28 * 28 * 30}}
SMALL3 = {"size": {"shortest_edge": 64 * 64, "longest_edge": 32 * 32 * 60}}

# name: (processor, overrides, "video" | "image", input shape, what it covers)
CASES: dict[str, tuple[str, dict, str, tuple[int, ...], str]] = {
    "qwen2_video_exact": ("qwen2_vl", SMALL, "video", (3, 56, 84, 3), "no resize, odd frame count"),
    "qwen2_video_odd": ("Qwen/Qwen2-VL-7B-Instruct", {}, "video", (4, 97, 131, 3), "odd sizes"),
    "qwen2_video_tiny": ("qwen2_vl", {}, "video", (2, 20, 30, 3), "min_pixels (class defaults)"),
    "qwen2_video_over": ("qwen2_vl", SMALL, "video", (2, 240, 320, 3), "over max_pixels"),
    "qwen2_image_odd": ("Qwen/Qwen2-VL-7B-Instruct", {}, "image", (97, 131, 3), "odd sizes"),
    "qwen2_image_exact": ("qwen2_vl", SMALL, "image", (56, 84, 3), "no resize"),
    "qwen2_5_video_single": ("Qwen/Qwen2.5-VL-7B-Instruct", {}, "video", (1, 75, 101, 3), "one frame"),
    "qwen2_5_video_odd": ("Qwen/Qwen2.5-VL-7B-Instruct", {}, "video", (5, 63, 129, 3), "odd sizes and count"),
    "qwen2_5_video_over": ("qwen2_5_vl", SMALL, "video", (2, 300, 170, 3), "over max_pixels, portrait"),
    "qwen2_5_image_tiny": ("Qwen/Qwen2.5-VL-7B-Instruct", {}, "image", (11, 30, 3), "min_pixels"),
    "qwen2_5_image_over": ("qwen2_5_vl", SMALL, "image", (250, 333, 3), "over max_pixels"),
    "qwen3_video_exact": ("qwen3_vl", SMALL3, "video", (3, 64, 96, 3), "no resize, odd frame count"),
    "qwen3_video_odd": ("Qwen/Qwen3-VL-8B-Instruct", {}, "video", (3, 97, 131, 3), "odd sizes and count"),
    "qwen3_video_tiny": ("Qwen/Qwen3-VL-8B-Instruct", {}, "video", (4, 9, 40, 3), "sides under the patch"),
    "qwen3_video_defaults": ("qwen3_vl", {}, "video", (2, 48, 64, 3), "min_pixels (class defaults)"),
    "qwen3_video_over": ("qwen3_vl", SMALL3, "video", (2, 200, 300, 3), "over max_pixels"),
    "qwen3_video_single": (
        "qwen3_vl",
        SMALL3,
        "video",
        (1, 70, 90, 3),
        "one frame (padded; transformers refuses)",
    ),
    "qwen3_image_odd": ("Qwen/Qwen3-VL-8B-Instruct", {}, "image", (131, 97, 3), "odd sizes, min_pixels"),
    "qwen3_image_over": ("qwen3_vl", SMALL3, "image", (300, 200, 3), "over max_pixels"),
}


def case_input(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Smooth gradients, hard edges (a checkerboard of 3-pixel squares) and grain: the
    edges are where resize orders and rounding show."""
    rng = np.random.default_rng(seed)
    frames = shape[:-3] or (1,)
    height, width = shape[-3:-1]
    rows, cols = np.mgrid[0:height, 0:width]
    y, x = rows / max(height, width), cols / max(height, width)
    checker = ((rows // 3 + cols // 3) % 2 * 2 - 1)[..., None]
    out = np.empty(frames + (height, width, 3), np.uint8)
    for t in range(frames[0]):
        phase = rng.uniform(0, 6, 3)
        base = np.stack([np.sin(4 * x + phase[c] + t) * np.cos(3 * y - phase[c]) for c in range(3)], axis=-1)
        out[t] = (128 + 70 * base + 50 * checker + rng.normal(0, 8, base.shape)).clip(0, 255).astype(np.uint8)
    return out.reshape(shape)


def to_levels(values: np.ndarray, config) -> np.ndarray:
    """Normalized values back to the uint8 levels they came from (per channel column)."""
    per_channel = values.shape[1] // 3
    std = np.repeat(np.asarray(config.image_std) / config.rescale_factor, per_channel)
    mean = np.repeat(np.asarray(config.image_mean) / config.rescale_factor, per_channel)
    return np.rint(values.astype(np.float64) * std + mean).clip(0, 255).astype(np.uint8)


def transformers_output(processor, kind: str, pixels: np.ndarray) -> dict[str, np.ndarray]:
    from transformers import Qwen2VLImageProcessor, Qwen2VLVideoProcessor, Qwen3VLVideoProcessor

    if kind == "image":
        image_reference = Qwen2VLImageProcessor(**processor.image_config.transformers_kwargs())
        return dict(image_reference(images=[pixels], return_tensors="np"))
    cls = Qwen3VLVideoProcessor if processor.family == "qwen3_vl" else Qwen2VLVideoProcessor
    reference = cls(**processor.video_config.transformers_kwargs())
    if len(pixels) < reference.temporal_patch_size:  # transformers refuses it; ours pads first
        pad = np.repeat(pixels[-1:], reference.temporal_patch_size - len(pixels), axis=0)
        pixels = np.concatenate([pixels, pad])
    return dict(reference(videos=[pixels], do_sample_frames=False, return_tensors="np"))


def main() -> None:
    import warnings

    import torch
    import torchvision
    import transformers

    from mmprep.processors import load_processor

    warnings.simplefilter("ignore")
    arrays, cases = {}, {}
    for seed, (name, (processor_name, overrides, kind, shape, covers)) in enumerate(CASES.items()):
        processor = load_processor(processor_name, **overrides)
        config = processor.image_config if kind == "image" else processor.video_config
        if config is None:
            raise ValueError(f"{name}: {processor_name} has no image processor config")
        pixels = case_input(shape, seed)
        output = transformers_output(processor, kind, pixels)
        values_key, grid_key = list(output)
        resized = processor.image_size(*shape[:2]) if kind == "image" else processor.video_size(*shape[:3])
        exact = resized == shape[-3:-1]
        values = output[values_key]
        arrays[f"{name}/{values_key}"] = values if exact else to_levels(values, config)
        cases[name] = {
            "processor": processor_name,
            "overrides": overrides,
            "kind": kind,
            "shape": list(shape),
            "seed": seed,
            "covers": covers,
            "stored": "exact" if exact else "levels",
            "keys": list(output),
            "shapes": {key: list(value.shape) for key, value in output.items()},
            "dtypes": {key: str(value.dtype) for key, value in output.items()},
            "grid": output[grid_key].tolist(),
            "num_tokens": int(np.prod(output[grid_key][0])) // config.merge_size**2,
        }
    versions = {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
    }
    # allow_pickle (its default) named, so mypy does not take **arrays for it
    np.savez_compressed(HERE / "goldens.npz", allow_pickle=True, **arrays)
    (HERE / "cases.json").write_text(json.dumps({"made_with": versions, "cases": cases}, indent=1) + "\n")
    print(f"{len(cases)} cases, {(HERE / 'goldens.npz').stat().st_size / 1024:.0f} KiB, {versions}")


if __name__ == "__main__":
    main()
