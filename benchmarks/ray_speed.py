"""mmprep on Ray Serve (`--runtime ray`) against `mmprep serve` on this machine.

    python benchmarks/ray_speed.py            # the figures quoted in docs/benchmarks.md
    python benchmarks/ray_speed.py --quick

1. Overhead per request at concurrency 1: the same request to `mmprep serve` and to the
   Ray application (one node, one replica of each deployment), taken in turn, p50 of each:
   a text-only request (the hops alone: proxy, front door, decode replica, engine replica)
   and 8 frames of a small clip (2 s of 480p H.264 as a data URL; the tensors go through
   the object store). Both decode with one worker of one thread, the decode cache off.
2. Throughput with 1 and 2 decode replicas (one decode of one thread each) at the same
   concurrency (8), the clip request, A/B/A/B: the decode deployment scaled on its own.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

from service_speed import clip_bytes, http_run, p50_ms, request_body, run_options

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's root: tests.support

from mmprep.core.config import Settings
from tests.support.chat import chat
from tests.support.raycluster import RayCluster
from tests.support.servers import AppProcess

ONE_DECODE: dict[str, Any] = {"decode_workers": 1, "decode_threads": 1, "decode_cache_bytes": 0}
CONCURRENCY = 8


def ray_settings(decode_replicas: int) -> Settings:
    return Settings(**ONE_DECODE, ray_decode_replicas=decode_replicas, max_concurrent_requests=256)


def main() -> None:
    args, n = run_options(__doc__)
    data = clip_bytes()
    bodies = {
        "text": json.dumps(chat({"type": "text", "text": "hello"})).encode(),
        "clip": request_body(data),
    }
    results: dict = {"clip": f"854x480, 2 s, {len(data) / 1024:.0f} KiB, 8 frames", "cores": os.cpu_count()}
    flags = (
        "--decode-workers",
        "1",
        "--decode-threads",
        "1",
        "--decode-cache-bytes",
        "0",
        "--max-concurrent-requests",
        "256",
    )
    # Logical CPUs: three replicas of one CPU each must fit; the cores are what they are.
    with RayCluster(nodes=1, cpus=4) as cluster, AppProcess("serve", *flags) as local:
        on_ray = cluster.deploy(ray_settings(1))
        overhead = {}
        for name, body in bodies.items():
            local_times, ray_times = [], []
            for server in (local, on_ray):
                asyncio.run(http_run(server.url, body, 5, 1))
            for _ in range(n(80)):  # in turn, so both see the same machine
                local_times += asyncio.run(http_run(local.url, body, 1, 1))[0]
                ray_times += asyncio.run(http_run(on_ray.url, body, 1, 1))[0]
            overhead[name] = {
                "serve_p50_ms": p50_ms(local_times),
                "ray_p50_ms": p50_ms(ray_times),
                "ray_extra_ms": round(p50_ms(ray_times) - p50_ms(local_times), 2),
            }
            print(name, json.dumps(overhead[name]), flush=True)
        results["overhead_c1"] = overhead

        runs: dict[int, list[float]] = {1: [], 2: []}
        for _ in range(2):
            for replicas in (1, 2):
                cluster.deploy(ray_settings(replicas))
                asyncio.run(http_run(cluster.url, bodies["clip"], CONCURRENCY, CONCURRENCY))
                runs[replicas].append(
                    asyncio.run(http_run(cluster.url, bodies["clip"], n(160), CONCURRENCY))[1]
                )
                print(replicas, "decode replicas:", round(runs[replicas][-1], 1), "req/s", flush=True)
        one, two = statistics.median(runs[1]), statistics.median(runs[2])
        results[f"throughput_c{CONCURRENCY}"] = {
            "one_decode_replica_per_s": round(one, 1),
            "two_decode_replicas_per_s": round(two, 1),
            "two_over_one": round(two / one, 2),
        }

    print()
    for name, row in results["overhead_c1"].items():
        print(
            f"{name}: mmprep serve p50 {row['serve_p50_ms']} ms, on Ray {row['ray_p50_ms']} ms "
            f"(+{row['ray_extra_ms']} ms per request)"
        )
    t = results[f"throughput_c{CONCURRENCY}"]
    print(
        f"concurrency {CONCURRENCY}: 1 decode replica {t['one_decode_replica_per_s']}/s, "
        f"2 replicas {t['two_decode_replicas_per_s']}/s = {t['two_over_one']}x"
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
