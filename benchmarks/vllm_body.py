"""The cost of writing vLLM's GenerateRequest for a video (--engine vllm-generate).

    python benchmarks/vllm_body.py                 # 32 frames of 1280x720, Qwen2.5-VL's sizes
    python benchmarks/vllm_body.py --frames 8 --repeats 3

vLLM's protocol is JSON with each item's float32 tensors as base64 msgpack: for 32 frames
of 720p at Qwen2.5-VL's defaults, 76544 patch rows of 1176 floats (351 MiB), 458 MiB of
body. The baseline writes it the plain way (each tensor's bytes copied into a msgpack
document by msgpack.packb, base64'd, made str, then the whole dumped by json.dumps);
mmprep's generate_request_body base64s each tensor straight from its array and splices
the pieces into the JSON dumped without them. Medians of interleaved repeats, as a ratio,
so a noisy neighbour slows both alike. The processing itself is not timed.
"""

from __future__ import annotations

import argparse
import base64
import json
import statistics
import sys
import time
from pathlib import Path

import msgpack
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's root: tests.support

from mmprep.interface.prepared import PreparedRequest, SamplingParams
from mmprep.processors import load_processor
from mmprep.vllm import request as vllm_request
from mmprep.vllm.options import GenerateOptions
from mmprep.vllm.request import generate_request, generate_request_body
from tests.support.vllm_cases import processed_item, qwen_prompt


def plain_encode(item) -> str:
    """The baseline item encoding: one msgpack document, then base64, then str."""
    document = {}
    for key, elem in item.items():
        data = elem.data
        if isinstance(data, np.ndarray):
            data = [str(data.dtype), list(data.shape), msgpack.ExtType(3, data.tobytes())]
        document[key] = {"data": data, "field": [elem.field.kind, elem.field.keywords]}
    return base64.b64encode(msgpack.packb(document)).decode("ascii")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=32)
    parser.add_argument("--size", default="1280x720", help="WIDTHxHEIGHT of the frames")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    width, height = map(int, args.size.split("x"))
    processor = load_processor("Qwen/Qwen2.5-VL-7B-Instruct")
    frames = np.random.default_rng(0).integers(0, 256, (args.frames, height, width, 3), dtype=np.uint8)
    video = processed_item("video", frames, processor)
    prepared = PreparedRequest(
        "bench", "m", [], [video], SamplingParams(max_tokens=8), prompt=qwen_prompt([video])
    )
    options = GenerateOptions(model_id="Qwen/Qwen2.5-VL-7B-Instruct", served_model="m", family="qwen2_5_vl")
    assert json.loads(b"".join(generate_request_body(prepared, options))) == generate_request(
        prepared, options
    )

    plain, ours = [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        body = json.dumps(vllm_request.generate_request(prepared, options, encode=plain_encode)).encode()
        plain.append(time.perf_counter() - start)
        size = len(body)
        del body
        start = time.perf_counter()
        pieces = generate_request_body(prepared, options)
        ours.append(time.perf_counter() - start)
        del pieces
    rows = video.processed.tensors["pixel_values_videos"].shape
    print(f"{args.frames} frames {width}x{height} -> pixel_values_videos {rows}, body {size / 2**20:.0f} MiB")
    print(
        f"plain json.dumps: median {statistics.median(plain):.2f} s; generate_request_body: "
        f"median {statistics.median(ours):.2f} s; "
        f"{statistics.median(plain) / statistics.median(ours):.1f}x faster"
    )


if __name__ == "__main__":
    main()
