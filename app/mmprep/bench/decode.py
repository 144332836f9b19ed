"""`mmprep bench-decode`: mmprep.decoders.decode_video against the usual ways others load the
same frames, in this process, on the same bytes in memory.

The loaders compared, each asked for the same number of evenly spread frames:
- PyAV, every frame: decode all frames, convert none. The floor any loader that decodes
  the whole video pays, whatever it keeps.
- transformers' PyAV loop (video_utils.read_video_pyav): frame count from the stream
  header, indices by np.arange, then decode in order up to the last index and convert
  the chosen frames to RGB.
- vLLM's OpenCV loader: cv2.VideoCapture over the bytes, grab() every frame up to the
  last wanted index, retrieve() and convert the wanted ones. Only when cv2 imports
  (the opencv extra: `pip install -e '.[opencv]'`).
Times are medians of interleaved repeats, so a noisy neighbour slows every loader alike;
the ratio to mmprep is what to read.
"""

from __future__ import annotations

import io
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np

from mmprep.decoders import MediaError, decode_video, probe_video

from .config import DecodeBenchConfig
from .errors import BenchError
from .inputs import generate_synthetic

Loader = Callable[[bytes, int], int]  # (video bytes, frames wanted) -> frames returned


def mmprep_decode(data: bytes, num_frames: int) -> int:
    return len(decode_video(data, num_frames=num_frames).frames)


def decode_every_frame(data: bytes, num_frames: int = 0, threads: int = 0) -> int:
    """The floor any full-decode loader pays: every frame decoded, none converted.
    threads: the decoder's threads, 0 for FFmpeg's choice (one per core)."""
    with av.open(io.BytesIO(data), "r") as container:
        stream = container.streams.video[0]
        stream.codec_context.thread_type = "AUTO"
        stream.codec_context.thread_count = threads
        return sum(1 for _ in container.decode(stream))


def transformers_pyav(data: bytes, num_frames: int, threads: int = 0) -> int:
    """transformers' read_video_pyav with its default uniform sampler, as written there
    (threading left at PyAV's default, as there, unless `threads` sets the decoder's count)."""
    with av.open(io.BytesIO(data), "r") as container:
        if threads:
            container.streams.video[0].codec_context.thread_count = threads
        total = container.streams.video[0].frames  # 0 when the container does not say (WebM)
        if total == 0:
            raise ValueError("the stream reports 0 frames, so there is nothing to sample")
        indices = np.arange(0, total, total / num_frames).astype(int)
        frames = []
        container.seek(0)
        for i, frame in enumerate(container.decode(video=0)):
            if i > indices[-1]:
                break
            if i in indices:
                frames.append(frame)
        return len(np.stack([frame.to_ndarray(format="rgb24") for frame in frames]))


def vllm_opencv(data: bytes, num_frames: int, threads: int = 0) -> int:
    """vLLM's OpenCV video loader: frame count from OpenCV, indices by np.linspace, grab()
    every frame up to the last index, retrieve() the wanted ones. threads: the FFmpeg
    decoder's (CAP_PROP_N_THREADS), 0 for OpenCV's default (one per core), as in vLLM."""
    import cv2

    params = [cv2.CAP_PROP_N_THREADS, threads] if threads else []
    capture = cv2.VideoCapture(io.BytesIO(data), _opencv_stream_backend(), params)
    if not capture.isOpened():
        raise ValueError("OpenCV could not open the video")
    total = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
    wanted = (
        list(range(total))
        if total < num_frames
        else np.linspace(0, total - 1, num_frames, dtype=int).tolist()
    )
    width, height = int(capture.get(cv2.CAP_PROP_FRAME_WIDTH)), int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT))
    frames = np.empty((len(wanted), height, width, 3), np.uint8)
    kept = 0
    for index in range(max(wanted) + 1):
        if not capture.grab():
            break
        if index in wanted:
            ok, frame = capture.retrieve()
            if ok:
                frames[kept] = cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)
                kept += 1
    # No capture.release(), as in vLLM; and calling it on a stream-backed capture that reached
    # the end crashes OpenCV 4.14 and 5.0. The capture is freed with the object.
    return kept


def _opencv_stream_backend() -> int:
    """The first OpenCV backend that reads from a Python stream, as vLLM picks it."""
    import cv2.videoio_registry as registry

    for backend in registry.getStreamBufferedBackends():
        if registry.hasBackend(backend):
            return backend
    raise ValueError("this OpenCV build cannot read videos from memory")


