"""The one loopback HTTP file server: `mmprep bench` fetches local media from it, as a
target would fetch from a media store in production, and the tests serve their fixtures
from it, with the misbehaviours of real media stores.

What it serves:

    /<file>                  a file of `folder` (when one is given)
    /<k>/<name>              a file `publish` gave this URL; with a trailer function also
                             `?request=N`: the file followed by trailer(N), appended as served
    /slow/<seconds>/<path>   waits before answering with <path>
    /drip/<path>             <path> a few bytes at a time, slowly
    /redirect/<n>/<path>     redirects n times, then answers with <path>
    /redirect-to/<url>       redirects to any URL
    /status/<code>           answers with that HTTP status
    /zeros/<n>               n zero bytes (/zeros-undeclared/<n>: without Content-Length)

Padding by trailer is how `--unique-media` gives every request different bytes without a
copy of the video per request, and why client processes can name any request's URL without
asking this server. Every GET is counted under the path it asked for (query included), with
the Host header it was asked with.

The target opens a connection per fetch (mmprep keeps no media connections alive), so at a
concurrency of C up to C connections arrive at once: the listen backlog is sized for them
(the kernel caps it at net.core.somaxconn), else the ones past it wait a SYN retry (1 s,
then 3 s) and that wait shows up as fetch time. Every connection gets its own thread.
"""

from __future__ import annotations

import mimetypes
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Self
from urllib.parse import quote, unquote

CHUNK = 1 << 20
DRIP_BYTES, DRIP_PAUSE = 64, 0.2  # slow enough that a whole fixture takes minutes
SOMAXCONN = Path("/proc/sys/net/core/somaxconn")


@dataclass(frozen=True)
class Published:
    path: Path
    content_type: str
    trailer: Callable[[int], bytes] | None  # request number -> bytes served after the file


class FileServer:
    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, connections: int = 64, folder: Path | None = None
    ):
        """`connections`: how many may arrive at once (bench passes its largest concurrency);
        `folder`: served as it is, beside what is published."""
        self.folder = folder.resolve() if folder is not None else None
        self.fetches: Counter[str] = Counter()
        self.hosts: dict[str, str] = {}  # path -> the Host header it was last asked with
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
            self._files[route] = Published(path, content_type or _guess_type(path), trailer)
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

    def _count(self, url_path: str, host: str) -> None:
        with self._lock:
            self.fetches[url_path] += 1
            self.hosts[url_path] = host

    def _lookup(self, url_path: str) -> tuple[Published, bytes] | None:
        """The file behind a URL path and the bytes to send after it; None: no such file."""
        route, _, query = url_path.partition("?")
        with self._lock:
            found = self._files.get(route)
        if found is None:
            in_folder = self._in_folder(route)
            # the folder's files ignore the query, as a static file server does
            return (Published(in_folder, _guess_type(in_folder), None), b"") if in_folder else None
        if not query:
            return found, b""
        number = query.removeprefix("request=")
        if found.trailer is None or number == query or not number.isdigit():
            return None
        return found, found.trailer(int(number))

    def _in_folder(self, route: str) -> Path | None:
        if self.folder is None:
            return None
        path = (self.folder / unquote(route).lstrip("/")).resolve()
        return path if path.is_file() and path.is_relative_to(self.folder) else None

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()


def _guess_type(path: Path) -> str:
    return mimetypes.guess_type(path.name)[0] or "application/octet-stream"


def _handler_for(files: FileServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as media stores do
        disable_nagle_algorithm = True  # else headers and a small body meet delayed ACKs: +40 ms a fetch

        def log_message(self, *args) -> None:
            pass  # a benchmark's output is its summary and a test's its assertions, not an access log

        def do_HEAD(self) -> None:
            self._send_file(self.path, send_body=False)

        def do_GET(self) -> None:
            files._count(self.path, self.headers.get("Host", ""))
            kind, _, rest = self.path.lstrip("/").partition("/")
            if kind == "slow":
                seconds, _, path = rest.partition("/")
                time.sleep(float(seconds))
                self._send_file("/" + path)
            elif kind == "drip":
                self._send_file("/" + rest, drip=True)
            elif kind == "redirect":
                left, _, path = rest.partition("/")
                self._redirect(f"/{path}" if left == "0" else f"/redirect/{int(left) - 1}/{path}")
            elif kind == "redirect-to":
                self._redirect(rest)
            elif kind == "status":
                self.send_error(int(rest))
            elif kind in ("zeros", "zeros-undeclared"):
                self._send_zeros(int(rest), declared=kind == "zeros")
            else:
                self._send_file(self.path)

        def _redirect(self, location: str) -> None:
            self.send_response(302)
            self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _send_file(self, url_path: str, send_body: bool = True, drip: bool = False) -> None:
            found = files._lookup(url_path)
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
            piece = DRIP_BYTES if drip else CHUNK
            try:
                with published.path.open("rb") as file:
                    while chunk := file.read(piece):
                        self.wfile.write(chunk)
                        if drip:
                            self.wfile.flush()
                            time.sleep(DRIP_PAUSE)
                self.wfile.write(trailer)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up on this fetch; its own error says why

        def _send_zeros(self, size: int, declared: bool) -> None:
            self.send_response(200)
            if declared:
                self.send_header("Content-Length", str(size))
            else:
                self.send_header("Connection", "close")  # the end of the body is the end of the connection
                self.close_connection = True
            self.end_headers()
            try:
                for start in range(0, size, CHUNK):
                    self.wfile.write(bytes(min(CHUNK, size - start)))
            except (BrokenPipeError, ConnectionResetError):
                pass

    return Handler
