"""Real servers on loopback for the service tests: mmprep itself (uvicorn in a thread),
`mmprep worker` processes, and a media server (the standard library's HTTP server) with a
few misbehaviours."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Self

import httpx
import uvicorn

from app.api.app import create_app
from app.core.config import Settings
from app.service import Service

TESTS = Path(__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ThreadServer:
    """An ASGI app served by uvicorn on 127.0.0.1, on a free port, in a background thread."""

    def __init__(self, app):
        self.app = app
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the server did not start")
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=20)


class LiveServer(ThreadServer):
    """mmprep itself, served in a background thread.

    Media URLs may reach loopback (the tests' own media servers live there) unless a
    test says allow_private_networks=False, as the SSRF tests do.
    """

    def __init__(self, settings: Settings | None = None, engine=None, **overrides):
        overrides.setdefault("allow_private_networks", True)
        settings = settings or Settings(**overrides)
        super().__init__(create_app(service=Service(settings, engine)))
        self.service = self.app.state.service


class AppProcess:
    """`python -m app <command>` as an operator runs it: a real process on a free loopback
    port, ready when `ready_path` answers 200, which a test can kill (SIGKILL, as a crash)
    and start again on the same port. Its log goes to a file `log()` reads. Engines in
    tests/ are importable by it (`--engine-class engines:SlowEngine`)."""

    def __init__(self, command: str, *args: str, ready_path: str = "/ready", env: dict[str, str] | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.command, self.args, self.ready_path = command, args, ready_path
        self.env = {"MMPREP_LOG_LEVEL": "warning", "MMPREP_WORKER_LOG_LEVEL": "warning", **(env or {})}
        self.process: subprocess.Popen | None = None
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the process; close() closes it

    def start(self) -> Self:
        """Start the process; `wait_ready` waits for it to answer."""
        self.process = subprocess.Popen(
            [sys.executable, "-m", "app", self.command, "--port", str(self.port), *self.args],
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)]), **self.env},
            stdout=subprocess.DEVNULL, stderr=self._log,
        )
        return self

    def wait_ready(self, timeout: float = 30) -> Self:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if httpx.get(f"{self.url}{self.ready_path}", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"mmprep {self.command} did not start:\n{self.log()}")
            time.sleep(0.05)

    def log(self) -> str:
        self._log.seek(0)
        return self._log.read().decode()

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> int:
        """SIGTERM, and wait: the exit status."""
        if self.process.poll() is None:
            self.process.terminate()
        return self.process.wait(timeout=30)

    def close(self) -> None:
        if self.process is not None:
            self.stop()
        self._log.close()

    def __enter__(self) -> Self:
        return self.start().wait_ready()

    def __exit__(self, *exc) -> None:
        self.close()


class WorkerProcess(AppProcess):
    """`mmprep worker`, ready when /health answers."""

    def __init__(self, *args: str, env: dict[str, str] | None = None):
        super().__init__("worker", *args, ready_path="/health", env=env)

    def served(self, status: str = "200") -> int:
        """Requests this process answered with `status`, from its /metrics."""
        text = httpx.get(f"{self.url}/metrics", timeout=5).text
        found = re.search(rf'^mmprep_worker_requests_total{{status="{status}"}} (\S+)$', text, re.MULTILINE)
        return int(float(found.group(1))) if found else 0


class MediaServer:
    """Serves a folder over HTTP, counting requests per path, with extra routes:

    /slow/<seconds>/<file>   waits before answering
    /drip/<file>             sends the file a few bytes at a time, slowly
    /redirect/<n>/<file>     redirects n times, then serves the file
    /redirect-to/<url>       redirects to any URL
    /status/<code>           answers with that HTTP status
    /zeros/<n>               n zero bytes (/zeros-undeclared/<n>: without Content-Length)
    """

    def __init__(self, folder: Path):
        self.hits: Counter[str] = Counter()
        self.hosts: dict[str, str] = {}  # path -> the Host header it was asked with
        media = self

        class Handler(SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=str(folder), **kwargs)

            def log_message(self, *args):
                pass

            def do_GET(self):
                media.hits[self.path] += 1
                media.hosts[self.path] = self.headers.get("Host", "")
                parts = self.path.strip("/").split("/")
                if parts[0] == "redirect-to":
                    self.send_response(302)
                    self.send_header("Location", self.path.split("/redirect-to/", 1)[1])
                    self.end_headers()
                    return
                if parts[0] == "slow":
                    time.sleep(float(parts[1]))
                    self.path = "/" + "/".join(parts[2:])
                elif parts[0] == "redirect":
                    left = int(parts[1])
                    target = "/" + "/".join(parts[2:]) if left == 0 else f"/redirect/{left - 1}/" + "/".join(parts[2:])
                    self.send_response(302)
                    self.send_header("Location", target)
                    self.end_headers()
                    return
                elif parts[0] == "status":
                    self.send_error(int(parts[1]))
                    return
                elif parts[0] in ("zeros", "zeros-undeclared"):
                    size = int(parts[1])
                    self.send_response(200)
                    if parts[0] == "zeros":
                        self.send_header("Content-Length", str(size))
                    self.end_headers()
                    try:
                        for _ in range(0, size, 65536):
                            self.wfile.write(bytes(65536))
                    except (BrokenPipeError, ConnectionResetError):
                        pass
                    return
                elif parts[0] == "drip":
                    data = (folder / parts[1]).read_bytes()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    try:
                        for i in range(0, len(data), 64):
                            self.wfile.write(data[i : i + 64])
                            self.wfile.flush()
                            time.sleep(0.2)
                    except (BrokenPipeError, ConnectionResetError):
                        pass
                    return
                super().do_GET()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
