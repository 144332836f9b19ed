"""The media bench sends: which inputs there are, and how each request carries them.

Inputs are local files (or folders of them), http(s) URLs, and generated videos. Each
request gets the next video and the next image in turn. Local media goes out as a URL of
bench's loopback file server (--media-as url) or inline as a data URL (--media-as data);
http(s) inputs go out as they are, or inline after one download.

--unique-media pads every request's video with a few bytes the container format says to
skip (an MP4 `free` box, a Matroska Void element, an AVI JUNK chunk): the frames stay the
same, the bytes differ, so neither a URL-keyed nor a content-keyed cache can hide the
fetch and decode.
"""

from __future__ import annotations

import base64
import functools
import mimetypes
import struct
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import av
import httpx

from mmprep.decoders import IMAGE_SUFFIXES, VIDEO_SUFFIXES

from .config import BenchConfig, SyntheticOptions
from .errors import BenchError
from .fileserver import FileServer
from .synthetic import CLIP_VERSION, CODECS, synthetic_cache, write_clip

MIME_TYPES = {
    ".mkv": "video/x-matroska",
    ".webm": "video/webm",
    ".mp4": "video/mp4",
    ".mov": "video/quicktime",
}


@dataclass
class MediaInput:
    kind: str  # "video" or "image"
    name: str
    path: Path | None = None  # a local file
    url: str | None = None  # an http(s) input, sent as it is
    data: bytes | None = None  # the bytes, when bench sends them itself (data URLs) or pads them
    crc32: int | None = None  # of `data`
    shared_url: str | None = (
        None  # its file server URL, or its data URL when every request sends the same bytes
    )

    @property
    def mime(self) -> str:
        suffix = Path(self.name).suffix.lower()
        return MIME_TYPES.get(suffix) or mimetypes.guess_type(self.name)[0] or f"{self.kind}/octet-stream"


def collect_inputs(config: BenchConfig, note=print) -> list[MediaInput]:
    """Every input, checked: files exist, folders hold media, URLs are http(s)."""
    inputs = [item for spec in config.video for item in _expand(spec, "video", VIDEO_SUFFIXES)]
    inputs += [item for spec in config.image for item in _expand(spec, "image", IMAGE_SUFFIXES)]
    inputs += [
        MediaInput("video", path.name, path=path) for path in generate_synthetic(config, config.seed, note)
    ]
    return inputs


def _expand(spec: str, kind: str, suffixes: frozenset[str]) -> list[MediaInput]:
    if spec.startswith(("http://", "https://")):
        return [MediaInput(kind, spec.rsplit("/", 1)[-1].split("?")[0] or spec, url=spec)]
    if "://" in spec or spec.startswith("data:"):
        raise BenchError(f"{spec[:60]!r}: give a file, a folder or an http(s) URL")
    path = Path(spec).expanduser()
    if path.is_file():
        return [MediaInput(kind, path.name, path=path)]
    if path.is_dir():
        found = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in suffixes)
        if not found:
            raise BenchError(f"the folder {spec!r} holds no {kind} files ({', '.join(sorted(suffixes))})")
        return [MediaInput(kind, p.name, path=p) for p in found]
    raise BenchError(f"{spec!r} is neither a file nor a folder")


def generate_synthetic(options: SyntheticOptions, seed: int = 0, note=print) -> list[Path]:
    """--synthetic N camera-like clips with the options' size, length, rate and codec;
    each its own scene (seed + i), so they are different videos, not copies. Clips are kept
    in the cache folder (synthetic_cache()), one folder per set of options, and made only
    when missing there."""
    count = options.synthetic
    if not count:
        return []
    width, height = options.synthetic_dimensions()
    codec = options.synthetic_codec
    folder = synthetic_cache() / (
        f"{options.synthetic_size}_{options.synthetic_duration:g}s_{options.synthetic_fps}fps_{codec}_seed{seed}"
        f"_v{CLIP_VERSION}_pyav{av.__version__}"
    )
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    paths, made = [], 0
    for i in range(count):
        path = folder / f"synthetic_{i}_{options.synthetic_size}_{codec}{CODECS[codec].suffix}"
        if not path.is_file():
            write_clip(
                path, width, height, options.synthetic_duration, options.synthetic_fps, codec, seed + i
            )
            made += 1
        paths.append(path)
    what = (
        f"{count} {codec} video(s), {options.synthetic_size}, "
        f"{options.synthetic_duration:g} s at {options.synthetic_fps} fps"
    )
    if made:
        note(f"generated {made} of {what} in {time.perf_counter() - started:.1f} s, kept in {folder}")
    else:
        note(f"{what}: all {count} from the cache, {folder}")
    return paths


def _loaded(item: MediaInput) -> bytes:
    """`item`'s bytes, which _load reads for every input bench pads or sends as a data URL."""
    assert item.data is not None, f"{item.name}: bytes not loaded"
    return item.data


