"""From an OpenAI chat request to a PreparedRequest: find the media parts, fetch each
URL, decode it off the event loop, and put the tensors where the parts were.

Identical media in one request (same URL, same sampling) is fetched and decoded once.
Everything runs under one deadline; when it passes or the client goes away, fetches are
cancelled and decodes stop at their next packet.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from decoders import DecodedVideo, decode_image, decode_video
from decoders.errors import CorruptMediaError, InvalidSamplingError, MediaError
from decoders.sampling import check_sampling

from ..core.config import Settings
from ..core.errors import ServiceError
from ..core.metrics import Metrics
from ..engines.prepared import MediaItem, PreparedRequest, SamplingParams
from ..media.data_url import DataURL
from ..media.fetch import MediaFetcher
from .cache import DecodeCache, content_key
from .pool import DecodePool

VIDEO_SAMPLING_KEYS = ("fps", "num_frames", "max_frames", "seek_mode")
MEDIA_PART_TYPES = {"image_url": "image", "video_url": "video"}


@dataclass
class Timing:
    """Where a request's wall time went, for the Server-Timing header (milliseconds).

    fetch is the time while any of its fetches ran; decode the time while a decode ran and
    no fetch did; preprocess the whole of preprocessing. Media items fetched and decoded
    side by side are not counted twice, so fetch + decode never exceed preprocess: the rest
    is the other preprocessing. engine is the time from handing the PreparedRequest to the
    engine until its first output (for remote workers: the hand-off and the worker's first
    token), when there was one.
    """

    spans: dict[str, list[tuple[float, float]]] = field(default_factory=lambda: {"fetch": [], "decode": []})
    preprocess: float = 0.0
    engine: float | None = None

    def add(self, phase: str, start: float, end: float) -> None:
        self.spans[phase].append((start, end))

    def header(self) -> str:
        fetch = _rounded_ms(_covered(self.spans["fetch"]))
        decode = _rounded_ms(_covered(self.spans["decode"], outside=self.spans["fetch"]))
        # rounded so that fetch + decode + the rest add up to preprocess exactly
        preprocess = round(fetch + decode + max(0.0, _rounded_ms(self.preprocess) - fetch - decode), 1)
        phases = [("fetch", fetch), ("decode", decode), ("preprocess", preprocess)]
        if self.engine is not None:
            phases.append(("engine", _rounded_ms(self.engine)))
        return ", ".join(f"{name};dur={ms:.1f}" for name, ms in phases)


def _covered(spans: list[tuple[float, float]], outside: list[tuple[float, float]] = ()) -> float:
    """Seconds during which at least one of `spans` ran and none of `outside` did."""
    edges = sorted({edge for span in (*spans, *outside) for edge in span})
    total = 0.0
    for start, end in itertools.pairwise(edges):
        middle = (start + end) / 2
        if any(a <= middle < b for a, b in spans) and not any(a <= middle < b for a, b in outside):
            total += end - start
    return total


def _rounded_ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


@dataclass
class _MediaPart:
    kind: str  # "image" or "video"
    url: str | DataURL
    options: dict[str, Any]  # decoder keyword arguments
    param: str  # e.g. messages[0].content[1].video_url
    key: tuple = field(init=False)

    def __post_init__(self):
        self.key = (self.kind, self.url, tuple(sorted(self.options.items())))


class Preprocessor:
    def __init__(
        self, settings: Settings, fetcher: MediaFetcher, pool: DecodePool, metrics: Metrics,
        cache: DecodeCache | None = None,
    ):
        self._settings, self._fetcher, self._pool, self._metrics = settings, fetcher, pool, metrics
        self._cache = cache

    async def prepare(self, request, request_id: str, cancel: threading.Event) -> tuple[PreparedRequest, Timing]:
        """`request` is the validated ChatCompletionRequest. Raises ServiceError naming the part."""
        started = time.perf_counter()
        timing = Timing()
        messages, parts = self._find_media(request)
        loaded = await self._load_all(parts, timing, cancel)
        media = [_media_item(part, loaded[part.key]) for part in parts]
        self._check_total_size(media)
        timing.preprocess = time.perf_counter() - started
        prepared = PreparedRequest(
            request_id=request_id,
            model=request.model,
            messages=messages,
            media=media,
            sampling=SamplingParams(
                max_tokens=request.max_completion_tokens or request.max_tokens,
                temperature=request.temperature,
                top_p=request.top_p,
                seed=request.seed,
                stop=tuple([request.stop] if isinstance(request.stop, str) else request.stop or ()),
            ),
            stream=request.stream,
        )
        return prepared, timing

    # -- finding the parts -------------------------------------------------------------

    def _find_media(self, request) -> tuple[list[dict], list[_MediaPart]]:
        request_video = self._request_video_options(request)
        messages, parts = [], []
        for i, message in enumerate(request.messages):
            content = message.content
            if not isinstance(content, list):
                messages.append(message.model_dump(exclude_none=True))
                continue
            new_content = []
            for j, part in enumerate(content):
                where = f"messages[{i}].content[{j}]"
                kind = _part_type(part, where)
                if kind == "text":
                    new_content.append({"type": "text", "text": _text_of(part, where)})
                    continue
                key = f"{kind}_url"
                url, part_options = _url_of(part, key, f"{where}.{key}")
                options = (
                    self._video_options(request_video, part_options, f"{where}.{key}")
                    if kind == "video"
                    else {"max_pixels": self._settings.max_pixels, "max_source_pixels": self._settings.max_source_pixels}
                )
                new_content.append({"type": kind, "media_index": len(parts)})
                parts.append(_MediaPart(kind, url, options, f"{where}.{key}"))
            messages.append({**message.model_dump(exclude_none=True), "content": new_content})
        if len(parts) > self._settings.max_media_parts:
            raise ServiceError(
                f"the request has {len(parts)} image and video parts, more than the {self._settings.max_media_parts} allowed",
                "too_many_media_parts",
                "messages",
            )
        return messages, parts

    def _request_video_options(self, request) -> dict:
        kwargs = request.media_io_kwargs or {}
        video = kwargs.get("video") or {}
        if not isinstance(video, dict):
            raise ServiceError("media_io_kwargs.video must be an object", "invalid_sampling", "media_io_kwargs.video")
        unknown = set(video) - set(VIDEO_SAMPLING_KEYS)
        if unknown:
            raise ServiceError(
                f"unknown media_io_kwargs.video keys {sorted(unknown)}: use {', '.join(VIDEO_SAMPLING_KEYS)}",
                "invalid_sampling",
                "media_io_kwargs.video",
            )
        return {k: v for k, v in video.items() if v is not None}

    def _video_options(self, request_video: dict, part_options: dict, param: str) -> dict:
        """The part's sampling wins over the request's: fps and num_frames replace each other."""
        merged = dict(request_video)
        if "fps" in part_options or "num_frames" in part_options:
            merged.pop("fps", None)
            merged.pop("num_frames", None)
        merged.update(part_options)
        settings = self._settings
        merged.setdefault("seek_mode", settings.seek_mode)
        try:
            check_sampling(merged.get("fps"), merged.get("num_frames"), merged.get("max_frames"), None, merged["seek_mode"])
        except InvalidSamplingError as error:
            raise part_error(error, param) from error
        if "fps" not in merged and "num_frames" not in merged:
            merged["fps"] = settings.default_fps
        merged["max_frames"] = min(merged.get("max_frames", settings.default_max_frames), settings.max_frames)
        merged["max_pixels"] = settings.max_pixels
        merged["max_source_pixels"] = settings.max_source_pixels
        return merged

    # -- fetching and decoding ---------------------------------------------------------

    async def _load_all(self, parts: list[_MediaPart], timing: Timing, cancel: threading.Event) -> dict:
        unique = {part.key: part for part in parts}
        tasks = {key: asyncio.ensure_future(self._load(part, timing, cancel)) for key, part in unique.items()}
        try:
            async with asyncio.timeout(self._settings.decode_timeout):
                await asyncio.gather(*tasks.values())
            return {key: task.result() for key, task in tasks.items()}
        except BaseException as error:
            cancel.set()  # decodes in threads stop at their next packet
            unfinished = _cancel_unfinished(tasks)
            if isinstance(error, TimeoutError):
                raise ServiceError(
                    f"fetching and decoding the media took longer than the {self._settings.decode_timeout:g} s allowed",
                    "decode_timeout",
                    unique[unfinished[0]].param if unfinished else "messages",
                ) from error
            raise
        finally:
            # A failed task holds the error, whose traceback holds this frame, which would hold
            # the tasks: a cycle only the garbage collector frees, and with it the media (a data
            # URL can be hundreds of MiB). Without the tasks here, the error frees them all.
            tasks = None

    async def _load(self, part: _MediaPart, timing: Timing, cancel: threading.Event):
        metrics = self._metrics
        try:
            started = time.perf_counter()
            fetched = await self._fetcher.fetch(part.url)
            fetched_at = time.perf_counter()
            metrics.fetch_seconds.labels(fetched.scheme).observe(fetched_at - started)
            metrics.fetched_bytes.labels(fetched.scheme).inc(len(fetched.data))
            timing.add("fetch", started, fetched_at)
            try:
                result = await self._decode_or_reuse(part, fetched.data, cancel)
            except CorruptMediaError as error:
                raise _with_declared_type(error, fetched.content_type) from error
        except (MediaError, ServiceError) as error:  # the decoders' or the fetcher's
            raise part_error(error, part.param) from error
        timing.add("decode", fetched_at, time.perf_counter())
        return result

    async def _decode_or_reuse(self, part: _MediaPart, data: bytes, cancel: threading.Event):
        """Decode in the pool, unless the same bytes were decoded the same way before."""

        async def decode():
            started = time.perf_counter()
            if part.kind == "video":
                result = await self._pool.run(
                    decode_video, data, **part.options,
                    max_bytes=self._settings.max_decoded_bytes, cancel=cancel,
                    timeout=self._settings.decode_timeout,
                )
            else:
                result = await self._pool.run(_decode_image, data, **part.options)
            tensor = _tensor_of(result)
            tensor.flags.writeable = False  # shared: by parts, by requests through the cache
            self._metrics.decode_seconds.labels(part.kind).observe(time.perf_counter() - started)
            self._metrics.frames_decoded.labels(part.kind).inc(len(tensor) if part.kind == "video" else 1)
            return result

        if self._cache is None:
            return await decode()
        key = await content_key(part.kind, data, part.options)
        return await self._cache.get_or_decode(key, decode, _tensor_bytes)

    def _check_total_size(self, media: list[MediaItem]) -> None:
        total, seen = 0, set()
        for item in media:
            if id(item.tensor) in seen:
                continue  # the same decode, shared by two parts: counted once
            seen.add(id(item.tensor))
            total += item.tensor.nbytes
            if total > self._settings.max_decoded_bytes:
                raise ServiceError(
                    f"{item.param}: the request's decoded media reaches {total} bytes, more than the "
                    f"{self._settings.max_decoded_bytes} allowed; ask for fewer or smaller frames",
                    "media_too_large",
                    item.param,
                )


def part_error(error: MediaError | ServiceError, param: str) -> ServiceError:
    """A decoding or fetching error as the client sees it: a 400 naming the part."""
    return ServiceError(f"{param}: {error}", error.code, param)


def _with_declared_type(error: CorruptMediaError, content_type: str | None) -> CorruptMediaError:
    """The decoder's reason, and what the server (or data URL) said the bytes were."""
    if not content_type:
        return error
    return CorruptMediaError(f"{error}; it was sent as {content_type.split(';')[0].strip()}")


