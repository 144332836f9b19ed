"""Prometheus metrics, one registry per service instance (tests run several)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "mmprep_requests", "Chat completion requests answered", ["status"], registry=r
        )
        self.errors = Counter(
            "mmprep_errors", "Requests refused or failed, by error code", ["code"], registry=r
        )
        self.in_flight = Gauge(
            "mmprep_requests_in_flight", "Chat completion requests being worked on", registry=r
        )
        self.queued = Gauge(
            "mmprep_requests_queued",
            "Requests waiting for a place among those in flight (--max-queued-requests)",
            registry=r,
        )
        self.admission_refused = Counter(
            "mmprep_admission_refused",
            "Requests refused admission, by reason: queue_full (past --max-queued-requests), "
            "queue_timeout (waited --max-queue-wait)",
            ["reason"],
            registry=r,
        )
        self.fetch_seconds = Histogram(
            "mmprep_fetch_seconds",
            "Time to fetch one media URL",
            ["scheme"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.decode_seconds = Histogram(
            "mmprep_decode_seconds",
            "Time to decode one media item",
            ["kind"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.process_seconds = Histogram(
            "mmprep_process_seconds",
            "Time the vision processor took for one media item after its decode ended (--processor)",
            ["kind"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.fetched_bytes = Counter("mmprep_fetched_bytes", "Bytes of media fetched", ["scheme"], registry=r)
        self.frames_decoded = Counter(
            "mmprep_frames_decoded", "Frames (and images) returned by the decoders", ["kind"], registry=r
        )
        self.decodes_in_flight = Gauge(
            "mmprep_decodes_in_flight", "Decodes running in the decode pool", registry=r
        )
        # The cache of decoded and processed media items (app/mmprep/preprocess/cache.py)
        self.decode_cache = Counter(
            "mmprep_decode_cache_lookups",
            "Media cache lookups (decoded and processed items), by result",
            ["result"],
            registry=r,
        )
        self.decode_cache_bytes = Gauge(
            "mmprep_decode_cache_bytes",
            "Bytes the media cache holds (pixels, tensors, source files)",
            registry=r,
        )
        self.decode_cache_items = Gauge("mmprep_decode_cache_items", "Media items in the cache", registry=r)
        self.decode_cache_evictions = Counter(
            "mmprep_decode_cache_evictions",
            "Items dropped from the media cache to stay in its bytes",
            registry=r,
        )
        # The vLLM wire's video hashes and items sent again, as written before (vllm/wire_cache.py)
        self.render_cache = Counter(
            "mmprep_render_cache_lookups",
            "Lookups of video hashes and encoded items for vLLM's wire, by result",
            ["result"],
            registry=r,
        )
        self.render_cache_bytes = Gauge(
            "mmprep_render_cache_bytes",
            "Bytes of video hashes and encoded items kept for vLLM's wire",
            registry=r,
        )
        self.render_cache_items = Gauge(
            "mmprep_render_cache_items", "Video hashes and encoded items kept for vLLM's wire", registry=r
        )
        self.render_cache_evictions = Counter(
            "mmprep_render_cache_evictions",
            "Encoded items and hashes dropped to stay in --render-cache-bytes",
            registry=r,
        )
        self.connections_open = Gauge("mmprep_connections_open", "HTTP connections open", registry=r)
        self.connections_closed = Counter(
            "mmprep_connections_closed",
            "HTTP connections the server closed by its limits (mmprep.transport.connections): idle, "
            "header_timeout, body_timeout (a body that stopped arriving), write_timeout (a client that "
            "stopped reading), over_limit (past --max-connections)",
            ["reason"],
            registry=r,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
