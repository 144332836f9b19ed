"""How the render route scales with cores: `mmprep serve --model FOLDER --processes N`
pinned to N cores (taskset), kept busy by clients on the other cores, each request four new
1280x720 JPEGs (issue 58: req/s at N cores >= 0.9 N x one core's), then the cores a load
needs (llm-d's: 4 new 720p images a request at 35 requests/s).

    python benchmarks/render_cores.py                          # N = 1, 2, 4, 8, 16 (as the machine has)
    python benchmarks/render_cores.py --cores 1 2 --seconds 20 --folder MODEL_FOLDER
    python benchmarks/render_cores.py --serve-arg=--decode-workers --serve-arg=1

"New" images without encoding thousands of JPEGs: 32 camera-like JPEGs, each request's four
made unique by a JPEG comment segment with a counter after the file's start (the pixels are
the same, the bytes are not: the server's caches, keyed by the bytes, miss, and it decodes,
processes, hashes and encodes each anew). Clients: processes of keep-alive http.client
threads, `2 N` requests in flight, pinned to the cores the server does not use (shared with
it where the machine has no spare ones: said in the output). Per N: completed requests per
second over the window, per core, against N = 1's, and the server's CPU per request.

Beside each N, what the machine itself allows: N processes, one pinned to each of the same
cores, doing nothing but a request's work in a loop (four new images decoded, resized into
patches, hashed and encoded as the answer's items, image_stages.new_image_alone, all four
held until the last is done), their requests a second against N = 1's. Cores that share a
last-level cache, the memory bus and a power budget slow each other even with no server in
between; where the kernels alone fall short of N x, so can the server.
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from image_stages import new_image_alone
from render_server_speed import MODEL, camera_jpeg, free_port, request_body, tree_cpu_seconds

from mmprep.processors import load_processor

LOAD_RATE = 35.0  # llm-d's load: requests a second, of four images each (request_body)


def client_process(
    port: int, bases: list[bytes], threads: int, first: int, stride: int, deadline: float, done: Any
):
    """Requests numbered first, first + stride, ... until `deadline`, `threads` at a time."""
    lock = threading.Lock()
    counter = [first]

    def worker() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        # Each answer read into the same megabyte and dropped: a client that made a 30 MB
        # bytes object per answer would move twice the memory the server does, through the
        # caches and memory bus the server's cores share.
        sink = bytearray(1 << 20)
        while time.time() < deadline:
            with lock:
                number = counter[0]
                counter[0] += stride
            connection.request(
                "POST",
                "/v1/chat/completions/render",
                body=request_body(bases, number),
                headers={"Content-Type": "application/json"},
            )
            answer = connection.getresponse()
            while answer.readinto(sink):
                pass
            if answer.status != 200:
                raise SystemExit(f"the server answered {answer.status}")
            if time.time() < deadline:
                with done.get_lock():
                    done.value += 1

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()


def kernels_process(folder: Path, bases: list[bytes], seconds: float, ready: Any, done: Any) -> None:
    """A request's images' work alone, four at a time, each request's results held until its
    four are done (as a server holds them until the answer is sent: some 60 MB, so the
    memory moved through the caches is a request's), for `seconds` from when every process
    is warm (`ready`), counting the requests done within them."""
    processor = load_processor(str(folder)).with_raw_pixels()
    new_image_alone(processor, bases[0], str(folder))  # warm: the processor's tables
    ready.wait()
    deadline = time.time() + seconds
    number = 0
    while time.time() < deadline:
        held = [new_image_alone(processor, bases[(number + i) % len(bases)], str(folder)) for i in range(4)]
        number += len(held)
        del held  # before the next four are made: one request's memory at a time, as a server's
        if time.time() < deadline:
            with done.get_lock():
                done.value += 1


def kernels_alone(folder: Path, bases: list[bytes], cores: list[int], seconds: float) -> float:
    """Requests' worth of work a second of len(cores) processes, one pinned to each core,
    doing four new images' work and nothing else."""
    done, ready = multiprocessing.Value("i", 0), multiprocessing.Barrier(len(cores))
    processes = [
        multiprocessing.Process(target=kernels_process, args=(folder, bases, seconds, ready, done))
        for _ in cores
    ]
    for process, core in zip(processes, cores, strict=True):
        process.start()
        assert process.pid is not None
        os.sched_setaffinity(process.pid, [core])
    for process in processes:
        process.join()
    if any(process.exitcode for process in processes):
        raise SystemExit("a process running the kernels alone failed (its error is above)")
    return done.value / seconds


def measure(
    folder: Path,
    bases: list[bytes],
    cores: list[int],
    client_cores: list[int],
    seconds: float,
    log: Path,
    serve_args: list[str],
) -> dict:
    count = len(cores)
    port = free_port()
    command = [
        "taskset",
        "-c",
        ",".join(map(str, cores)),
        sys.executable,
        "-m",
        "mmprep",
        "serve",
        "--model",
        str(folder),
        "--port",
        str(port),
        "--processes",
        str(count),
        "--log-level",
        "warning",
        *serve_args,
    ]
    with log.open("w") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_ready(port, server)
        clients = max(1, min(len(client_cores), count))
        in_flight = 2 * count
        done = multiprocessing.Value("i", 0)
        warm_until = time.time() + 3
        start_cpu = None
        deadline = warm_until + seconds
        processes = []
        for index in range(clients):
            process = multiprocessing.Process(
                target=client_process,
                args=(port, bases, max(1, in_flight // clients), index, clients, deadline, done),
            )
            process.start()
            assert process.pid is not None
            os.sched_setaffinity(process.pid, client_cores)
            processes.append(process)
        time.sleep(max(0.0, warm_until - time.time()))
        with done.get_lock():
            done.value = 0
        start_cpu, start = tree_cpu_seconds(server.pid), time.time()
        time.sleep(max(0.0, deadline - time.time()))
        finished, elapsed, cpu = done.value, time.time() - start, tree_cpu_seconds(server.pid) - start_cpu
        for process in processes:
            process.join()
        return {"cores": count, "req_s": finished / elapsed, "cpu_ms": cpu / max(finished, 1) * 1e3}
    finally:
        server.terminate()
        server.wait(30)


def _wait_ready(port: int, server: subprocess.Popen) -> None:
    deadline = time.time() + 300
    while time.time() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"mmprep exited at start ({server.returncode})")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            connection.request("GET", "/health")
            if connection.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.3)
    raise SystemExit("mmprep did not come up")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    available = sorted(os.sched_getaffinity(0))
    parser.add_argument(
        "--cores", type=int, nargs="+", default=[n for n in (1, 2, 4, 8, 16) if n <= len(available)]
    )
    parser.add_argument("--seconds", type=float, default=15.0, help="the measured window per N")
    parser.add_argument("--folder", type=Path, help="a model folder (default: a Qwen2.5-VL test folder)")
    parser.add_argument(
        "--vllm-cpu-ms", type=float, help="vLLM's CPU-ms per such request, for the cores it needs"
    )
    parser.add_argument(
        "--serve-arg",
        action="append",
        default=[],
        help="one more argument for `mmprep serve` (repeat it: --serve-arg=--decode-workers --serve-arg=1)",
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="render-cores-"))
    folder = args.folder
    if folder is None:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's root: tests.support
        from tests.support.model_folder import make_model_folder

        folder = make_model_folder("qwen2_5_vl", work / MODEL)
    print(f"{len(available)} cores; four new 720p JPEGs a request; {args.seconds:.0f} s per point")
    print(
        f"{'N':>3}{'client cores':>14}{'req/s':>9}{'per core':>10}{'x N=1':>8}{'CPU-ms/req':>12}"
        f"{'kernels alone: req/s':>22}{'x N=1':>8}"
    )
    bases = [camera_jpeg(seed) for seed in range(32)]  # once: each process would take seconds
    first = first_alone = None
    for count in args.cores:
        cores = available[:count]
        spare = available[count:] or available  # no spare core: the clients share the server's
        row = measure(folder, bases, cores, spare, args.seconds, work / f"mmprep-{count}.log", args.serve_arg)
        alone = kernels_alone(folder, bases, cores, args.seconds)
        first, first_alone = first or row, first_alone or alone
        scaling = row["req_s"] / first["req_s"]
        shared = "" if available[count:] else " (shared)"
        print(
            f"{count:>3}{len(spare):>13}{shared[:1]:>1}{row['req_s']:>9.2f}{row['req_s'] / count:>10.2f}"
            f"{scaling:>8.2f}{row['cpu_ms']:>12.1f}{alone:>22.1f}{alone / first_alone:>8.2f}",
            flush=True,
        )
        best = row
    print(
        f"llm-d's load (four new 720p images x {LOAD_RATE:.0f} req/s): mmprep needs "
        f"{LOAD_RATE / (best['req_s'] / best['cores']):.1f} cores at its {best['cores']}-core rate"
        + (
            f"; vLLM's renderer, at {args.vllm_cpu_ms:.0f} CPU-ms a request, at least "
            f"{LOAD_RATE * args.vllm_cpu_ms / 1e3:.1f}"
            if args.vllm_cpu_ms
            else ""
        )
    )


if __name__ == "__main__":
    main()
