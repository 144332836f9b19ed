"""A run's figures from its request records: counts, throughput, latency percentiles, and
where the time to the first token went.

Latencies are in milliseconds. Percentiles interpolate linearly (numpy's default) over
completed requests; inter-token latencies are pooled over all of a run's gaps. Server
figures come from the target's Server-Timing header; when a target sends none they are
reported as missing (None, with a count), never as zero.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from .client import FAILURE_KINDS, RequestRecord, failure_kind

SERVER_PHASES = ("fetch", "decode", "preprocess")
ROUNDING_MS = 0.15  # Server-Timing durations come rounded to 0.1 ms


def distribution(values: list[float]) -> dict | None:
    """mean, p50, p90, p99 and count of `values`; None if there are none."""
    if not values:
        return None
    array = np.asarray(values, dtype=float)
    p50, p90, p99 = np.percentile(array, [50, 90, 99])
    return {
        "mean": round(float(array.mean()), 3),
        "p50": round(float(p50), 3),
        "p90": round(float(p90), 3),
        "p99": round(float(p99), 3),
        "count": len(values),
    }


def summarize(
    records: list[RequestRecord],
    wall_s: float,
    concurrency: int,
    request_rate: float | None,
    stream: bool,
    client: dict | None = None,
) -> dict:
    """`client`: what sending cost bench (fleet.RunResult.client_figures)."""
    done = [r for r in records if r.ok]
    failures = Counter(r.error for r in records if not r.ok)
    tokens = sum(r.output_tokens or 0 for r in done)
    timed = [r for r in done if all(phase in r.server_timing for phase in SERVER_PHASES)]
    return {
        "concurrency": concurrency,
        "request_rate": request_rate,
        "stream": stream,
        "sent": len(records),
        "completed": len(done),
        "failed": len(records) - len(done),
        "failure_rate": round((len(records) - len(done)) / len(records), 4) if records else 0.0,
        "failures": dict(failures.most_common()),
        "failure_kinds": failure_kinds(records),
        "duration_s": round(wall_s, 3),
        "request_throughput": round(len(done) / wall_s, 3) if wall_s > 0 else None,
        "output_tokens": tokens,
        "output_token_throughput": round(tokens / wall_s, 3) if wall_s > 0 else None,
        "output_tokens_counted_by": sorted({r.tokens_from for r in done if r.tokens_from}),
        "ttft_ms": distribution([r.ttft_ms for r in done if r.ttft_ms is not None]),
        "itl_ms": distribution([gap for r in done for gap in r.itl_ms]),
        "latency_ms": distribution([r.latency_ms for r in done if r.latency_ms is not None]),
        **{
            f"server_{phase}_ms": distribution([r.server_timing[phase] for r in timed])
            for phase in SERVER_PHASES
        },
        "server_engine_ms": distribution(
            [r.server_timing["engine"] for r in timed if "engine" in r.server_timing]
        ),
        "server_timing_missing": len(done) - len(timed),
        "split_ms": split(timed, stream),
        "client": client,
    }


def failure_kinds(records: list[RequestRecord]) -> dict[str, int]:
    """Failed requests by kind (client.failure_kind), every kind listed: 0 connection
    errors is a figure, not a missing one."""
    kinds = Counter(failure_kind(r.error or "") for r in records if not r.ok)
    return {kind: kinds[kind] for kind in FAILURE_KINDS}


def split(records: list[RequestRecord], stream: bool) -> dict | None:
    """Mean parts that add up to the mean TTFT (streaming) or latency (not streaming) of
    the requests with server timings:

    network   time to the response headers minus the server's preprocessing and hand-off:
              sending the request (data URLs included), queueing and parsing on the server
    fetch     the server fetching the media, decode the server decoding it, other the rest
              of its preprocessing. mmprep reports fetch and decode as wall-clock time that
              does not count media handled side by side twice; a server whose fetch and
              decode add up to more than its preprocessing (sums over media items) gets
              `other` left out (None), as it would be negative
    handoff   the server's `engine` timing: from handing the request to its engine to the
              engine's first output (remote workers: the tensors sent, the first token
              back); None when the server does not report it, and then part of network
    engine    from the response headers to the first token

    Not streaming, the headers come with the whole answer, so network and the rest of the
    engine are one part: `network_and_engine`, the latency minus preprocessing and hand-off.
    """
    measured = [r for r in records if r.headers_ms is not None and (r.ttft_ms is not None or not stream)]
    if not measured:
        return None
    handoff_known = all("engine" in r.server_timing for r in measured)
    parts: dict[str, list[float]] = {"fetch": [], "decode": [], "other": [], "handoff": []}
    for r in measured:
        assert r.headers_ms is not None  # `measured` holds only records with response headers
        timing = r.server_timing
        handoff = timing["engine"] if handoff_known else 0.0
        parts["fetch"].append(timing["fetch"])
        parts["decode"].append(timing["decode"])
        parts["other"].append(timing["preprocess"] - timing["fetch"] - timing["decode"])
        parts["handoff"].append(handoff)
        if stream:
            assert r.ttft_ms is not None  # streaming, `measured` holds only records with a first token
            parts.setdefault("network", []).append(r.headers_ms - timing["preprocess"] - handoff)
            parts.setdefault("engine", []).append(r.ttft_ms - r.headers_ms)
        else:
            assert r.latency_ms is not None  # ChatClient.send times every request it sends
            parts.setdefault("network_and_engine", []).append(r.latency_ms - timing["preprocess"] - handoff)
    means: dict[str, float | None] = {
        name: round(float(np.mean(values)), 3) for name, values in parts.items()
    }
    if min(parts["other"]) < -ROUNDING_MS:
        means["other"] = None  # the server's phases overlap: "the rest" is not known
    if not handoff_known:
        means["handoff"] = None
    return {
        "of": "ttft" if stream else "latency",
        "total": round(sum(v for v in means.values() if v is not None), 3),
        **means,
        "count": len(measured),
    }
