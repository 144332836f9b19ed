"""A media store on loopback for the tests and benchmarks: the bench's file server
(mmprep.bench.fileserver) with a folder served as it is, and the misbehaviours of real media
stores.

What it serves beside the bench's published files:

    /<file>                  a file of `folder` (when one is given)
    /slow/<seconds>/<path>   waits before answering with <path>
    /drip/<path>             <path> a few bytes at a time, slowly
    /redirect/<n>/<path>     redirects n times, then answers with <path>
    /redirect-to/<url>       redirects to any URL
    /status/<code>           answers with that HTTP status
    /zeros/<n>               n zero bytes (/zeros-undeclared/<n>: without Content-Length)

Every GET is counted under the path it asked for (query included), with the Host header it
was asked with (`hosts`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import BinaryIO
from urllib.parse import unquote

from mmprep.bench.fileserver import CHUNK, FileHandler, FileServer, Published, guess_type

DRIP_BYTES, DRIP_PAUSE = 64, 0.2  # slow enough that a whole fixture takes minutes


class MisbehavingHandler(FileHandler):
    files: MediaStore
    dripping = False

    def answer(self, url_path: str) -> None:
        self.files.hosts[url_path] = self.headers.get("Host", "")
        kind, _, rest = url_path.lstrip("/").partition("/")
        self.dripping = kind == "drip"
        if kind == "slow":
            seconds, _, path = rest.partition("/")
            time.sleep(float(seconds))
            self.send_file("/" + path)
        elif kind == "drip":
            self.send_file("/" + rest)
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
            super().answer(url_path)

    def write_file(self, file: BinaryIO) -> None:
        if not self.dripping:
            super().write_file(file)
            return
        while chunk := file.read(DRIP_BYTES):
            self.wfile.write(chunk)
            self.wfile.flush()
            time.sleep(DRIP_PAUSE)

    def _redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

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


class MediaStore(FileServer):
    handler = MisbehavingHandler

    def __init__(self, folder: Path | None = None, **server):
        """`folder`: served as it is, beside what is published; `server`: FileServer's."""
        self.folder = folder.resolve() if folder is not None else None
        self.hosts: dict[str, str] = {}  # path -> the Host header it was last asked with
        super().__init__(**server)

    def lookup(self, url_path: str) -> tuple[Published, bytes] | None:
        found = super().lookup(url_path)
        if found is not None:
            return found
        # the folder's files ignore the query, as a static file server does
        in_folder = self._in_folder(url_path.partition("?")[0])
        return (Published(in_folder, guess_type(in_folder), None), b"") if in_folder else None

    def _in_folder(self, route: str) -> Path | None:
        if self.folder is None:
            return None
        path = (self.folder / unquote(route).lstrip("/")).resolve()
        return path if path.is_file() and path.is_relative_to(self.folder) else None
