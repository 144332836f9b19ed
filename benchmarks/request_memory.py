"""Memory per request where the model's own rule applies (`mmprep serve --model FOLDER`): a
2-minute 1080p clip sampled at 2 fps (240 frames, as vLLM's Qwen-VL loaders take it) and a
4000x3000 photo, each at the size the model's processor config allows, nothing shrunk.

    python benchmarks/request_memory.py                    # qwen2_5_vl and qwen3_vl
    python benchmarks/request_memory.py --families qwen2_vl --source-fps 30

For each family a fresh `mmprep serve --model` (the embedded echo engine: the answer is an
account of what the model would get) is warmed up; then per request its peak RSS is reset
(/proc/PID/clear_refs) and read after the answer (VmHWM). The figure that matters is the
ratio of the peak's growth to the bytes of the tensors the request must hand over (the
processed pixels): memory is bounded by the request's own output, not by the decoded
source (240 frames of 1080p RGB would be 1.4 GiB).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import av
import httpx
import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's root: tests.support

from tests.support.chat import chat, image, video
from tests.support.media_store import MediaStore
from tests.support.model_folder import make_model_folder
from tests.support.servers import AppProcess

MIB = 1 << 20


def make_clip(path: Path, seconds: int, fps: int, width: int = 1920, height: int = 1080) -> Path:
    """An H.264 clip of moving shapes over a gradient (real encoder work, a small file)."""
    rng = np.random.default_rng(0)
    ramp = np.linspace(0, 255, width, dtype=np.float32)[None, :, None] * np.ones((height, 1, 3))
    background = (ramp * rng.uniform(0.6, 1.0, (1, 1, 3))).astype(np.uint8)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=fps, options={"preset": "ultrafast", "g": str(2 * fps)})
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for index in range(seconds * fps):
            frame = background.copy()
            x, y = (index * 13) % (width - 200), (index * 7) % (height - 200)
            frame[y : y + 200, x : x + 200] = (255 - index % 256, index % 256, 128)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        container.mux(stream.encode())
    return path


def make_photo(path: Path, width: int = 4000, height: int = 3000) -> Path:
    """A camera-sized JPEG with detail (noise over a gradient), as a phone writes one."""
    noise = Image.effect_noise((width, height), 40).convert("RGB")
    noise.save(path, quality=90)
    return path


def status_mib(pid: int, field: str) -> float:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field)) / 1024


def reset_peak(pid: int) -> None:
    """VmHWM back to the current RSS (Linux 4.0+), so the next peak is this request's."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def tensor_bytes(account: dict) -> int:
    """The bytes of the processed tensors the account lists for its media items."""
    total = 0
    for item in account["media"]:
        for tensor in item["processed"]["tensors"].values():
            total += int(np.prod(tensor["shape"])) * np.dtype(tensor["dtype"]).itemsize
    return total


def measure(server: AppProcess, body: dict) -> dict:
    assert server.process is not None
    pid = server.process.pid
    before = status_mib(pid, "VmRSS")
    reset_peak(pid)
    started = time.perf_counter()
    answer = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=600)
    seconds = time.perf_counter() - started
    if answer.status_code != 200:
        raise SystemExit(f"{answer.status_code}: {answer.text}")
    account = json.loads(answer.json()["choices"][0]["message"]["content"])
    item = account["media"][0]
    tensors = item["processed"]["tensors"]
    pixels = next(tensor for name, tensor in tensors.items() if name.startswith("pixel_values"))
    made = tensor_bytes(account)
    growth = status_mib(pid, "VmHWM") - before
    return {
        "frames": len(item.get("timestamps") or []) or None,
        "pixels": pixels["shape"],
        "pixel_dtype": pixels["dtype"],
        "tokens": item["processed"]["num_tokens"],
        "tensors_mib": round(made / MIB, 1),
        "rss_before_mib": round(before, 1),
        "peak_growth_mib": round(growth, 1),
        "growth_over_tensors": round(growth * MIB / made, 2),
        "seconds": round(seconds, 1),
    }


def run(families: list[str], source_fps: int, seconds: int) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        media = Path(tmp) / "media"
        media.mkdir()
        make_clip(media / "clip.mp4", seconds, source_fps)
        make_photo(media / "photo.jpg")
        make_clip(media / "warm.mp4", 2, 10, 320, 240)  # warm-up media: other files (no cache hits)
        make_photo(media / "warm.jpg", 320, 240)
        with MediaStore(folder=media) as files:
            for family in families:
                folder = make_model_folder(family, Path(tmp) / family)
                with AppProcess(
                    "serve",
                    "--model",
                    str(folder),
                    "--served-model-name",
                    "bench",
                    "--allow-private-networks",
                    "--max-model-len",  # 240 frames of 1080p are over 300k tokens, past Qwen's 128k
                    "1000000",
                    env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"},  # as vllm serve allows it
                ) as server:
                    model = {"model": "bench"}
                    warm = chat(
                        image(f"{files.url}/warm.jpg"), video(f"{files.url}/warm.mp4", fps=2), **model
                    )
                    measure(server, warm)
                    clip = f"{seconds} s 1080p H.264 at {source_fps} fps, fps 2"
                    for name, part in (
                        (clip, video(f"{files.url}/clip.mp4", fps=2)),
                        ("4000x3000 JPEG", image(f"{files.url}/photo.jpg")),
                    ):
                        rows.append({"family": family, "media": name, **measure(server, chat(part, **model))})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--families", nargs="+", default=["qwen2_5_vl", "qwen3_vl"])
    parser.add_argument("--source-fps", type=int, default=24, help="the clip's own frame rate")
    parser.add_argument("--seconds", type=int, default=120)
    args = parser.parse_args()
    rows = run(args.families, args.source_fps, args.seconds)
    header = "family, media, frames, pixel values, tokens, tensors, peak RSS growth, growth / tensors, s"
    print("| " + header.replace(", ", " | ") + " |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        cells = [
            r["family"],
            r["media"],
            r["frames"] or "-",
            f"{r['pixels']} {r['pixel_dtype']}",
            r["tokens"],
            f"{r['tensors_mib']} MiB",
            f"{r['peak_growth_mib']} MiB",
            r["growth_over_tensors"],
            r["seconds"],
        ]
        print("| " + " | ".join(str(cell) for cell in cells) + " |")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
