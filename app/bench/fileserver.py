"""The file server bench starts so the target fetches local media over HTTP, as it would
fetch from a media store in production.

Each published file gets a URL of its own. A file published with a trailer function is
also served as `URL?request=N`: the file followed by trailer(N), bytes appended as served.
That is how --unique-media gives every request different bytes without keeping a copy of
the video per request, and why client processes can name any request's URL without asking
this server. Fetches are counted per URL.

The target opens a connection per fetch (mmprep keeps no media connections alive), so at a
concurrency of C up to C connections arrive at once: the listen backlog is sized for them
(the kernel caps it at net.core.somaxconn), else the ones past it wait a SYN retry (1 s,
then 3 s) and that wait shows up as fetch time. Every connection gets its own thread.
"""

from __future__ import annotations

import mimetypes
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Self
from urllib.parse import quote

CHUNK = 1 << 20
SOMAXCONN = Path("/proc/sys/net/core/somaxconn")


@dataclass(frozen=True)
class Published:
    path: Path
    content_type: str
    trailer: Callable[[int], bytes] | None  # request number -> bytes served after the file


class FileServer:
    def __init__(self, host: str = "127.0.0.1", port: int = 0, connections: int = 64):
        """`connections`: how many may arrive at once (bench passes its largest concurrency)."""
        self.fetches: Counter[str] = Counter()
        self._files: dict[str, Published] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((host, port), _handler_for(self), bind_and_activate=False)
        self._server.daemon_threads = True
        self._server.request_queue_size = connections  # listen() backlog; the default is 5
        try:
            self._server.server_bind()
            self._server.server_activate()
        except OSError:
            self._server.server_close()
            raise
        bound_host, bound_port = self._server.server_address[:2]
        self.url = f"http://{'[' + bound_host + ']' if ':' in bound_host else bound_host}:{bound_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="bench-file-server", daemon=True)

    def publish(self, path: Path, content_type: str | None = None,
                trailer: Callable[[int], bytes] | None = None) -> str:
        """A new URL that serves `path`; with `trailer`, `URL?request=N` serves it followed
        by trailer(N)."""
        content_type = content_type or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        with self._lock:
            route = f"/{len(self._files)}/{quote(path.name)}"
            self._files[route] = Published(path, content_type, trailer)
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

    def _lookup(self, url_path: str, count: bool) -> tuple[Published, bytes] | None:
        """The file behind a URL path and the bytes to send after it; None: no such URL."""
        route, _, query = url_path.partition("?")
        with self._lock:
            found = self._files.get(route)
        if found is None:
            return None
        trailer = b""
        if query:
            number = query.removeprefix("request=")
            if found.trailer is None or number == query or not number.isdigit():
                return None
            trailer = found.trailer(int(number))
        if count:
            with self._lock:
                self.fetches[url_path] += 1
        return found, trailer

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()


def _handler_for(files: FileServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as media stores do
        disable_nagle_algorithm = True  # else headers and a small body meet delayed ACKs: +40 ms a fetch

        def log_message(self, *args) -> None:
            pass  # the benchmark's output is the summary, not an access log

        def do_GET(self) -> None:
            self._answer(send_body=True)

        def do_HEAD(self) -> None:
            self._answer(send_body=False)

        def _answer(self, send_body: bool) -> None:
            found = files._lookup(self.path, count=send_body)
            if found is None:
                self.send_error(404)
                return
            published, trailer = found
            size = published.path.stat().st_size + len(trailer)
            self.send_response(200)
            self.send_header("Content-Type", published.content_type)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            if not send_body:
                return
            try:
                with published.path.open("rb") as file:
                    while chunk := file.read(CHUNK):
                        self.wfile.write(chunk)
                self.wfile.write(trailer)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the target gave up on this fetch; its own error says why

    return Handler
