"""The file server bench starts so the target fetches local media over HTTP, as it would
fetch from a media store in production.

Each published file gets a URL of its own, and may carry a trailer (bytes appended to the
file as served): that is how --unique-media gives every request different bytes without
keeping a copy of the video per request. Fetches are counted per URL.
"""

from __future__ import annotations

import mimetypes
import threading
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Self
from urllib.parse import quote

CHUNK = 1 << 20


@dataclass(frozen=True)
class Published:
    path: Path
    trailer: bytes
    content_type: str


class FileServer:
    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        self.fetches: Counter[str] = Counter()
        self._files: dict[str, Published] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((host, port), _handler_for(self))
        self._server.daemon_threads = True
        bound_host, bound_port = self._server.server_address[:2]
        self.url = f"http://{'[' + bound_host + ']' if ':' in bound_host else bound_host}:{bound_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="bench-file-server", daemon=True)

    def publish(self, path: Path, trailer: bytes = b"", content_type: str | None = None) -> str:
        """A new URL that serves `path` followed by `trailer`."""
        content_type = content_type or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        with self._lock:
            route = f"/{len(self._files)}/{quote(path.name)}"
            self._files[route] = Published(path, trailer, content_type)
        return self.url + route

    def summary(self) -> dict:
        with self._lock:
            return {
                "url": self.url,
                "published": len(self._files),
                "fetches": sum(self.fetches.values()),
                "urls_fetched": len(self.fetches),
                "most_fetches_of_one_url": max(self.fetches.values(), default=0),
            }

    def _lookup(self, route: str, count: bool) -> Published | None:
        with self._lock:
            found = self._files.get(route)
            if found is not None and count:
                self.fetches[route] += 1
            return found

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
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
            published = files._lookup(self.path, count=send_body)
            if published is None:
                self.send_error(404)
                return
            size = published.path.stat().st_size + len(published.trailer)
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
                self.wfile.write(published.trailer)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the target gave up on this fetch; its own error says why

    return Handler
