"""/health's worst latency while a `mmprep serve` process receives and parses a huge JSON body.

    python benchmarks/huge_body.py                      # 300 MiB, every shape, 3 runs each
    python benchmarks/huge_body.py --mib 100 --shapes parts --runs 1

A sender process posts the body over loopback to /v1/chat/completions while this process
asks /health every 10 ms; the figure is the slowest /health answer of each run (and the
median), from the first byte sent until the answer to the big request. Three shapes of body:

- `data-url`: one data URL of the whole size (a video sent inline); refused by its length
  (`--max-fetch-bytes` 64 MiB) once parsed.
- `text`: one text of the whole size, for a model the server does not serve: refused (404)
  once parsed.
- `parts`: the size in image parts of 16 KiB data URLs each (many small images sent inline),
  for a model the server does not serve: refused (404) once parsed and typed.

The server, the sender and the prober are three processes, so the sender's work and the
prober's never hold the server's interpreter; on a machine with few cores they still share
the CPU, which adds its own waits to the figures.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import textwrap
import time

import httpx

MIB = 1 << 20

SHAPES = ["data-url", "text", "parts"]
SENDER = textwrap.dedent(
    """
    import socket, sys
    port, mib, shape = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    if shape == "data-url":
        head = b'{"model": "mmprep-echo", "messages": [{"role": "user", "content": [{"type": "video_url", '
        head += b'"video_url": {"url": "data:video/mp4;base64,'
        tail = b'"}}]}]}'
        piece = b"!" * (1024 * 1024)  # not base64 at all: decoding it would fail differently
    elif shape == "text":
        head = b'{"model": "not-served", "messages": [{"role": "user", "content": "'
        tail = b'"}]}'
        piece = b"All work and no play. " * 47662 + b"x" * 12
    else:  # 64 image parts of 16 KiB a MiB, for a model this server does not serve
        head = b'{"model": "not-served", "messages": [{"role": "user", "content": ['
        part = b'{"type": "image_url", "image_url": {"url": "data:image/png;base64,'
        part += b"A" * (16 * 1024 - len(part) - 5) + b'"}},'
        piece = part * 64
        tail = b'{"type": "text", "text": "the end"}]}]}'
    length = len(head) + mib * len(piece) + len(tail)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\\r\\nHost: x\\r\\n"
                     + b"Content-Type: application/json\\r\\n"
                     + b"Content-Length: %d\\r\\nConnection: close\\r\\n\\r\\n" % length + head)
        for _ in range(mib):
            sock.sendall(piece)
        sock.sendall(tail)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    sys.stdout.buffer.write(answer)
    """
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, mib: int) -> subprocess.Popen:
    flags = ["--max-fetch-bytes", str(64 * MIB), "--max-request-bytes", str((mib + 64) * MIB)]
    server = subprocess.Popen(
        [sys.executable, "-m", "mmprep", "serve", "--port", str(port), *flags],
        env={**os.environ, "MMPREP_LOG_LEVEL": "warning"},
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return server
        except httpx.TransportError:
            time.sleep(0.1)
    server.kill()
    raise RuntimeError("mmprep serve did not start")


def probe_while_sending(port: int, mib: int, shape: str) -> tuple[list[float], str]:
    """/health's latencies (seconds), asked every 10 ms while a sender process posts a body
    of `mib` MiB in `shape` to the server on `port`, and the server's whole answer to it.
    The sender is its own process, so its work never delays this process's /health calls."""
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
        client.get("/health")
        sender = subprocess.Popen(
            [sys.executable, "-c", SENDER, str(port), str(mib), shape], stdout=subprocess.PIPE
        )
        seconds = []
        while sender.poll() is None:
            started = time.perf_counter()
            client.get("/health").raise_for_status()
            seconds.append(time.perf_counter() - started)
            time.sleep(0.01)  # the pace of the probes, not a wait
        assert sender.stdout is not None
        return seconds, sender.stdout.read().decode(errors="replace")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=300, help="the body's size in MiB")
    parser.add_argument("--shapes", nargs="+", default=SHAPES, choices=SHAPES)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    port = free_port()
    server = start_server(port, args.mib)
    try:
        for shape in args.shapes:
            for run in range(args.runs):
                seconds, answer = probe_while_sending(port, args.mib, shape)
                status = answer.partition("\r\n")[0]
                print(
                    f"{shape:>8} {args.mib} MiB run {run + 1}: /health worst {max(seconds) * 1000:.0f} ms, "
                    f"median {statistics.median(seconds) * 1000:.1f} ms over {len(seconds)} probes; "
                    f"the body: {status}",
                    flush=True,
                )
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
