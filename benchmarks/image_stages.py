"""Where one new 720p image's CPU goes on the render route, stage by stage, beside the floor
of each stage measured alone with the best library for it (issue 58), and the whole: a real
`mmprep serve --model` answering `POST /v1/chat/completions/render` with one new 1280x720
JPEG per request, its CPU per request read from /proc.

    python benchmarks/image_stages.py                 # a Qwen2.5-VL folder, uint8 pixels (vLLM's default)
    python benchmarks/image_stages.py --repeats 50

Each stage is timed in this process on one core (CPU time, the median of --repeats runs):
mmprep's own call for it, and the floor: the same work by the fastest library at hand
(orjson for the body, pybase64, libjpeg-turbo straight into an array through simplejpeg,
torch's AVX2 resize where torch is installed, else mmprep's kernel, one numpy copy into
patch order, blake3, pybase64). Resize and patches are one pass in mmprep (resize.py's
kernel writes the patches), so that row is compared with the two floors together. The
whole is the server's CPU per request (its threads, the event loop, HTTP), which the issue
asks to be within 1.5x of the sum of the floors, HTTP's among them (canned_server.py, which
does nothing but read the same requests and write an answer of the same size over loopback
TCP, as the client reads the whole's): once its decode cache is full, as on a
server that has run a while, and also on the fresh server, where each new image's tensors
are memory the process never had, which the kernel faults in (render_server_speed --fill).
"""

from __future__ import annotations

import argparse
import base64
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pybase64
from render_server_speed import (  # puts the repository's root on sys.path
    MODEL,
    Client,
    Server,
    canned_server,
    fill_caches,
    jpeg_url,
)

from mmprep.decoders import decode_image
from mmprep.processors import ProcessedMedia, Processor, load_processor
from mmprep.vllm.hashing import FileBytes, hash_kwargs
from mmprep.vllm.items import FieldElem, batched, flat
from mmprep.vllm.serde import encode_item_pieces
from tests.support.model_folder import make_model_folder


def cpu_ms(work: Callable[[], object], repeats: int) -> float:
    work()  # warm: caches, lazily built tables
    times = []
    for _ in range(repeats):
        start = time.process_time()
        work()
        times.append(time.process_time() - start)
    return statistics.median(times) * 1e3


# Requests of four new images that fill the server's 1 GiB decode cache (render_server_speed).
FILL_REQUESTS = 60


def body(seed: int) -> bytes:
    return json.dumps(
        {
            "model": MODEL,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": jpeg_url(seed)}},
                        {"type": "text", "text": "What is in this picture?"},
                    ],
                }
            ],
        }
    ).encode()


