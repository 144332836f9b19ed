"""Streams at 64, 512 and 2048 at once: the server's CPU-seconds per streamed token, and its
memory after the load while the client keeps its connections open (issue 30).

    python benchmarks/streams.py                                  # 64, 512, 2048 streams
    python benchmarks/streams.py --streams 2048 --python /work/main/.venv/bin/python --python .venv/bin/python

One `mmprep serve` per run (its own process; the replay engine, `tests.support.engines`,
streaming --pieces one-word pieces at --rate per second per stream, after an --prompt-words
prompt), and one client process (asyncio on raw sockets: it costs the server nothing it would
not cost with any client). Each of N client connections sends requests one after another,
max(N, --min-requests) in all, then keeps its connection open; --ramp opens the connections
evenly over that many seconds, as aiperf does (the memory kept after the load depends on it:
docs/benchmarks.md). Server CPU is user + system
from /proc/PID/stat over the load; RSS from /proc/PID/status, sampled every 0.2 s: at the
start (after one warm-up request), the peak, and --after seconds after the last stream ended
with every connection still open. With several --python (e.g. main's venv and this
checkout's), runs interleave them at each N, so a shared machine's load falls on both alike.
With --dynamo VENV (a venv with `pip install ai-dynamo`), Dynamo's own front door runs beside
them: `dynamo.frontend` and `dynamo.mocker` (its simulated engine, in a process of its own,
asked for --pieces tokens with ignore_eos, at its own pace), the frontend's CPU the figure
compared and the mocker's reported apart (mmprep's replay engine runs inside its server: its
figure includes the engine's work).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.support, here and (on PYTHONPATH) in the server it starts

DYNAMO_MODEL = "mock"
PAGE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def rss_mib(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def request_bytes(port: int, args: argparse.Namespace, dynamo: bool = False) -> bytes:
    """mmprep's replay engine is told its answer; Dynamo's mocker makes `pieces` tokens at its
    own simulated pace (ignore_eos: never fewer)."""
    request: dict = {
        "model": DYNAMO_MODEL if dynamo else "mmprep-echo",
        "messages": [{"role": "user", "content": "word " * args.prompt_words}],
        "stream": True,
    }
    if dynamo:
        request |= {"max_tokens": args.pieces, "ignore_eos": True}
    else:
        request["replay"] = {"texts": ["word "], "repeat": args.pieces, "interval": 1 / args.rate}
    body = json.dumps(request).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


# -- the client (its own process) ---------------------------------------------------------


async def _one_connection(
    port: int, request: bytes, todo: list[int], done: dict, hold: asyncio.Event, delay: float
):
    await asyncio.sleep(delay)  # connections arrive over the ramp, as a benchmark client opens them
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    while todo:
        todo.pop()
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            done["errors"] += 1
            body = await reader.readexactly(int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0]))
            done["error_bodies"].append(body[:200].decode(errors="replace"))
            continue
        events = 0
        while True:
            size = int((await reader.readuntil(b"\r\n"))[:-2], 16)
            chunk = await reader.readexactly(size + 2)
            if size == 0:
                break
            events += chunk.count(b"data: ")
        done["tokens"] += events - 3  # less the role chunk, the finish chunk and [DONE]
        done["streams"] += 1
    done["idle"] += 1
    await hold.wait()  # keep the connection open, as a benchmark client does between runs
    writer.close()


async def _client(port: int, streams: int, requests: int, request: bytes, ramp: float, pipe) -> None:
    todo = list(range(requests))
    done: dict = {"tokens": 0, "streams": 0, "errors": 0, "idle": 0, "error_bodies": []}
    hold = asyncio.Event()
    started = time.monotonic()
    tasks = [
        asyncio.create_task(_one_connection(port, request, todo, done, hold, ramp * i / streams))
        for i in range(streams)
    ]
    while done["idle"] < streams and not any(task.done() for task in tasks):
        await asyncio.sleep(0.05)
    pipe.send({**done, "seconds": time.monotonic() - started})
    await asyncio.get_running_loop().run_in_executor(None, pipe.recv)  # told to let go
    hold.set()
    await asyncio.gather(*tasks, return_exceptions=True)


def client_main(port: int, streams: int, requests: int, request: bytes, ramp: float, pipe) -> None:
    asyncio.run(_client(port, streams, requests, request, ramp, pipe))


# -- one run ------------------------------------------------------------------------------


class Sampler(threading.Thread):
    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peak, self.running = pid, 0.0, True

    def run(self) -> None:
        while self.running:
            try:
                self.peak = max(self.peak, rss_mib(self.pid))
            except (FileNotFoundError, ProcessLookupError):
                return
            time.sleep(0.2)


def start_mmprep(python: str, port: int, streams: int, args: argparse.Namespace) -> list[subprocess.Popen]:
    flags = ["--max-concurrent-requests", str(max(streams, 2048)), *args.server_args.split()]
    server = subprocess.Popen(
        [python, "-m", "mmprep", "serve", "--port", str(port), "--log-level", "warning"]
        + ["--engine-class", "tests.support.engines:TokenReplayEngine", *flags],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _wait_until(lambda: httpx.get(f"http://127.0.0.1:{port}/ready", timeout=1).status_code == 200, [server])
    return [server]


def start_dynamo(venv: str, port: int, args: argparse.Namespace) -> list[subprocess.Popen]:
    """Dynamo's frontend and its mocker engine on a model folder of this repo's (discovery
    through files, no etcd or NATS); the frontend first: the front door measured."""
    from tests.support.model_folder import make_model_folder

    work = Path(tempfile.mkdtemp(prefix="streams-dynamo-"))
    folder = make_model_folder("qwen2_5_vl", work / "model")
    env = {**os.environ, "DYN_FILE_KV": str(work / "kv")}
    python = f"{venv}/bin/python"
    frontend = subprocess.Popen(
        [python, "-m", "dynamo.frontend", "--discovery-backend", "file", "--http-port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    # room for every stream's prompt and answer at once (blocks of 64 tokens), and all in one batch
    blocks = 4096 * (args.prompt_words + args.pieces) // 64
    mocker = subprocess.Popen(
        [python, "-m", "dynamo.mocker", "--discovery-backend", "file", "--model-path", str(folder)]
        + ["--model-name", DYNAMO_MODEL, "--num-gpu-blocks-override", str(blocks), "--max-num-seqs", "4096"]
        + ["--max-num-batched-tokens", str(1 << 24), *args.dynamo_args.split()],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    models = f"http://127.0.0.1:{port}/v1/models"
    _wait_until(lambda: bool(httpx.get(models, timeout=1).json()["data"]), [frontend, mocker])
    return [frontend, mocker]


def _wait_until(ready, processes: list[subprocess.Popen]) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            if ready():
                return
        except (httpx.HTTPError, ValueError, KeyError):
            pass
        if time.monotonic() > deadline or any(process.poll() is not None for process in processes):
            raise RuntimeError(f"{processes[0].args!r}: the server did not start")
        time.sleep(0.2)


def run(server_kind: str, streams: int, args: argparse.Namespace) -> dict:
    """`server_kind`: an interpreter with mmprep, or "dynamo:VENV"."""
    port = free_port()
    dynamo = server_kind.startswith("dynamo:")
    if dynamo:
        processes = start_dynamo(server_kind.removeprefix("dynamo:"), port, args)
    else:
        processes = start_mmprep(server_kind, port, streams, args)
    server = processes[0]
    try:
        request = request_bytes(port, args, dynamo)
        with socket.create_connection(("127.0.0.1", port)) as warm:  # one request: imports, caches
            warm.sendall(request)
            data = b""
            while not data.endswith(b"0\r\n\r\n"):
                data += warm.recv(65536)
        time.sleep(1)
        start_rss = rss_mib(server.pid)
        sampler = Sampler(server.pid)
        sampler.start()
        here, there = multiprocessing.Pipe()
        client = multiprocessing.get_context("spawn").Process(
            target=client_main,
            args=(port, streams, max(streams, args.min_requests), request, args.ramp, there),
        )
        cpu_before = [cpu_seconds(process.pid) for process in processes]
        client.start()
        done = here.recv()
        cpu = [cpu_seconds(p.pid) - before for p, before in zip(processes, cpu_before, strict=True)]
        time.sleep(args.after)  # every connection still open
        after_rss = rss_mib(server.pid)
        here.send("let go")
        client.join(30)
        time.sleep(2)
        closed_rss = rss_mib(server.pid)
        sampler.running = False
        tokens = max(1, done["tokens"])
        return {
            "server": server_kind,
            "streams": streams,
            "completed": done["streams"],
            "errors": done["errors"],
            "error_bodies": done["error_bodies"][:3],
            "tokens": done["tokens"],
            "seconds": round(done["seconds"], 1),
            "server_cpu_s": round(cpu[0], 2),
            "cpu_us_per_token": round(cpu[0] / tokens * 1e6, 2),
            **({"engine_cpu_us_per_token": round(cpu[1] / tokens * 1e6, 2)} if dynamo else {}),
            "rss_mib": {
                "start": round(start_rss),
                "peak": round(sampler.peak),
                f"{args.after:g}s_after_kept": round(after_rss),
                "2s_after_closed": round(closed_rss),
            },
        }
    finally:
        for process in processes:
            process.terminate()
            process.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--streams", type=int, nargs="+", default=[64, 512, 2048])
    parser.add_argument("--python", nargs="+", default=[sys.executable], help="the servers' interpreters")
    parser.add_argument("--dynamo", metavar="VENV", help="also Dynamo's frontend and mocker (ai-dynamo)")
    parser.add_argument("--dynamo-args", default="", help="more `dynamo.mocker` flags (--speedup-ratio ...)")
    parser.add_argument("--pieces", type=int, default=64, help="pieces streamed per request")
    parser.add_argument("--rate", type=float, default=50.0, help="pieces per second per stream")
    parser.add_argument("--prompt-words", type=int, default=8192)
    parser.add_argument("--min-requests", type=int, default=1024, help="requests per run, at least")
    parser.add_argument(
        "--ramp", type=float, default=0.0, help="seconds to open the connections over (0: all at once)"
    )
    parser.add_argument("--after", type=float, default=10.0, help="seconds after the load to read RSS")
    parser.add_argument("--server-args", default="", help="more `mmprep serve` flags")
    parser.add_argument("--output", help="write the results as JSON here")
    args = parser.parse_args()
    results = []
    for streams in args.streams:
        for server in [*args.python, *([f"dynamo:{args.dynamo}"] if args.dynamo else [])]:
            result = run(server, streams, args)
            print(json.dumps(result), flush=True)
            results.append(result)
    if args.output:
        with open(args.output, "w") as file:
            json.dump(results, file, indent=1)


if __name__ == "__main__":
    main()
