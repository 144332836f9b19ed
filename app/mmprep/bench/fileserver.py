"""The loopback HTTP file server `mmprep bench` fetches local media from, as a target would
fetch from a media store in production.

What it serves:

    /<k>/<name>              a file `publish` gave this URL; with a trailer function also
                             `?request=N`: the file followed by trailer(N), appended as served

Padding by trailer is how `--unique-media` gives every request different bytes without a
copy of the video per request, and why client processes can name any request's URL without
asking this server. Every GET is counted under the path it asked for (query included).

The target opens a connection per fetch (mmprep keeps no media connections alive), so at a
concurrency of C up to C connections arrive at once: the listen backlog is sized for them
(the kernel caps it at net.core.somaxconn), else the ones past it wait a SYN retry (1 s,
then 3 s) and that wait shows up as fetch time. Every connection gets its own thread.

The tests serve their fixtures from a subclass with the misbehaviours of real media stores
(tests/support/media_store.py): `FileServer.handler` answers a GET in `answer`, and writes
a file's bytes in `write_file`, for a subclass to say otherwise.
"""

from __future__ import annotations

import mimetypes
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import BinaryIO, Self
from urllib.parse import quote

CHUNK = 1 << 20
SOMAXCONN = Path("/proc/sys/net/core/somaxconn")


@dataclass(frozen=True)
class Published:
    path: Path
    content_type: str
    trailer: Callable[[int], bytes] | None  # request number -> bytes served after the file


class FileHandler(BaseHTTPRequestHandler):
    """One connection's requests, answered from `files` (set on a subclass per server)."""

    files: FileServer
    protocol_version = "HTTP/1.1"  # keep-alive, as media stores do
    disable_nagle_algorithm = True  # else headers and a small body meet delayed ACKs: +40 ms a fetch

    def log_message(self, *args) -> None:
        pass  # a benchmark's output is its summary and a test's its assertions, not an access log

    def do_HEAD(self) -> None:
        self.send_file(self.path, send_body=False)

    def do_GET(self) -> None:
        self.files.count(self.path)
        self.answer(self.path)

    def answer(self, url_path: str) -> None:
        """Answer a GET of `url_path` (counted already)."""
        self.send_file(url_path)

    def send_file(self, url_path: str, send_body: bool = True) -> None:
        found = self.files.lookup(url_path)
        if found is None:
            self.send_error(404)
            return
        published, trailer = found
        self.send_response(200)
        self.send_header("Content-Type", published.content_type)
        self.send_header("Content-Length", str(published.path.stat().st_size + len(trailer)))
        self.end_headers()
        if not send_body:
            return
        try:
            with published.path.open("rb") as file:
                self.write_file(file)
            self.wfile.write(trailer)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up on this fetch; its own error says why

    def write_file(self, file: BinaryIO) -> None:
        while chunk := file.read(CHUNK):
            self.wfile.write(chunk)


class FileServer:
    handler: type[FileHandler] = FileHandler

    def __init__(self, host: str = "127.0.0.1", port: int = 0, connections: int = 64):
        """`connections`: how many may arrive at once (bench passes its largest concurrency)."""
        self.fetches: Counter[str] = Counter()
        self._files: dict[str, Published] = {}
        self._lock = threading.Lock()
        handler = type("Handler", (self.handler,), {"files": self})
        self._server = ThreadingHTTPServer((host, port), handler, bind_and_activate=False)
        self._server.daemon_threads = True
        self._server.request_queue_size = connections  # listen() backlog; the default is 5
        try:
            self._server.server_bind()
            self._server.server_activate()
        except OSError:
            self._server.server_close()
            raise
        bound_host, bound_port = self._server.server_address[:2]
        assert isinstance(bound_host, str)  # an AF_INET or AF_INET6 socket names its host as text
        self.url = f"http://{'[' + bound_host + ']' if ':' in bound_host else bound_host}:{bound_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="file-server", daemon=True)

    def publish(
        self, path: Path, content_type: str | None = None, trailer: Callable[[int], bytes] | None = None
    ) -> str:
        """A new URL that serves `path`; with `trailer`, `URL?request=N` serves it followed
        by trailer(N)."""
        with self._lock:
            route = f"/{len(self._files)}/{quote(path.name)}"
            self._files[route] = Published(path, content_type or guess_type(path), trailer)
        return self.url + route

    def backlog_cap(self) -> int | None:
        """The kernel's cap on listen backlogs when it is below what was asked, else None."""
        try:
            cap = int(SOMAXCONN.read_text())
        except (OSError, ValueError):
            return None
        return cap if cap < self._server.request_queue_size else None

    def summary(self) -> dict:
        with self._lock:
            return {
                "url": self.url,
                "published": len(self._files),
                "fetches": sum(self.fetches.values()),
                "urls_fetched": len(self.fetches),
                "most_fetches_of_one_url": max(self.fetches.values(), default=0),
            }

    def count(self, url_path: str) -> None:
        with self._lock:
            self.fetches[url_path] += 1

    def lookup(self, url_path: str) -> tuple[Published, bytes] | None:
        """The file behind a URL path and the bytes to send after it; None: no such file."""
        route, _, query = url_path.partition("?")
        with self._lock:
            found = self._files.get(route)
        if found is None:
            return None
        if not query:
            return found, b""
        number = query.removeprefix("request=")
        if found.trailer is None or number == query or not number.isdigit():
            return None
        return found, found.trailer(int(number))

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()


def guess_type(path: Path) -> str:
    return mimetypes.guess_type(path.name)[0] or "application/octet-stream"