def loaders() -> dict[str, Loader]:
    """Every loader this installation can run, mmprep first (the ratios' reference)."""
    found: dict[str, Loader] = {
        "mmprep decode_video": mmprep_decode,
        "PyAV, every frame": decode_every_frame,
        "transformers PyAV loop": transformers_pyav,
    }
    try:
        import cv2  # noqa: F401
    except ImportError:
        pass
    else:
        found["vLLM OpenCV loader"] = vllm_opencv
    return found


def median_seconds(runs: dict[str, Callable[[bytes], object]], data: bytes, repeats: int) -> dict[str, float]:
    """Median wall time of each function on `data`, runs interleaved."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run(data)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


@dataclass
class Timing:
    loader: str
    seconds: float | None  # None: the loader failed on this file
    frames: int | None
    error: str | None = None


def time_loaders(data: bytes, num_frames: int, repeats: int) -> list[Timing]:
    """Each loader's median time on `data`; a loader that fails is reported, not timed."""
    runnable: dict[str, Callable[[bytes], object]] = {}
    timings: dict[str, Timing] = {}
    for name, loader in loaders().items():
        try:
            frames = loader(data, num_frames)  # also a warm-up: first calls pay imports and allocations
        except Exception as error:  # other loaders fail their own ways (cv2.error, IndexError...)
            timings[name] = Timing(name, None, None, f"{type(error).__name__}: {error}")
            continue
        timings[name] = Timing(name, None, frames)
        runnable[name] = _asking(loader, num_frames)
    for name, seconds in median_seconds(runnable, data, repeats).items():
        timings[name].seconds = seconds
    return list(timings.values())


def _asking(loader: Loader, num_frames: int) -> Callable[[bytes], int]:
    """`loader` with the frame count bound, as median_seconds calls it."""
    return lambda data: loader(data, num_frames)


def describe(path: Path, data: bytes) -> str:
    try:
        meta = probe_video(data)
    except MediaError as error:
        raise BenchError(f"{path}: not a video mmprep can read ({error})") from None
    return (
        f"{path.name}: {meta.codec}, {meta.width}x{meta.height}, {meta.duration:.1f} s, "
        f"{meta.num_frames} frames, {_size(len(data))}"
    )


def _duration(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds >= 1 else f"{seconds * 1000:.1f} ms"


def _size(count: int) -> str:
    return f"{count / 2**20:.1f} MiB" if count >= 2**20 else f"{count / 1024:.0f} KiB"


def print_timings(title: str, timings: list[Timing], out=sys.stdout) -> None:
    reference = timings[0].seconds
    print(title, file=out)
    print("| loader | time | frames | time vs mmprep |", file=out)
    print("|---|---|---|---|", file=out)
    for t in timings:
        if t.seconds is None:
            print(f"| {t.loader} | failed: {t.error} | | |", file=out)
            continue
        ratio = f"{t.seconds / reference:.2f}x" if reference else "n/a"
        print(f"| {t.loader} | {_duration(t.seconds)} | {t.frames} | {ratio} |", file=out)
    print(file=out)


def run_decode_bench(config: DecodeBenchConfig) -> int:
    """Time every loader on every video; print a table per video. Returns the exit status."""
    try:
        videos = [_existing(path) for path in config.videos]
        videos += generate_synthetic(config, note=_note)
        if "vLLM OpenCV loader" not in loaders():
            _note(
                "vLLM's OpenCV loader left out: cv2 does not import (pip install -e '.[opencv]' in mmprep's "
                "checkout)"
            )
        results = {}
        for path in videos:
            data = path.read_bytes()
            title = describe(path, data) + f"; {config.num_frames} frames asked, median of {config.repeats}"
            timings = time_loaders(data, config.num_frames, config.repeats)
            print_timings(title, timings)
            results[path.name] = {"video": title, "timings": [t.__dict__ for t in timings]}
    except BenchError as error:
        print(f"mmprep bench-decode: {error}", file=sys.stderr)
        return 2
    if config.output:
        config.output.write_text(json.dumps(results, indent=2))
    return 0


def _note(text: str) -> None:
    """Notes go to stderr: stdout holds the tables alone."""
    print(text, file=sys.stderr)


def _existing(path: Path) -> Path:
    if not path.is_file():
        raise BenchError(f"{str(path)!r} is not a file")
    return path
