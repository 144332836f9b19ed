"""Render speed: a chat request to its prompt token ids (template + tokens + placeholder
expansion; the vision processor excluded), mmprep's Renderer against transformers, in one
process, interleaved.

    python benchmarks/render_speed.py            # the figures quoted in the README
    python benchmarks/render_speed.py --quick    # fewer repeats, a smoke run

Two requests, on the qwen3_vl test model folder (the published template, the real Qwen
vocabulary; tests/support/model_folder.py):
- a text-only multi-turn chat of about 2k tokens: Renderer.render against transformers'
  `processor.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)`;
- one 32-frame video (16 temporal blocks of 720p frames' grid, with per-block timestamps):
  Renderer.render against `processor.apply_chat_template(...)` for the text, then the
  processor's own text expansion (`replace_video_token` + `get_text_with_replacements`)
  and its tokenizer on the expanded text, with the video's grid and metadata made once
  beforehand (the pixel work is excluded on both sides).
Each figure is the median of interleaved repeats; the ratio is what to read. Also the peak
Python memory one render allocates (tracemalloc): the tokenizer and template are the model
folder's, loaded once per process, so a request allocates its prompt and little else. Needs
torch and transformers (the test extra).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's root: tests.support

from mmprep.interface.prepared import MediaItem
from mmprep.model import load_model_folder
from mmprep.processors import ProcessedMedia
from mmprep.render import Renderer
from tests.support.model_folder import as_transformers, make_model_folder

WORDS = (
    "the",
    "video",
    "frame",
    "model",
    "token",
    "quickly",
    "décodé",
    "東京",
    "😀",
    "x = f(y)",
    "42",
    "Zürich",
    "because",
    "sampling",
    "rate",
    "\n",
    "answer",
    "question",
    "image",
    "grid",
)


def text_chat(rng: random.Random, words: int) -> list[dict]:
    def sentence(n):
        return " ".join(rng.choice(WORDS) for _ in range(n))

    messages = [{"role": "system", "content": sentence(40)}]
    for _turn in range(6):
        messages.append({"role": "user", "content": [{"type": "text", "text": sentence(words // 12)}]})
        messages.append({"role": "assistant", "content": sentence(words // 12)})
    messages.append({"role": "user", "content": [{"type": "text", "text": sentence(words // 12)}]})
    return messages


def video_request(folder):
    frames, height, width = 32, 720, 1280
    grid = folder.processor.video_grid(frames, height, width)
    indices = np.linspace(0, 299, frames).astype(np.int64)
    metadata = {
        "total_num_frames": 300,
        "fps": 30.0,
        "width": width,
        "height": height,
        "duration": 10.0,
        "video_backend": "pyav",
        "frames_indices": indices.tolist(),
    }
    processed = ProcessedMedia(
        {"video_grid_thw": np.array([grid], np.int64)}, folder.processor.video_tokens(frames, height, width)
    )
    item = MediaItem(
        "video",
        np.zeros((frames, 1, 1, 3), np.uint8),
        metadata,
        "v",
        timestamps=indices / 30.0,
        indices=indices,
        hf_metadata=metadata,
        processed=processed,
    )
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "video", "media_index": 0},
                {"type": "text", "text": "What happens in this video?"},
            ],
        }
    ]
    return messages, item


def interleaved(ours, theirs, repeats: int) -> tuple[float, float]:
    ours(), theirs()  # warm: caches, first-call costs
    mine, base = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        ours()
        mine.append(time.perf_counter() - started)
        started = time.perf_counter()
        theirs()
        base.append(time.perf_counter() - started)
    return statistics.median(mine) * 1e6, statistics.median(base) * 1e6


def peak_kib(work) -> float:
    """Peak Python allocation of one call, in KiB."""
    work()
    tracemalloc.start()
    work()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    repeats = 20 if args.quick else 200

    from transformers import AutoProcessor
    from transformers.video_utils import VideoMetadata

    with tempfile.TemporaryDirectory() as scratch:
        path = make_model_folder("qwen3_vl", Path(scratch) / "qwen3_vl")
        folder = load_model_folder(str(path))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            processor = AutoProcessor.from_pretrained(str(path))
    renderer = Renderer(folder)
    results = {}

    chat = text_chat(random.Random(1), 1130)
    tokens = len(renderer.render(chat, []).token_ids)
    hf_chat = as_transformers(chat)
    same = processor.apply_chat_template(hf_chat, tokenize=True, add_generation_prompt=True)[0]
    assert list(same) == list(renderer.render(chat, []).token_ids)
    results[f"text-only chat, {tokens} tokens"] = interleaved(
        lambda: renderer.render(chat, []),
        lambda: processor.apply_chat_template(hf_chat, tokenize=True, add_generation_prompt=True),
        repeats,
    )

    messages, item = video_request(folder)
    hf_messages = as_transformers(messages)
    video_inputs = {
        "video_grid_thw": item.processed.tensors["video_grid_thw"],
        "video_metadata": [VideoMetadata(**item.hf_metadata)],
    }

    def transformers_video():
        text = processor.apply_chat_template(hf_messages, add_generation_prompt=True)
        replacement = processor.replace_video_token(video_inputs, 0)
        expanded, _ = processor.get_text_with_replacements([text], videos_replacements=[replacement])
        return processor.tokenizer(expanded)["input_ids"][0]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert list(transformers_video()) == list(renderer.render(messages, [item]).token_ids)
        tokens = len(renderer.render(messages, [item]).token_ids)
        results[f"one 32-frame 720p video, {tokens} tokens"] = interleaved(
            lambda: renderer.render(messages, [item]), transformers_video, repeats
        )

    peaks = [peak_kib(lambda: renderer.render(chat, [])), peak_kib(lambda: renderer.render(messages, [item]))]
    print(f"{'request':<40} {'mmprep µs':>10} {'transformers µs':>16} {'ratio':>7} {'peak KiB':>9}")
    for (name, (mine, base)), peak in zip(results.items(), peaks, strict=True):
        print(f"{name:<40} {mine:>10.0f} {base:>16.0f} {base / mine:>6.1f}x {peak:>9.0f}")
    if args.json:
        args.json.write_text(
            json.dumps({k: {"mmprep_us": a, "transformers_us": b} for k, (a, b) in results.items()})
        )


if __name__ == "__main__":
    main()
