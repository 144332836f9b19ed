"""Real servers on loopback for tests and benchmarks: any ASGI app served by uvicorn in a
thread, mmprep itself that way, and `python -m mmprep <command>` as a process (`mmprep
worker` among them). The media they fetch comes from media_store.MediaStore."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Self

import httpx
import uvicorn

from mmprep.api.app import create_app
from mmprep.core.config import Settings
from mmprep.service import Service  # the one place this module names where Service lives
from tests.support.cli import MMPREP
from tests.support.metrics import metric

# The repository's root: on a process's PYTHONPATH (`import_from=[REPO]`), `--engine-class
# tests.support.engines:<Name>` resolves there as it does in the test.
REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ThreadServer:
    """An ASGI app served by uvicorn on 127.0.0.1, on a free port (or `port`), in a background thread."""

    def __init__(self, app, port: int = 0):
        self.app = app
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
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
    """`python -m mmprep <command>` as an operator runs it: a real process on a free loopback
    port, ready when `ready_path` answers 200, which a test can kill (SIGKILL, as a crash)
    and start again on the same port. Its log goes to a file `log()` reads. Modules in the
    `import_from` folders are importable by it (REPO for `--engine-class
    tests.support.engines:SlowEngine`); it runs in `cwd` (default: the test's own)."""

    def __init__(
        self,
        command: str,
        *args: str,
        ready_path: str = "/ready",
        env: dict[str, str] | None = None,
        import_from: Iterable[Path] = (),
        cwd: Path | None = None,
    ):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.command, self.args, self.ready_path = command, args, ready_path
        self.env = {"MMPREP_LOG_LEVEL": "warning", "MMPREP_WORKER_LOG_LEVEL": "warning", **(env or {})}
        if import_from:
            self.env["PYTHONPATH"] = os.pathsep.join(str(folder) for folder in import_from)
        self.cwd = cwd
        self.process: subprocess.Popen | None = None
        self._log = tempfile.TemporaryFile()  # lives as long as the process; close() closes it

    def start(self) -> Self:
        """Start the process; `wait_ready` waits for it to answer."""
        self.process = subprocess.Popen(
            [*MMPREP, self.command, "--port", str(self.port), *self.args],
            env={**os.environ, **self.env},
            cwd=self.cwd,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
        )
        return self

    def wait_ready(self, timeout: float = 90) -> Self:
        # 90 s: a `--model` server loads its tokenizer and encoder in about 10 s on 2 quiet
        # cores, and took over 30 with the suite's two workers and other jobs beside it.
        deadline = time.monotonic() + timeout
        while True:
            try:
                if httpx.get(f"{self.url}{self.ready_path}", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            if self._started().poll() is not None or time.monotonic() > deadline:
                waited = timeout - (deadline - time.monotonic())
                raise RuntimeError(f"mmprep {self.command} did not start in {waited:.0f} s:\n{self.log()}")
            time.sleep(0.05)

    def log(self) -> str:
        self._log.seek(0)
        return self._log.read().decode()

    def kill(self) -> None:
        process = self._started()
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)

    def stop(self) -> int:
        """SIGTERM, and wait: the exit status."""
        process = self._started()
        if process.poll() is None:
            process.terminate()
        return process.wait(timeout=30)

    def _started(self) -> subprocess.Popen:
        if self.process is None:
            raise RuntimeError(f"mmprep {self.command} was never started: call start() first")
        return self.process

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

    def __init__(self, *args: str, env: dict[str, str] | None = None, import_from: Iterable[Path] = ()):
        super().__init__("worker", *args, ready_path="/health", env=env, import_from=import_from)

    def served(self, status: str = "200") -> int:
        """Requests this process answered with `status`, from its /metrics."""
        return int(
            metric(
                httpx.get(f"{self.url}/metrics", timeout=5).text,
                "mmprep_worker_requests_total",
                status=status,
            )
        )
