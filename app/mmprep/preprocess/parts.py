"""Preprocessing as a Service holds it (the protocol), and this process's own
(LocalPreprocessing): the decode pool and cache, the media fetcher and the Preprocessor over
them, made, started and stopped together. A Service holds one by default; a decode replica
of the Ray application (app/mmprep/rayserve) holds one alone, with no engine beside it, and
the Ray front door's Service holds RayPreprocessing, whose preprocessor is those replicas."""

from __future__ import annotations

import asyncio
import threading
from typing import Protocol

from mmprep.decoders import DecodeCancelledError

from ..core.config import Settings
from ..core.metrics import Metrics
from ..interface import PreparedRequest
from ..media.fetch import FetchLimits, MediaFetcher
from ..media.network import NetworkPolicy
from .cache import DecodeCache
from .pool import DecodePool
from .preprocessor import Preprocessor
from .request import ChatInput
from .timing import Timing


class Preparer(Protocol):
    """What the routes await: a chat input made into the engine's request (Preprocessor.prepare)."""

    async def prepare(
        self, request: ChatInput, request_id: str, cancel: threading.Event
    ) -> tuple[PreparedRequest, Timing]: ...


class Preprocessing(Protocol):
    """What `Service(preprocessing=...)` takes: started and stopped with the service, and
    once started, a `preprocessor` the routes hand their requests to."""

    @property
    def preprocessor(self) -> Preparer | None: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class LocalPreprocessing:
    def __init__(self, settings: Settings, metrics: Metrics):
        self.settings, self.metrics = settings, metrics
        self.pool = DecodePool(settings.decode_workers, fixed_threads=settings.decode_threads)
        metrics.decodes_in_flight.set_function(lambda: self.pool.active)
        self.cache: DecodeCache | None = None
        if settings.decode_cache_bytes:
            cache = self.cache = DecodeCache(
                settings.decode_cache_bytes,
                on_lookup=lambda hit: metrics.decode_cache.labels("hit" if hit else "miss").inc(),
                retry_on=(asyncio.CancelledError, DecodeCancelledError),
                on_evict=metrics.decode_cache_evictions.inc,
            )
            metrics.decode_cache_bytes.set_function(lambda: cache.bytes)
            metrics.decode_cache_items.set_function(lambda: len(cache))
        self.fetcher: MediaFetcher | None = None
        self.preprocessor: Preprocessor | None = None  # made by start()

    async def start(self) -> None:
        s = self.settings
        limits = FetchLimits(
            max_bytes=s.max_fetch_bytes,
            connect_timeout=s.fetch_connect_timeout,
            read_timeout=s.fetch_read_timeout,
            max_redirects=s.max_redirects,
            allowed_local_paths=tuple(s.allowed_local_media_path),
        )
        policy = NetworkPolicy(s.allow_private_networks, tuple(s.allowed_media_domains))
        self.fetcher = MediaFetcher(limits, policy)
        self.preprocessor = Preprocessor(s, self.fetcher, self.pool, self.metrics, self.cache)

    async def stop(self) -> None:
        if self.fetcher is not None:
            await self.fetcher.aclose()
        self.pool.shutdown()
