"""The cost of handing a prepared request to a remote worker.

    python benchmarks/handoff.py               # the figures quoted in docs/benchmarks.md
    python benchmarks/handoff.py --repeats 5   # a smoke run

For 32 frames of 448x448 (18.4 MiB of uint8 RGB): the time from a PreparedRequest to the
engine's first delta, through an `mmprep worker` process on loopback (RemoteWorkersEngine),
against the echo engine in-process. Both ends run the echo engine, whose first delta needs
a CRC-32 of the frames, so the difference is the hand-off itself: encode the header, send
the frames, read them into the worker, take views. Medians of interleaved repeats in one
run, so a noisy neighbour slows both alike.

Copies of the frames, side by side with what is measured:
- Sending: encode_request builds only the header; the body goes out as memoryviews of the
  frames, 1 MiB at a time. The HTTP/1.1 writer (h11) joins each piece into a bytes object
  before the socket write (one copy, a piece at a time), and Python 3.11's asyncio copies
  whatever the kernel did not take at once into its write buffer (3.12 keeps a view). So
  no second full copy of the frames ever exists: the peak memory traced while sending
  (tracemalloc, which sees numpy's allocations too) stays near the piece size, where
  safetensors.numpy.save, for comparison, makes the whole file at once.
- Receiving: the worker reads the body once into one preallocated buffer (the copy it
  cannot avoid: bytes arrive from the socket) and decode_request takes numpy views of it,
  allocating nothing of the frames' size. The worker's peak RSS growth over the run is
  measured from /proc: one copy of the frames plus the HTTP server's working buffers.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's root: tests.support

from mmprep.engines import EchoEngine
from mmprep.engines.workers import RemoteWorkersEngine
from mmprep.interface.prepared import MediaItem, PreparedRequest, SamplingParams
from mmprep.workers.wire import decode_request, encode_request
from tests.support.servers import WorkerProcess

FRAMES, SIDE = 32, 448
MIB = 1024 * 1024


def prepared_request() -> PreparedRequest:
    """A request as preprocessing leaves it: 32 frames of 448x448 sampled from a 60 s clip."""
    frames = np.random.default_rng(0).integers(0, 256, (FRAMES, SIDE, SIDE, 3), dtype=np.uint8)
    timestamps = np.linspace(0, 59.5, FRAMES)
    indices = np.round(timestamps * 30).astype(np.int64)
    metadata = {
        "width": SIDE,
        "height": SIDE,
        "fps": 30.0,
        "duration": 60.0,
        "num_frames": 1800,
        "codec": "h264",
        "container": "mov,mp4,m4a,3gp,3g2,mj2",
        "rotation": 0,
        "duration_source": "stream",
        "start_time": 0.0,
    }
    hf = {
        "total_num_frames": 1800,
        "fps": 30.0,
        "width": SIDE,
        "height": SIDE,
        "duration": 60.0,
        "video_backend": "pyav",
        "frames_indices": indices.tolist(),
        "do_sample_frames": False,
    }
    video = MediaItem("video", frames, metadata, "messages[0].content[1].video_url", timestamps, indices, hf)
    content = [{"type": "text", "text": "What happens in this clip?"}, {"type": "video", "media_index": 0}]
    return PreparedRequest(
        "chatcmpl-bench",
        "mmprep-echo",
        [{"role": "user", "content": content}],
        [video],
        SamplingParams(max_tokens=64),
    )


async def first_delta(engine, request: PreparedRequest) -> float:
    """Seconds from the request to the engine's first output; the rest is read, unmeasured,
    so that a worker's connection is kept for the next request, as in service."""
    started = time.perf_counter()
    outputs = engine.generate(request)
    await anext(outputs)
    elapsed = time.perf_counter() - started
    async for _ in outputs:
        pass
    return elapsed


async def sending_peak(engine, request: PreparedRequest) -> int:
    """Peak bytes allocated in this process while one request goes to the worker."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    await first_delta(engine, request)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


async def receiving_allocation(request: PreparedRequest) -> tuple[int, bool]:
    """Peak bytes decode_request allocates for a body already read, and whether the
    tensor it returns is a view of the body."""
    body = bytearray(b"".join([bytes(chunk) async for chunk in encode_request(request).chunks()]))
    tracemalloc.start()
    decoded = decode_request(body)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak, bool(np.shares_memory(decoded.media[0].tensor, np.frombuffer(body, np.uint8)))


def safetensors_save_peak(request: PreparedRequest) -> int | None:
    try:
        import safetensors.numpy
    except ImportError:
        return None
    tracemalloc.start()
    safetensors.numpy.save({"media_0": request.media[0].tensor})
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def peak_rss(pid: int) -> int:
    """The process's peak resident memory (VmHWM), bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc")


async def measure(url: str, worker_pid: int, repeats: int) -> None:
    request = prepared_request()
    frames_bytes = request.media[0].tensor.nbytes
    echo = EchoEngine()
    remote = RemoteWorkersEngine([url], probe_interval=3600)
    await remote.start()
    try:
        rss_before = peak_rss(worker_pid)  # idle: nothing received yet
        for _ in range(3):  # warm up both: imports, the connection, the allocator
            await first_delta(echo, request)
            await first_delta(remote, request)
        times: dict[str, list[float]] = {"in-process echo": [], "remote worker": []}
        for _ in range(repeats):
            times["in-process echo"].append(await first_delta(echo, request))
            times["remote worker"].append(await first_delta(remote, request))
        worker_growth = peak_rss(worker_pid) - rss_before
        send_peak = await sending_peak(remote, request)
    finally:
        await remote.stop()

    local, far = (statistics.median(times[name]) for name in ("in-process echo", "remote worker"))
    print(
        f"prepared request -> first delta, {FRAMES} frames of {SIDE}x{SIDE} ({frames_bytes / MIB:.1f} MiB), "
        f"median of {repeats} interleaved repeats:"
    )
    print(f"  in-process echo engine   {local * 1000:7.1f} ms")
    print(
        f"  remote worker (loopback) {far * 1000:7.1f} ms   {far / local:.2f}x; "
        f"hand-off {1000 * (far - local):.1f} ms ({frames_bytes / MIB / (far - local):.0f} MiB/s)"
    )
    receive_peak, is_view = await receiving_allocation(request)
    save_peak = safetensors_save_peak(request)
    print("copies of the frames:")
    print(
        f"  sending: peak allocation while sending {send_peak / MIB:.1f} MiB "
        f"= {send_peak / frames_bytes:.2f}x the frames (no second full copy)"
    )
    if save_peak is not None:
        print(
            f"           (safetensors.numpy.save of the same frames: {save_peak / MIB:.1f} MiB = "
            f"{save_peak / frames_bytes:.2f}x)"
        )
    print(
        f"  receiving: decode_request allocates {receive_peak / 1024:.0f} KiB; "
        f"tensor is a view of the body: {is_view}"
    )
    print(
        f"             worker peak RSS grew {worker_growth / MIB:.1f} MiB "
        f"= {worker_growth / frames_bytes:.2f}x the frames "
        "(the body buffer, read once, plus the HTTP server's buffers)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    with WorkerProcess() as worker:
        assert worker.process is not None  # started on entering the block
        asyncio.run(measure(worker.url, worker.process.pid, args.repeats))


if __name__ == "__main__":
    main()
