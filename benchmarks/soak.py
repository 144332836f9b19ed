"""Soak: 2048 streams for minutes, with clients that stop reading and idle connections,
against one `mmprep serve` (echo engine): errors by kind, RSS and fds over time, /health.

    python benchmarks/soak.py                      # 3 minutes of 2048 streams, 8k words in, 1k tokens out
    python benchmarks/soak.py --minutes 1 --streams 512 --output soak.json

Phases, one server throughout:
1. idle: --idle connections opened and left silent; /health timed (one kept-alive client,
   every 20 ms) with only them open. Target: p99 under 100 ms.
2. load: `mmprep bench --prompt-words 8192 --max-tokens 1024 --concurrency N --duration D`
   (its own client processes), while --slow-readers raw sockets each ask for a long stream
   and never read it (one reopened as each is cut off) and the idle connections are kept
   (reopened when the server closes them after --keep-alive-timeout). Target: 0
   connection-level errors (refusals past --max-concurrent-requests are 503s, counted as
   refused); every slow reader cut off after the write timeout.
3. after: everything closed; once the server has nothing in flight, its RSS. Target: back
   within 64 MiB of where it started.

RSS and open fds are the server process's own (/proc), sampled every second.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's root: tests.support

from tests.support.servers import AppProcess

MODEL = "mmprep-echo"
SLOW_READER_PROMPT_CHARS = (
    400_000  # an echo answer of some 50,000 pieces: megabytes of SSE, past every buffer
)
SLOW_READER_RECEIVE_BUFFER = 4096
HEALTH_EVERY_S = 0.02
SAMPLE_EVERY_S = 1.0


def rss_and_fds(pid: int) -> tuple[float, int]:
    status = Path(f"/proc/{pid}/status").read_text()
    rss = re.search(r"VmRSS:\s+(\d+)", status)
    if rss is None:
        raise ValueError(f"/proc/{pid}/status has no VmRSS line")
    rss_kib = int(rss[1])
    return rss_kib / 1024, len(os.listdir(f"/proc/{pid}/fd"))


def metric(text: str, name: str, labels: str = "") -> float:
    match = re.search(rf"^{re.escape(name)}{re.escape(labels)} (\S+)$", text, re.MULTILINE)
    return float(match[1]) if match else 0.0


def percentiles(values: list[float]) -> dict | None:
    if not values:
        return None
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return {
        "p50": round(p50, 1),
        "p90": round(p90, 1),
        "p99": round(p99, 1),
        "max": round(max(values), 1),
        "count": len(values),
    }


class Soak:
    def __init__(self, server: AppProcess, options: argparse.Namespace):
        self.server, self.options = server, options
        if server.process is None:
            raise ValueError("the soak watches a started server: AppProcess.start() first")
        self.pid = server.process.pid  # whose memory and descriptors are sampled
        self.samples: list[dict] = []
        self.health: dict[str, list[float]] = {"idle": [], "load": [], "after": []}
        self.phase = "idle"
        self.idle: list[socket.socket] = []
        self.idle_reopened = 0
        self.slow_opened = 0
        self.stop = asyncio.Event()

    # -- what runs throughout ----------------------------------------------------------------

    async def sample(self) -> None:
        start = time.monotonic()
        while not self.stop.is_set():
            rss, fds = rss_and_fds(self.pid)
            self.samples.append(
                {
                    "t": round(time.monotonic() - start, 1),
                    "phase": self.phase,
                    "rss_mib": round(rss, 1),
                    "fds": fds,
                }
            )
            await asyncio.sleep(SAMPLE_EVERY_S)

    async def probe_health(self) -> None:
        async with httpx.AsyncClient(timeout=60) as client:
            while not self.stop.is_set():
                began = time.perf_counter()
                try:
                    ok = (await client.get(f"{self.server.url}/health")).status_code == 200
                except httpx.HTTPError:
                    ok = False
                took = (time.perf_counter() - began) * 1000
                self.health[self.phase].append(took if ok else float("inf"))
                await asyncio.sleep(HEALTH_EVERY_S)

    # -- idle connections --------------------------------------------------------------------

    async def open_idle(self, count: int) -> None:
        loop = asyncio.get_running_loop()
        for _ in range(count):
            sock = socket.socket()
            sock.setblocking(False)
            await loop.sock_connect(sock, ("127.0.0.1", self.server.port))
            self.idle.append(sock)

    async def keep_idle(self) -> None:
        """Reopen the idle connections the server closed (its keep-alive timeout)."""
        while not self.stop.is_set():
            await asyncio.sleep(1)
            alive = []
            for sock in self.idle:
                try:
                    closed = sock.recv(1) == b""
                except BlockingIOError:
                    closed = False
                except OSError:
                    closed = True
                if closed:
                    sock.close()
                else:
                    alive.append(sock)
            missing = len(self.idle) - len(alive)
            self.idle = alive
            if missing and self.phase == "load":
                self.idle_reopened += missing
                await self.open_idle(missing)

    # -- slow readers ------------------------------------------------------------------------

    async def slow_reader(self) -> None:
        """Ask for a long stream, read its headers, then nothing: until the server cuts it off."""
        body = json.dumps(
            {
                "model": MODEL,
                "stream": True,
                "messages": [{"role": "user", "content": "z" * SLOW_READER_PROMPT_CHARS}],
            }
        ).encode()
        request = (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: soak\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        loop = asyncio.get_running_loop()
        while not self.stop.is_set() and self.phase == "load":
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SLOW_READER_RECEIVE_BUFFER)
            sock.setblocking(False)
            try:
                await loop.sock_connect(sock, ("127.0.0.1", self.server.port))
                await loop.sock_sendall(sock, request)
                self.slow_opened += 1
                await loop.sock_recv(sock, 1)  # the first byte of the answer; then never another read
                while self.phase == "load" and not _closed_by_peer(sock):
                    await asyncio.sleep(0.5)
            except OSError:
                pass
            finally:
                sock.close()

    # -- the phases --------------------------------------------------------------------------

    async def run(self) -> dict:
        o = self.options
        rss0, fds0 = rss_and_fds(self.pid)
        background = [asyncio.create_task(self.sample()), asyncio.create_task(self.probe_health())]
        await self.open_idle(o.idle)
        background.append(asyncio.create_task(self.keep_idle()))
        await asyncio.sleep(o.idle_seconds)
        idle_fds = rss_and_fds(self.pid)[1]

        self.phase = "load"
        readers = [asyncio.create_task(self.slow_reader()) for _ in range(o.slow_readers)]
        bench = await asyncio.to_thread(run_bench, self.server.url, o)
        self.phase = "after"
        for sock in self.idle:
            sock.close()
        self.idle = []
        settled_s = await self.settle()
        await asyncio.sleep(o.after_seconds)
        self.stop.set()
        for task in readers + background:
            task.cancel()
        await asyncio.gather(*readers, *background, return_exceptions=True)
        async with httpx.AsyncClient(timeout=60) as client:
            metrics = (await client.get(f"{self.server.url}/metrics")).text
        rss1, fds1 = rss_and_fds(self.pid)
        load = [s for s in self.samples if s["phase"] == "load"]
        return {
            "options": {
                key: str(value) if isinstance(value, Path) else value for key, value in vars(o).items()
            },
            "bench": bench,
            "slow_readers": {
                "opened": self.slow_opened,
                "cut_off_by_write_timeout": metric(
                    metrics, "mmprep_connections_closed_total", '{reason="write_timeout"}'
                ),
            },
            "idle_connections": {
                "held": o.idle,
                "reopened_during_load": self.idle_reopened,
                "closed_by_server_idle": metric(
                    metrics, "mmprep_connections_closed_total", '{reason="idle"}'
                ),
                "server_fds_with_them_open": idle_fds,
            },
            "health_ms": {phase: percentiles(values) for phase, values in self.health.items()},
            "rss_mib": {
                "start": round(rss0, 1),
                "peak_under_load": max((s["rss_mib"] for s in load), default=None),
                "end": round(rss1, 1),
                "end_minus_start": round(rss1 - rss0, 1),
            },
            "fds": {
                "start": fds0,
                "peak_under_load": max((s["fds"] for s in load), default=None),
                "end": fds1,
            },
            "settled_after_load_s": settled_s,
            "server_requests": {
                m[0]: float(m[1])
                for m in re.findall(r'^mmprep_requests_total\{status="(\d+)"\} (\S+)$', metrics, re.MULTILINE)
            },
            "samples": self.samples,
        }

    async def settle(self, timeout: float = 120) -> float | None:
        """Seconds until the server has no request in flight and no connection open but ours."""
        start = time.monotonic()
        async with httpx.AsyncClient(timeout=30) as client:
            while time.monotonic() - start < timeout:
                text = (await client.get(f"{self.server.url}/metrics")).text
                if (
                    metric(text, "mmprep_requests_in_flight") == 0
                    and metric(text, "mmprep_connections_open") <= 2
                ):
                    return round(time.monotonic() - start, 1)
                await asyncio.sleep(0.5)
        return None


def _closed_by_peer(sock: socket.socket) -> bool:
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def run_bench(url: str, o: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        output = Path(folder) / "bench.json"
        command = [
            sys.executable,
            "-m",
            "mmprep",
            "bench",
            "--url",
            url,
            "--quiet",
            "--output",
            str(output),
            "--prompt-words",
            str(o.prompt_words),
            "--max-tokens",
            str(o.max_tokens),
            "--concurrency",
            str(o.streams),
            "--duration",
            str(o.minutes * 60),
            "--max-failure-rate",
            "1",
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if not output.exists():
            raise SystemExit(f"mmprep bench failed ({done.returncode}):\n{done.stderr}")
        metrics = json.loads(output.read_text())["runs"][0]["metrics"]
    keep = (
        "sent",
        "completed",
        "failed",
        "failure_kinds",
        "failures",
        "duration_s",
        "request_throughput",
        "output_token_throughput",
        "ttft_ms",
        "latency_ms",
        "client",
    )
    return {key: metrics[key] for key in keep}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=3.0, help="length of the load phase")
    parser.add_argument("--streams", type=int, default=2048, help="streams in flight (bench's --concurrency)")
    parser.add_argument("--prompt-words", type=int, default=8192)
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--slow-readers", type=int, default=32, help="clients that never read, at all times")
    parser.add_argument("--idle", type=int, default=2000, help="idle connections held")
    parser.add_argument("--idle-seconds", type=float, default=20.0, help="length of the idle phase")
    parser.add_argument("--after-seconds", type=float, default=10.0, help="wait after the server settled")
    parser.add_argument("--max-concurrent-requests", type=int, default=2048)
    parser.add_argument("--write-timeout", type=float, default=30.0)
    parser.add_argument("--output", type=Path, help="also write the results (with the samples) here as JSON")
    options = parser.parse_args()

    server = (
        AppProcess(
            "serve",
            "--max-concurrent-requests",
            str(options.max_concurrent_requests),
            "--write-timeout",
            str(options.write_timeout),
        )
        .start()
        .wait_ready()
    )
    try:
        print(f"load before: {os.getloadavg()}", file=sys.stderr)
        results = asyncio.run(Soak(server, options).run())
        results["loadavg_after"] = os.getloadavg()
    finally:
        server.stop()
    if options.output:
        options.output.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(json.dumps({key: value for key, value in results.items() if key != "samples"}, indent=2))


if __name__ == "__main__":
    main()
