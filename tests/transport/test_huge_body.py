"""A body of hundreds of MiB against a real `mmprep serve` process: the server keeps answering
everyone else while it arrives and is parsed, whether it is one huge data URL (refused by its
length before any of it is decoded, the memory given back afterwards) or thousands of small
inline images, each short enough to be parsed with the rest of the body
(benchmarks/huge_body.py sends both, and measures them and a huge text)."""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.servers import AppProcess

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from huge_body import probe_while_sending

pytestmark = pytest.mark.slow  # a `mmprep serve` process and a sender process, 300 MiB

MIB = 1024**2
BODY_MIB = 300
FETCH_CAP = 64 * MIB
FLAGS = ("--max-fetch-bytes", str(FETCH_CAP), "--max-request-bytes", str(512 * MIB))


def parse_seconds(body: bytes) -> float:
    """How long json.loads takes on `body` here, now: what a /health probe would wait if the
    server parsed the body on its event loop, or in one call that holds the GIL (the scale of
    the stall the test rules out, measured beside it, as the machine's load moves both)."""
    started = time.perf_counter()
    json.loads(body)
    return time.perf_counter() - started


def _said(health_seconds: list[float], stall: float) -> str:
    worst, median = max(health_seconds), statistics.median(health_seconds)
    return f"/health took up to {worst:.2f} s, median {median:.3f} s; a parse {stall:.2f} s"


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024


@pytest.mark.alone
def test_a_huge_data_url_is_refused_by_its_length_while_the_server_answers_everyone(tmp_path):
    with AppProcess("serve", *FLAGS) as app, httpx.Client(base_url=app.url, timeout=10) as client:
        client.get("/health")
        before = rss_mib(app.process.pid)
        health_seconds, answer = probe_while_sending(app.port, BODY_MIB, "data-url")
        after = rss_mib(app.process.pid)

    status_line, _, body = answer.partition("\r\n\r\n")
    assert status_line.startswith("HTTP/1.1 400"), answer[:500]
    assert '"code":"media_too_large"' in body and "judged by its length" in body
    # /health was asked all along: a probe each 15 ms or so, and a quiet machine sends the
    # 300 MiB in a fifth of a second (10 probes seen), a loaded one in seconds
    assert len(health_seconds) >= 5
    # The baseline, measured here and now: a parse of the body. Parsed on the event loop, the
    # body would hold some /health for all of it (longer, under the upload's load); taken apart
    # off the loop, no probe waits that long, and a typical one waits a small part of it. (A
    # single probe on 2 loaded cores may wait for the scheduler: the worst one is held to the
    # whole parse, not to a part of it.)
    stall = parse_seconds(b'{"url": "' + b"!" * (BODY_MIB * MIB) + b'"}')
    said = _said(health_seconds, stall)
    assert max(health_seconds) < stall, said
    assert statistics.median(health_seconds) < stall / 10, said
    assert after - before < 256, f"RSS went from {before:.0f} MiB to {after:.0f} MiB"


@pytest.mark.alone
def test_thousands_of_small_images_are_parsed_while_the_server_answers_everyone():
    """19,200 data URLs of 16 KiB, too short to stay bytes: read by one json.loads call, they
    would hold the GIL for a whole parse of 300 MiB. The server parses each by itself instead.
    Asked twice at most: the worst probe is one request, which the machine (2 cores, the
    sender and the server on them) can hold past the bound once; a parse in one call holds it
    every time."""
    part = b'{"type": "image_url", "image_url": {"url": "data:image/png;base64,' + b"A" * 16300 + b'"}}'
    tries = []
    for _ in range(2):
        with AppProcess("serve", *FLAGS) as app:
            health_seconds, answer = probe_while_sending(app.port, BODY_MIB, "parts")
        stall = parse_seconds(b'{"content": [' + b",".join([part] * (BODY_MIB * 64)) + b"]}")
        tries.append(_said(health_seconds, stall))
        # Read by one json.loads call, the worst probe waits for most of a parse measured here
        # (its decode, then its scan: each a single C call, the scan two thirds of the parse);
        # string by string, for a small part of it (an eighth, unloaded).
        if max(health_seconds) < stall / 2:
            break

    status_line, _, body = answer.partition("\r\n\r\n")
    assert status_line.startswith("HTTP/1.1 404"), answer[:500]  # parsed and typed: a model not served
    assert '"code":"model_not_found"' in body
    assert len(health_seconds) >= 5  # asked all along (above)
    said = "; then ".join(tries)
    assert max(health_seconds) < stall / 2, said
    assert statistics.median(health_seconds) < stall / 10, said
