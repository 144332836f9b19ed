"""Feed the decoders thousands of damaged inputs; every one must give frames (or an
image) or raise MediaError. Nothing may crash the process, raise anything else, hang past
its deadline, or leak memory.

    python tests/decoders/fuzz_media.py --cases 200000 --seed 1     # a long run (about an hour)
    python tests/decoders/fuzz_media.py --keep-examples --cases 400  # refresh the replayed corpus

The test suite runs it in a child process with a fixed seed and a few thousand cases, so
a segfault fails the test instead of killing pytest. Before each case the child writes
its number to --progress; after a crash the parent re-creates that case to keep it.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image

from mmprep.decoders import MediaError, decode_image, decode_video

MEDIA = Path(__file__).resolve().parents[1] / "data" / "media"
# The replayed corpus: one damaged input per outcome (named "<outcome>--seed1-case<N>-<fixture>"),
# so a change in how the decoders judge damaged input shows; and any input that once broke
# the run ("crash--..."), kept by tests/decoders/test_fuzz.py.
KEPT = MEDIA / "fuzz"
TIMING_OUTCOMES = {"decode_timeout"}  # depends on the machine's speed: never kept as an example
VIDEO_REQUESTS: list[dict[str, int | float]] = [
    {},
    {"fps": 1.0},
    {"num_frames": 3},
    {"fps": 8.0, "max_frames": 4},
    {"num_frames": 1, "max_pixels": 1000},
]
FOREIGN_HEADERS = [
    b"\x89PNG\r\n\x1a\n",
    b"\xff\xd8\xff\xe0",
    b"RIFF\x00\x00\x00\x00WAVE",
    b"GIF89a",
    b"%PDF-1.7",
    b"PK\x03\x04",
]


def seeds() -> list[tuple[str, bytes]]:
    """The generated fixtures, plus small images in the formats Pillow reads most. Not the
    real-world cuts (`real_*`, half a MB each, tests/data/media/REAL_FILES.md): their damaged
    copies decode to some 300 MB at times, so the run's memory would show their high-water
    mark, not a leak (it levels off there over thousands of their cases)."""
    videos = [
        (p.name, p.read_bytes())
        for p in sorted(MEDIA.iterdir())
        if p.suffix in (".webm", ".mp4", ".mkv", ".avi") and not p.name.startswith("real_")
    ]
    images = []
    picture = Image.fromarray(np.random.default_rng(0).integers(0, 255, (24, 32, 3), dtype=np.uint8))
    for fmt in ("PNG", "JPEG", "GIF", "WEBP", "BMP", "TIFF"):
        buffer = io.BytesIO()
        picture.save(buffer, fmt)
        images.append((f"image.{fmt.lower()}", buffer.getvalue()))
    return videos + images


def mutate(data: bytes, rng: random.Random, others: list[bytes]) -> bytes:
    """One damaged copy of `data`: cut, flipped, inserted, deleted, repeated, spliced..."""
    out = bytearray(data)
    kind = rng.randrange(10)
    if kind == 0 or not out:
        return bytes(out[: rng.randrange(len(out) + 1)])
    if kind == 1:
        for _ in range(rng.randint(1, 40)):
            out[rng.randrange(len(out))] = rng.randrange(256)
    elif kind == 2:
        at = rng.randrange(len(out))
        out[at:at] = rng.randbytes(rng.randint(1, 512))
    elif kind == 3:
        at = rng.randrange(len(out))
        del out[at : at + rng.randint(1, 2048)]
    elif kind == 4:  # the container header, where lengths and counts live
        for _ in range(rng.randint(1, 8)):
            out[rng.randrange(min(len(out), 512))] = rng.choice((0, 0xFF, rng.randrange(256)))
    elif kind == 5:
        other = rng.choice(others)
        out = out[: rng.randrange(len(out))] + other[rng.randrange(len(other)) :]
    elif kind == 6:
        start = rng.randrange(len(out))
        chunk = out[start : start + rng.randint(1, 4096)]
        out[start:start] = chunk * rng.randint(1, 4)
    elif kind == 7:
        start = rng.randrange(len(out))
        out[start : start + rng.randint(1, 256)] = bytes([rng.choice((0, 0xFF))]) * rng.randint(1, 256)
    elif kind == 8:
        out = bytearray(rng.choice(FOREIGN_HEADERS) + out[rng.randint(0, 64) :])
    else:
        return b"" if rng.random() < 0.1 else rng.randbytes(rng.randint(1, 4096))
    return bytes(out)


def case(index: int, seed: int, pool: list[tuple[str, bytes]]) -> tuple[str, bytes, dict]:
    """Case `index` of the run with `seed`: always the same bytes for the same numbers."""
    rng = random.Random(f"{seed}:{index}")
    name, data = rng.choice(pool)
    request = rng.choice(VIDEO_REQUESTS) if not name.startswith("image.") else {}
    return name, mutate(data, rng, [d for _, d in pool]), request


def run_one(name: str, data: bytes, request: dict) -> str:
    """'ok' or the MediaError code; anything else propagates: that is a finding."""
    try:
        if name.startswith("image."):
            image = decode_image(data, max_pixels=request.get("max_pixels"), max_source_pixels=4096 * 4096)
            assert image.pixels.ndim == 3 and image.pixels.shape[2] == 3
        else:
            video = decode_video(
                data, timeout=10, max_source_pixels=4096 * 4096, max_bytes=1 << 30, **request
            )
            assert video.frames.ndim == 4 and video.frames.shape[3] == 3
            assert len(video.frames) == len(video.timestamps) == len(video.indices) >= 1
        return "ok"
    except MediaError as error:
        assert error.code and str(error), "a MediaError must carry a code and a message"
        return error.code


def keep_examples(cases: int, seed: int, pool: list[tuple[str, bytes]]) -> list[Path]:
    """The first case of each outcome, per fixture kind (video or image), written to KEPT."""
    KEPT.mkdir(exist_ok=True)
    kept, seen = [], set()
    for index in range(cases):
        name, data, _ = case(index, seed, pool)  # kept cases replay with no sampling request
        outcome = run_one(name, data, {})
        kind = (outcome, name.startswith("image."))
        if kind in seen or outcome in TIMING_OUTCOMES:
            continue
        seen.add(kind)
        path = KEPT / f"{outcome}--seed{seed}-case{index}-{name}"
        path.write_bytes(data)
        kept.append(path)
    return kept


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--progress", type=Path, help="write each case's number here before running it")
    parser.add_argument("--keep-examples", action="store_true", help=f"write one case per outcome to {KEPT}")
    args = parser.parse_args()
    pool = seeds()
    if args.keep_examples:
        for path in keep_examples(args.cases, args.seed, pool):
            print(path.name)
        return 0
    outcomes: dict[str, int] = {}
    slowest = 0.0
    warm_rss = None
    for index in range(args.cases):
        if args.progress:
            args.progress.write_text(str(index))
        name, data, request = case(index, args.seed, pool)
        started = time.perf_counter()
        outcome = run_one(name, data, request)
        slowest = max(slowest, time.perf_counter() - started)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if index == min(args.cases - 1, 300):
            warm_rss = rss_mib()  # after the allocators have warmed up
    print(
        json.dumps(
            {
                "cases": args.cases,
                "outcomes": outcomes,
                "slowest_s": round(slowest, 3),
                "rss_warm_mib": round(warm_rss or 0, 1),
                "rss_end_mib": round(rss_mib(), 1),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
