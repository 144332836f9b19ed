"""A request's media work end to end (decode + process) against mmprep's decode followed by
transformers' processor, same video, one process.

    python benchmarks/end_to_end_speed.py               # the figures quoted in docs/benchmarks.md
    python benchmarks/end_to_end_speed.py --repeats 3   # a quicker run

32 frames (num_frames=32) of 4 s of camera-like 1280x720 H.264, for each processor:
- transformers: decode_video, then transformers' video processor on the frames;
- exact (`--processor-resize exact`, the default): decode_video with processors/ working on
  each frame as it is decoded (on_frame=, a VideoStream), as the service does;
- ffmpeg (`--processor-resize ffmpeg`): the same, with decode_video scaling to the processor's
  size in FFmpeg's scaler (frame_size=), so processors/ only normalizes.
Interleaved runs (a noisy neighbour slows all alike); the medians, the median of each run's
ratio to the transformers run just before it, and how far each lands from transformers'
output in uint8 levels after normalization. Needs torch, torchvision and transformers.
"""

from __future__ import annotations

import argparse
import statistics
import warnings

from footage import camera_clip
from processor_speed import PROCESSORS, levels_off, run_transformers, timed, transformers_processor

from mmprep.decoders import decode_video
from mmprep.preprocess.vision import VisionProcessing
from mmprep.processors import load_processor
from mmprep.processors.processor import default_threads

FRAMES = 32


def decode_and_process(processor, data: bytes, resize: str) -> dict:
    """What `mmprep serve --processor --processor-resize RESIZE` does for one request alone:
    frames processed as they are decoded, by threads on every core."""
    vision, threads = VisionProcessing(processor, resize, None), default_threads()
    frame_size = processor.video_size if resize == "ffmpeg" else None
    with processor.stream_video(threads) as stream:
        video = decode_video(
            data,
            num_frames=FRAMES,
            on_frame=stream.add,
            threads=vision.decoder_threads(threads),
            frame_size=frame_size,
        )
        return stream.result(video.frames).tensors


def measure(name: str, data: bytes, repeats: int) -> None:
    processor = load_processor(name)
    reference = transformers_processor(processor)
    ways = {
        "transformers": lambda: run_transformers(reference, decode_video(data, num_frames=FRAMES).frames),
        "exact": lambda: decode_and_process(processor, data, "exact"),
        "ffmpeg": lambda: decode_and_process(processor, data, "ffmpeg"),
    }
    outputs = {way: run()["pixel_values_videos"] for way, run in ways.items()}  # warm up, and the tolerance
    times: dict[str, list[float]] = {way: [] for way in ways}
    for _ in range(repeats):
        for way, run in ways.items():
            times[way].append(timed(run))
    theirs = times["transformers"]
    cells = [f"{statistics.median(theirs) * 1000:.0f} ms"]
    for way in ("exact", "ffmpeg"):
        within, worst = levels_off(outputs[way], outputs["transformers"], processor.video_config.image_std)
        speedup = statistics.median(t / o for t, o in zip(theirs, times[way], strict=True))
        cells.append(
            f"{statistics.median(times[way]) * 1000:.0f} ms | **{speedup:.2f}x** "
            f"| {within * 100:.4f}% | {worst:.0f}"
        )
    print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=9, help="interleaved runs of each (default 9)")
    parser.add_argument(
        "processors", nargs="*", default=PROCESSORS, help="family names, preset ids or folders"
    )
    args = parser.parse_args()

    import torch

    warnings.simplefilter("ignore")  # transformers' notices about cap_pixels_per_frame's future default
    data = camera_clip("h264_720p_4s.mp4", 1280, 720, 4).read_bytes()
    print(
        f"{FRAMES} frames of 4 s of 1280x720 H.264; torch {torch.__version__} "
        f"on {torch.get_num_threads()} threads; medians of {args.repeats} interleaved runs\n"
    )
    print(
        "| processor | decode + transformers | decode + processors/ (exact) | speed-up | within 1 level "
        "| max levels | decode at size + processors/ (ffmpeg) | speed-up | within 1 level | max levels |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.processors:
        measure(name, data, args.repeats)


if __name__ == "__main__":
    main()
