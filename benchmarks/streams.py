"""Streams at 64, 512 and 2048 at once: the server's CPU-seconds per streamed token, and its
memory after the load while the client keeps its connections open (issue 30).

    python benchmarks/streams.py                                  # 64, 512, 2048 streams
    python benchmarks/streams.py --streams 2048 --python /work/main/.venv/bin/python --python .venv/bin/python

One `mmprep serve` per run (its own process; the replay engine, `mmprep.testing.replay`,
streaming --pieces one-word pieces at --rate per second per stream, after an --prompt-words
prompt), and one client process (asyncio on raw sockets: it costs the server nothing it would
not cost with any client). Each of N client connections sends requests one after another,
max(N, --min-requests) in all, then keeps its connection open. Server CPU is user + system
from /proc/PID/stat over the load; RSS from /proc/PID/status, sampled every 0.2 s: at the
start (after one warm-up request), the peak, and --after seconds after the last stream ended
with every connection still open. With several --python (e.g. main's venv and this
checkout's), runs interleave them at each N, so a shared machine's load falls on both alike.
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
import threading
import time

import httpx

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


def request_bytes(port: int, args: argparse.Namespace) -> bytes:
    body = json.dumps(
        {
            "model": "mmprep-echo",
            "messages": [{"role": "user", "content": "word " * args.prompt_words}],
            "stream": True,
            "replay": {"texts": ["word "], "repeat": args.pieces, "interval": 1 / args.rate},
        }
    ).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


# -- the client (its own process) ---------------------------------------------------------


async def _one_connection(port: int, request: bytes, todo: list[int], done: dict, hold: asyncio.Event):
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


async def _client(port: int, streams: int, requests: int, request: bytes, pipe) -> None:
    todo = list(range(requests))
    done: dict = {"tokens": 0, "streams": 0, "errors": 0, "idle": 0, "error_bodies": []}
    hold = asyncio.Event()
    started = time.monotonic()
    tasks = [asyncio.create_task(_one_connection(port, request, todo, done, hold)) for _ in range(streams)]
    while done["idle"] < streams and not any(task.done() for task in tasks):
        await asyncio.sleep(0.05)
    pipe.send({**done, "seconds": time.monotonic() - started})
    await asyncio.get_running_loop().run_in_executor(None, pipe.recv)  # told to let go
    hold.set()
    await asyncio.gather(*tasks, return_exceptions=True)


def client_main(port: int, streams: int, requests: int, request: bytes, pipe) -> None:
    asyncio.run(_client(port, streams, requests, request, pipe))


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


def run(python: str, streams: int, args: argparse.Namespace) -> dict:
    port = free_port()
    flags = ["--max-concurrent-requests", str(max(streams, 2048)), *args.server_args.split()]
    server = subprocess.Popen(
        [python, "-m", "mmprep", "serve", "--port", str(port), "--log-level", "warning"]
        + ["--engine-class", "mmprep.testing.replay:TokenReplayEngine", *flags],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError(f"{python}: the server did not start")
            time.sleep(0.2)
        request = request_bytes(port, args)
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
            target=client_main, args=(port, streams, max(streams, args.min_requests), request, there)
        )
        cpu_before = cpu_seconds(server.pid)
        client.start()
        done = here.recv()
        cpu = cpu_seconds(server.pid) - cpu_before
        time.sleep(args.after)  # every connection still open
        after_rss = rss_mib(server.pid)
        here.send("let go")
        client.join(30)
        time.sleep(2)
        closed_rss = rss_mib(server.pid)
        sampler.running = False
        return {
            "python": python,
            "streams": streams,
            "completed": done["streams"],
            "errors": done["errors"],
            "error_bodies": done["error_bodies"][:3],
            "tokens": done["tokens"],
            "seconds": round(done["seconds"], 1),
            "server_cpu_s": round(cpu, 2),
            "cpu_us_per_token": round(cpu / max(1, done["tokens"]) * 1e6, 2),
            "rss_mib": {
                "start": round(start_rss),
                "peak": round(sampler.peak),
                f"{args.after:g}s_after_kept": round(after_rss),
                "2s_after_closed": round(closed_rss),
            },
        }
    finally:
        server.terminate()
        server.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--streams", type=int, nargs="+", default=[64, 512, 2048])
    parser.add_argument("--python", nargs="+", default=[sys.executable], help="the servers' interpreters")
    parser.add_argument("--pieces", type=int, default=64, help="pieces streamed per request")
    parser.add_argument("--rate", type=float, default=50.0, help="pieces per second per stream")
    parser.add_argument("--prompt-words", type=int, default=8192)
    parser.add_argument("--min-requests", type=int, default=1024, help="requests per run, at least")
    parser.add_argument("--after", type=float, default=10.0, help="seconds after the load to read RSS")
    parser.add_argument("--server-args", default="", help="more `mmprep serve` flags")
    parser.add_argument("--output", help="write the results as JSON here")
    args = parser.parse_args()
    results = []
    for streams in args.streams:
        for python in args.python:
            result = run(python, streams, args)
            print(json.dumps(result), flush=True)
            results.append(result)
    if args.output:
        with open(args.output, "w") as file:
            json.dump(results, file, indent=1)


if __name__ == "__main__":
    main()
