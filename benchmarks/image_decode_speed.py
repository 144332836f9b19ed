"""decode_image's CPU per image before and after its JPEG path (libjpeg-turbo straight into numpy,
decoders/mmprep/decoders/jpeg.py), in one process, the two interleaved.

    python benchmarks/image_decode_speed.py                # every case, 30 rounds
    python benchmarks/image_decode_speed.py --repeats 10 --cases jpeg-720p page-rgb

Cases: the 1280x720 JPEG the render benchmark sends (render_server_speed.camera_jpeg); a
4032x3024 camera JPEG, as stored and tagged with EXIF orientation 6 (a phone held upright); a
1275x1650 document page (text and a grey figure on white) as a PNG in RGB, grey (L) and palette (P)
mode, the issue's "new PNG pages". `before` is the same decode_image with its JPEG path turned
off, so every image goes through Pillow as it did before; PNGs take Pillow's path in both.

Prints, per case, the median CPU time of a decode (process time: user and system, so the page
faults of fresh pixel buffers count) and the median of the paired ratios. With pyspng or
imagecodecs installed, their PNG decode into RGB is timed beside (the PNG decoders weighed
and not taken: docs/ARCHITECTURE.md, decoders).
"""

from __future__ import annotations

import argparse
import io
import random
import statistics
import time
from collections.abc import Callable
from unittest.mock import patch

import numpy as np
from PIL import Image, ImageDraw, ImageFont
from render_server_speed import camera_jpeg

from mmprep.decoders import decode_image, jpeg

WORDS = "the of and to in is that for it as with was on be by this are from at or an have not".split()


def document_page(mode: str) -> bytes:
    """A 1275x1650 page (8.5x11 inches at 150 dpi): lines of black text, a grey figure."""
    page = Image.new("RGB", (1275, 1650), "white")
    draw = ImageDraw.Draw(page)
    font = ImageFont.load_default(size=16)
    rng = random.Random(0)
    for top in range(100, 1500, 22):
        if 700 <= top < 1000:
            continue
        draw.text((120, top), " ".join(rng.choice(WORDS) for _ in range(18)), fill="black", font=font)
    draw.rectangle((150, 720, 1125, 980), fill=(200, 200, 200))
    draw.line((160, 970, 1100, 740), fill=(60, 60, 60), width=3)
    out = io.BytesIO()
    (page if mode == "RGB" else page.convert(mode)).save(out, "PNG")
    return out.getvalue()


def cases() -> dict[str, bytes]:
    upright = Image.Exif()
    upright[0x0112] = 6
    return {
        "jpeg-720p": camera_jpeg(0),
        "jpeg-4032x3024": camera_jpeg(1, 4032, 3024),
        "jpeg-4032x3024-exif6": camera_jpeg(1, 4032, 3024, exif=upright),
        "page-rgb": document_page("RGB"),
        "page-l": document_page("L"),
        "page-p": document_page("P"),
    }


def before(data: bytes) -> np.ndarray:
    """decode_image with every JPEG decoded by Pillow."""
    with patch.object(jpeg, "decode_jpeg", return_value=None):
        return decode_image(data).pixels


def after(data: bytes) -> np.ndarray:
    return decode_image(data).pixels


def png_peers() -> dict[str, Callable[[bytes], np.ndarray]]:
    """The PNG decoders weighed, where installed: RGB out, grey broadcast to three channels."""
    peers: dict[str, Callable[[bytes], np.ndarray]] = {}
    try:
        import imagecodecs

        peers["imagecodecs"] = lambda data: as_rgb(imagecodecs.png_decode(data))
    except ImportError:
        pass
    try:
        import pyspng

        peers["pyspng"] = lambda data: as_rgb(pyspng.load(data))
    except ImportError:
        pass
    return peers


def as_rgb(pixels: np.ndarray) -> np.ndarray:
    return np.repeat(pixels[..., None], 3, axis=2) if pixels.ndim == 2 else pixels


def cpu_ms(decode: Callable[[bytes], np.ndarray], data: bytes) -> float:
    start = time.process_time()
    decode(data)
    return (time.process_time() - start) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--cases", nargs="*", help="the cases to run (default: all)")
    args = parser.parse_args()
    peers = png_peers()
    print(f"{'case':24} {'bytes':>9} {'before ms':>10} {'after ms':>9} {'after/before':>13}  peers (ms)")
    for name, data in cases().items():
        if args.cases and name not in args.cases:
            continue
        decoders = {"before": before, "after": after}
        if name.startswith("page"):
            decoders |= peers
        for decode in decoders.values():  # warm, and every decoder gives the same pixels
            assert np.array_equal(decode(data), after(data)), name
        times: dict[str, list[float]] = {key: [] for key in decoders}
        for round_ in range(args.repeats):
            order = list(decoders) if round_ % 2 == 0 else list(reversed(decoders))
            for key in order:
                times[key].append(cpu_ms(decoders[key], data))
        median = {key: statistics.median(values) for key, values in times.items()}
        ratio = statistics.median(a / b for a, b in zip(times["after"], times["before"], strict=True))
        others = ", ".join(f"{key} {median[key]:.1f}" for key in peers if key in median)
        figures = f"{median['before']:>10.2f} {median['after']:>9.2f} {ratio:>13.2f}"
        print(f"{name:24} {len(data):>9} {figures}  {others}")


if __name__ == "__main__":
    main()
