"""Fetch the bytes behind a media URL: http(s), data: or file://, within limits.

One shared httpx client per service. The byte cap is enforced while the body streams,
so an oversized download stops at the cap instead of after it; redirects are followed
by hand, hop by hop, so each hop is checked and counted.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import httpx

from .data_url import DataURL
from .errors import (
    FetchTooLargeError,
    InvalidMediaURLError,
    LocalFileNotFoundError,
    MediaFetchError,
    MediaForbiddenError,
)
from .network import NetworkPolicy

REDIRECT_STATUSES = {301, 302, 303, 307, 308}
# Data URLs bigger than this are decoded off the event loop.
INLINE_DECODE_BYTES = 1 << 20


@dataclass(frozen=True)
class FetchedMedia:
    data: bytes
    content_type: str | None  # as the server or the data URL declared it
    scheme: str  # "http", "https", "data" or "file"


@dataclass(frozen=True)
class FetchLimits:
    max_bytes: int
    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    max_redirects: int = 5
    allowed_local_paths: tuple[Path, ...] = ()


class MediaFetcher:
    def __init__(self, limits: FetchLimits, policy: NetworkPolicy | None = None):
        self.limits = limits
        self.policy = policy or NetworkPolicy()
        timeout = httpx.Timeout(
            connect=limits.connect_timeout,
            read=limits.read_timeout,
            write=limits.read_timeout,
            pool=limits.connect_timeout,
        )
        self._client = httpx.AsyncClient(
            timeout=timeout,
            follow_redirects=False,
            headers={"User-Agent": "mmprep", "Accept-Encoding": "identity"},
            # Connections are pinned to vetted IP addresses, and two hosts can share one:
            # never reuse a connection made for one host (and its TLS name) for another.
            limits=httpx.Limits(max_keepalive_connections=0),
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def fetch(self, url: str | DataURL) -> FetchedMedia:
        """`url` as the client sent it; a long data URL arrives already parsed
        (mmprep.transport.json_body)."""
        if isinstance(url, DataURL):
            return await _decode_data_url(url, self.limits.max_bytes)
        scheme = url.split(":", 1)[0].lower() if ":" in url else ""
        if scheme in ("http", "https"):
            return await self._fetch_http(url)
        if scheme == "data":
            return await _decode_data_url(DataURL.parse(url), self.limits.max_bytes)
        if scheme == "file":
            return await asyncio.to_thread(_read_local_file, url, self.limits)
        raise InvalidMediaURLError(
            f"unsupported URL scheme {scheme or '(none)'!r}: use http(s)://, data: or file://"
        )

    async def _fetch_http(self, url: str) -> FetchedMedia:
        for _ in range(self.limits.max_redirects + 1):
            pinned = await self.policy.pin(url)  # every hop is checked again
            extensions = {"sni_hostname": pinned.sni_hostname} if pinned.sni_hostname else {}
            try:
                async with self._client.stream(
                    "GET", pinned.url, headers={"Host": pinned.host_header}, extensions=extensions
                ) as response:
                    if response.status_code in REDIRECT_STATUSES and "location" in response.headers:
                        url = urljoin(url, response.headers["location"])
                        continue
                    if response.status_code != 200:
                        raise MediaFetchError(
                            f"the media server answered HTTP {response.status_code} for {_short(url)}"
                        )
                    data = await self._read_capped(response, url)
                    return FetchedMedia(data, response.headers.get("content-type"), urlsplit(url).scheme)
            except httpx.TimeoutException as error:
                raise MediaFetchError(f"timed out fetching {_short(url)}: {type(error).__name__}") from error
            except httpx.HTTPError as error:
                raise MediaFetchError(
                    f"could not fetch {_short(url)}: {error or type(error).__name__}"
                ) from error
        raise MediaFetchError(f"more than {self.limits.max_redirects} redirects fetching {_short(url)}")

    async def _read_capped(self, response: httpx.Response, url: str) -> bytes:
        cap = self.limits.max_bytes
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > cap:
            raise FetchTooLargeError(f"{_short(url)} is {int(declared)} bytes, more than the {cap} allowed")
        chunks, total = [], 0
        async for chunk in response.aiter_bytes():  # decoded: the cap is on what we keep
            total += len(chunk)
            if total > cap:
                raise FetchTooLargeError(f"{_short(url)} is more than the {cap} bytes allowed")
            chunks.append(chunk)
        return b"".join(chunks)


async def _decode_data_url(url: DataURL, cap: int) -> FetchedMedia:
    if len(url.payload) > INLINE_DECODE_BYTES:
        data = await asyncio.to_thread(url.decode, cap)
    else:
        data = url.decode(cap)
    if len(data) > cap:
        raise FetchTooLargeError(f"the data URL holds {len(data)} bytes, more than the {cap} allowed")
    return FetchedMedia(data, url.media_type, "data")


def _read_local_file(url: str, limits: FetchLimits) -> FetchedMedia:
    """Read a file:// URL, only under the allowed directories (symlinks and .. resolved first)."""
    if not limits.allowed_local_paths:
        raise MediaForbiddenError("file:// URLs are disabled on this server (see --allowed-local-media-path)")
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise InvalidMediaURLError(f"file:// URLs must be local, not on host {parts.netloc!r}")
    requested = unquote(parts.path)
    real = os.path.realpath(requested)
    if not any(os.path.commonpath([real, str(root)]) == str(root) for root in limits.allowed_local_paths):
        raise MediaForbiddenError(f"{requested!r} is outside the directories this server may read")
    try:
        size = os.path.getsize(real)
        if size > limits.max_bytes:
            raise FetchTooLargeError(
                f"{requested!r} is {size} bytes, more than the {limits.max_bytes} allowed"
            )
        with open(real, "rb") as file:
            data = file.read(limits.max_bytes + 1)
    except (FileNotFoundError, NotADirectoryError) as error:
        raise LocalFileNotFoundError(f"no file at {requested!r}") from error
    except IsADirectoryError as error:
        raise InvalidMediaURLError(f"{requested!r} is a directory, not a file") from error
    except OSError as error:
        raise MediaFetchError(f"cannot read {requested!r}: {error.strerror}") from error
    if len(data) > limits.max_bytes:
        raise FetchTooLargeError(f"{requested!r} is more than the {limits.max_bytes} bytes allowed")
    return FetchedMedia(data, None, "file")


def _short(url: str, limit: int = 120) -> str:
    """A URL fit for an error message or a log line: data URLs never appear whole."""
    if url.startswith("data:"):
        return url[: url.find(",") + 1] + "..." if "," in url else "data:..."
    return url if len(url) <= limit else url[: limit - 3] + "..."