def unique_trailer(head: bytes, number: int, name: str = "the video") -> bytes:
    """Bytes to append to a video that its container format says to skip, different for
    every `number`. `head` is the file's first bytes, to tell the format."""
    payload = f"mmprep-bench request {number}".encode()
    if head[4:8] in (b"ftyp", b"moov", b"mdat", b"free", b"wide", b"skip"):  # MP4, MOV: a top-level free box
        return struct.pack(">I", 8 + len(payload)) + b"free" + payload
    if head[:4] == b"\x1a\x45\xdf\xa3":  # Matroska, WebM: a Void element (ID 0xEC, 8-byte size)
        return b"\xec\x01" + len(payload).to_bytes(7, "big") + payload
    if head[:4] == b"RIFF" and head[8:12] == b"AVI ":  # AVI: a JUNK chunk, padded to even size
        payload += b"\0" * (len(payload) % 2)
        return b"JUNK" + struct.pack("<I", len(payload)) + payload
    raise BenchError(
        f"--unique-media: {name} is not MP4/MOV, Matroska/WebM or AVI, so bench cannot pad it safely"
    )


class MediaSender:
    """Turns a request's number into its media parts, and a record of what was sent.

    It holds no connection to the file server (only the URLs published on it), so client
    processes take a copy of it and build any request's parts themselves."""

    def __init__(self, inputs: list[MediaInput], media_as: str, unique: bool):
        self._videos = [item for item in inputs if item.kind == "video"]
        self._images = [item for item in inputs if item.kind == "image"]
        self._media_as, self._unique = media_as, unique
        self._load(inputs)

    def _load(self, inputs: list[MediaInput]) -> None:
        """Read (or download) what bench sends itself, once, and check it can be padded."""
        for item in inputs:
            padded = self._pads(item)
            if item.url and padded and self._media_as == "url":
                raise BenchError(
                    f"--unique-media cannot change the bytes behind {item.url}: "
                    "download it, or add --media-as data"
                )
            if item.url and self._media_as == "data":
                item.data = _download(item.url)
            elif item.path and (self._media_as == "data" or padded):
                item.data = item.path.read_bytes()
            if padded:
                unique_trailer(_loaded(item)[:16], 0, item.name)  # fails now, not mid-run
            if item.data is not None:
                item.crc32 = zlib.crc32(item.data)

    def publish(self, server: FileServer) -> None:
        """Give every local file sent as a URL its URL on `server` (padded per request when
        --unique-media asks)."""
        for item in self._videos + self._images:
            if item.path and self._media_as == "url":
                trailer = functools.partial(unique_trailer, _loaded(item)[:16]) if self._pads(item) else None
                item.shared_url = server.publish(item.path, item.mime, trailer)

    def parts(self, number: int) -> tuple[list[dict], list[dict]]:
        """The content parts of request `number` (a video, then an image, as present)."""
        parts, sent = [], []
        for kind, pool in (("video", self._videos), ("image", self._images)):
            if pool:
                item = pool[number % len(pool)]
                url, record = self._send(item, number)
                parts.append({"type": f"{kind}_url", f"{kind}_url": {"url": url}})
                sent.append(record)
        return parts, sent

    def _pads(self, item: MediaInput) -> bool:
        return self._unique and item.kind == "video"

    def _send(self, item: MediaInput, number: int) -> tuple[str, dict]:
        trailer = unique_trailer(_loaded(item)[:16], number) if self._pads(item) else b""
        record: dict[str, str | int] = {"kind": item.kind, "name": item.name}
        if item.data is not None:
            assert item.crc32 is not None  # _load sets it with the data
            record["bytes"] = len(item.data) + len(trailer)
            record["crc32"] = f"{zlib.crc32(trailer, item.crc32):08x}"  # crc32 of data + trailer
        if item.url and self._media_as == "url":
            url = item.url
        elif self._media_as == "url":
            assert item.shared_url is not None  # publish gave every local file its URL
            url = f"{item.shared_url}?request={number}" if trailer else item.shared_url
        elif trailer:
            url = f"data:{item.mime};base64," + base64.b64encode(_loaded(item) + trailer).decode()
        else:
            if item.shared_url is None:  # the same bytes every time: encoded once
                item.shared_url = f"data:{item.mime};base64," + base64.b64encode(_loaded(item)).decode()
            url = item.shared_url
        if self._media_as == "url":
            record["url"] = url
        return url, record


def needs_file_server(inputs: list[MediaInput], media_as: str) -> bool:
    return media_as == "url" and any(item.path for item in inputs)


def _download(url: str) -> bytes:
    try:
        response = httpx.get(url, follow_redirects=True, timeout=60)
        response.raise_for_status()
    except httpx.HTTPError as error:
        raise BenchError(f"cannot download {url} to send it inline: {error}") from None
    return response.content