def _cancel_unfinished(tasks: dict) -> list:
    """Cancel the tasks still running; the keys of those that never finished (a timeout
    may have cancelled them already)."""
    unfinished = [key for key, task in tasks.items() if task.cancelled() or not task.done()]
    for key in unfinished:
        tasks[key].cancel()
    return unfinished


def _tensor_of(result) -> np.ndarray:
    """A DecodedVideo's frames or a DecodedImage's pixels."""
    return result.frames if isinstance(result, DecodedVideo) else result.pixels


def _tensor_bytes(result) -> int:
    return _tensor_of(result).nbytes


def _decode_image(data: bytes, max_pixels: int, max_source_pixels: int, threads: int):
    return decode_image(data, max_pixels=max_pixels, max_source_pixels=max_source_pixels)  # Pillow: one thread


def _media_item(part: _MediaPart, result) -> MediaItem:
    if part.kind == "video":
        return MediaItem(
            kind="video",
            tensor=result.frames,
            metadata=result.metadata.to_dict(),
            param=part.param,
            timestamps=result.timestamps,
            indices=result.indices,
            hf_metadata=result.to_hf_metadata(),
        )
    return MediaItem(kind="image", tensor=result.pixels, metadata=result.metadata.to_dict(), param=part.param)


def _part_type(part: Any, where: str) -> str:
    if not isinstance(part, dict) or not isinstance(part.get("type"), str):
        raise ServiceError(f"{where} must be an object with a 'type'", "invalid_content_part", where)
    kind = part["type"]
    if kind == "text":
        return "text"
    if kind in MEDIA_PART_TYPES:
        return MEDIA_PART_TYPES[kind]
    raise ServiceError(
        f"{where} has type {kind!r}; this server takes text, image_url and video_url parts",
        "unsupported_content_type",
        f"{where}.type",
    )


def _text_of(part: dict, where: str) -> str:
    text = part.get("text")
    if not isinstance(text, str):
        raise ServiceError(f"{where}.text must be a string", "invalid_content_part", f"{where}.text")
    return text


def _url_of(part: dict, key: str, where: str) -> tuple[str | DataURL, dict]:
    """The URL and the sampling keys of an image_url / video_url part. A long data URL
    comes as a DataURL (see app/api/json_body.py)."""
    value = part.get(key)
    if isinstance(value, str | DataURL):  # some clients send the URL bare
        return value, {}
    if not isinstance(value, dict) or not isinstance(value.get("url"), str | DataURL) or not value["url"]:
        raise ServiceError(f"{where} must be an object with a 'url' string", "invalid_content_part", where)
    options = {k: value[k] for k in VIDEO_SAMPLING_KEYS if value.get(k) is not None}
    if options and key != "video_url":
        raise ServiceError(f"{where} takes no sampling keys; only video_url parts do", "invalid_sampling", where)
    return value["url"], options