def floors(request: bytes, data: bytes, height: int, width: int, repeats: int) -> dict[str, float]:
    """Each stage alone, by the fastest library here."""
    import orjson
    import simplejpeg

    pixels = simplejpeg.decode_jpeg(data, colorspace="RGB")
    payload = json.loads(request)["messages"][0]["content"][0]["image_url"]["url"].split(",", 1)[1]
    resized = _fastest_resize(pixels, height, width)
    patches = np.empty((height // 14 * width // 14, 3 * 2 * 14 * 14), np.uint8)
    blocks = resized.reshape(height // 28, 2, 14, width // 28, 2, 14, 3).transpose(0, 3, 1, 4, 6, 2, 5)
    target = patches.reshape(height // 28, width // 28, 2, 2, 3, 2, 14, 14)

    def patchify() -> None:
        target[..., 0, :, :] = blocks
        target[..., 1, :, :] = target[..., 0, :, :]

    import blake3

    return {
        "body parse": cpu_ms(lambda: orjson.loads(request), repeats),
        "base64 decode": cpu_ms(lambda: pybase64.b64decode(payload, validate=True), repeats),
        "image decode": cpu_ms(lambda: simplejpeg.decode_jpeg(data, colorspace="RGB"), repeats),
        "resize": cpu_ms(lambda: _fastest_resize(pixels, height, width), repeats),
        "patches": cpu_ms(patchify, repeats),
        "hash": cpu_ms(lambda: blake3.blake3(data).hexdigest(), repeats),
        "answer encoding": cpu_ms(lambda: pybase64.b64encode(patches), repeats),
    }


def _fastest_resize(pixels: np.ndarray, height: int, width: int) -> np.ndarray:
    try:
        import torch
    except ImportError:
        from mmprep.processors.resize import resize

        return resize(pixels, height, width)
    tensor = torch.from_numpy(pixels).permute(2, 0, 1).unsqueeze(0)
    out = torch.nn.functional.interpolate(tensor, size=(height, width), mode="bicubic", antialias=True)
    return np.ascontiguousarray(out[0].permute(1, 2, 0).numpy())


def ours(request: bytes, data: bytes, folder: Path, repeats: int) -> dict[str, float]:
    """mmprep's own call for each stage."""
    from mmprep.media.data_url import DataURL
    from mmprep.transport.json_body import SMALL_BODY, _loads

    assert len(request) <= SMALL_BODY  # parsed in one call, on the event loop

    processor = load_processor(str(folder)).with_raw_pixels()
    url = json.loads(request)["messages"][0]["content"][0]["image_url"]["url"]
    image = decode_image(data)
    item = wire_item(processor.process_image(image.pixels))
    factors = {"model_id": str(folder), "image": FileBytes(data, None)}
    return {
        "body parse": cpu_ms(lambda: _loads(bytearray(request), []), repeats),
        "base64 decode": cpu_ms(lambda: DataURL.parse(url).decode(cap=1 << 30), repeats),
        "image decode": cpu_ms(lambda: decode_image(data), repeats),
        "resize + patches": cpu_ms(lambda: processor.process_image(image.pixels), repeats),
        "hash": cpu_ms(lambda: hash_kwargs("blake3", factors), repeats),
        "answer encoding": cpu_ms(lambda: encode_item_pieces(item), repeats),
    }


def wire_item(processed: ProcessedMedia) -> dict[str, FieldElem]:
    """A processed Qwen2.5-VL image as the render answer's item (its base64 msgpack)."""
    pixels, grid = processed.tensors["pixel_values"], processed.tensors["image_grid_thw"]
    return {
        "pixel_values": FieldElem(pixels, flat([len(pixels)])),
        "image_grid_thw": FieldElem(grid[0], batched(keep_on_cpu=True)),
    }


def new_image_alone(processor: Processor, data: bytes, model_id: str) -> tuple[ProcessedMedia, list[bytes]]:
    """A new image's work without the server around it: decode, resize into patches, hash,
    encode the answer's item (render_cores.py's baseline). Returns what a server holds
    until the answer is sent: the tensors and the answer's pieces."""
    processed = processor.process_image(decode_image(data).pixels)
    hash_kwargs("blake3", {"model_id": model_id, "image": FileBytes(data, None)})
    return processed, encode_item_pieces(wire_item(processed))


def cpu_per_request(client: Client, server: Server, first_seed: int, rounds: int) -> float:
    """The server's CPU per request over `rounds` requests of one new image each."""
    requests = [body(first_seed + seed) for seed in range(rounds)]
    before = server.cpu_seconds()
    for request in requests:
        status, answer = client.render(server.url, request)
        assert status == 200, answer[:300]
    return (server.cpu_seconds() - before) / rounds * 1e3


def whole(folder: Path, rounds: int, work: Path) -> tuple[float, float, int]:
    """The server's CPU per request, one new image each: on the fresh server, then once its
    decode cache is full (fill_caches: a new image's tensors then take evicted ones' memory);
    and the answer's size."""
    command = [sys.executable, "-m", "mmprep", "serve", "--model", str(folder), "--log-level", "warning"]
    server = Server("mmprep", command)
    server.start(work / "mmprep.log")
    try:
        client = Client()
        status, answer = client.render(server.url, body(999))
        assert status == 200, answer[:300]
        fresh = cpu_per_request(client, server, 1000, rounds)
        fill_caches(client, [server], FILL_REQUESTS)
        return fresh, cpu_per_request(client, server, 2000, rounds), len(answer)
    finally:
        server.stop()


def http_floor(answer_bytes: int, rounds: int, work: Path) -> float:
    """The HTTP stage's floor: the CPU per request of a server that does nothing but read the
    same requests and write an answer of the same size (canned_server.py), over loopback TCP
    as the whole's server. The send side of a 7.5 MB answer is most of it."""
    server = canned_server(answer_bytes)
    server.start(work / "canned.log")
    try:
        client = Client()
        client.render(server.url, body(999))
        return cpu_per_request(client, server, 3000, rounds)
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--family", default="qwen2_5_vl")
    parser.add_argument("--repeats", type=int, default=30, help="runs of each stage (the median is kept)")
    parser.add_argument("--rounds", type=int, default=40, help="requests to the server")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="image-stages-"))
    folder = make_model_folder(args.family, work / MODEL)
    request = body(7)
    url = json.loads(request)["messages"][0]["content"][0]["image_url"]["url"]
    data = base64.b64decode(url.split(",", 1)[1])
    height, width = load_processor(str(folder)).image_size(720, 1280)
    best = floors(request, data, height, width, args.repeats)
    mine = ours(request, data, folder, args.repeats)
    fresh, served, answer_bytes = whole(folder, args.rounds, work)
    best["HTTP"] = http_floor(answer_bytes, args.rounds, work)
    floor_sum = sum(best.values())
    print(f"one new 1280x720 JPEG -> {width}x{height}, {args.family}, uint8 patches; CPU-ms on one core")
    print("| stage | mmprep | floor (best library alone) |")
    print("|---|---|---|")
    for stage in ("body parse", "base64 decode", "image decode"):
        print(f"| {stage} | {mine[stage]:.2f} | {best[stage]:.2f} |")
    print(
        f"| resize + patches (one pass) | {mine['resize + patches']:.2f} | "
        f"{best['resize'] + best['patches']:.2f} ({best['resize']:.2f} + {best['patches']:.2f}) |"
    )
    for stage in ("hash", "answer encoding"):
        print(f"| {stage} | {mine[stage]:.2f} | {best[stage]:.2f} |")
    print(f"| sum of the stages | {sum(mine.values()):.2f} | {floor_sum - best['HTTP']:.2f} |")
    print(
        f"| HTTP: the request in, the {answer_bytes / 1e6:.1f} MB answer out | (in the whole) | "
        f"{best['HTTP']:.2f} (a server doing only that) |"
    )
    print(f"| sum of the floors | | {floor_sum:.2f} |")
    print(f"| the whole request, server CPU | {served:.2f} | {served / floor_sum:.2f}x the floors' sum |")
    print(f"| the same on the fresh server (its cache filling) | {fresh:.2f} | {fresh / floor_sum:.2f}x |")


if __name__ == "__main__":
    main()
