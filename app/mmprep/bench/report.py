"""What a bench shows: the summary tables, the JSON results file, the chart.

Tables are drawn as Markdown (rich's MARKDOWN box), so what the terminal shows can be
pasted into an issue or a README as it is.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.1f}"


def _percentiles(figures: dict | None, keys=("p50", "p90", "p99")) -> str:
    return " / ".join(_ms(figures[key]) for key in keys) if figures else "-"


def _server(figures: dict | None, missing: int) -> str:
    if figures is None:
        return "missing" if missing else "-"
    return _ms(figures["p50"])


def summary_table(runs: list[dict]) -> Table:
    table = Table(box=box.MARKDOWN)
    for heading in (
        "concurrency",
        "rate (req/s)",
        "completed",
        "failed",
        "req/s",
        "out tok/s",
        "TTFT p50/p90/p99",
        "ITL p50/p99",
        "latency p50/p90/p99",
        "fetch p50",
        "decode p50",
    ):
        table.add_column(heading, justify="right")
    for m in runs:
        table.add_row(
            str(m["concurrency"]),
            f"{m['request_rate']:g}" if m["request_rate"] else "max",
            str(m["completed"]),
            str(m["failed"]),
            f"{m['request_throughput']:.2f}" if m["request_throughput"] is not None else "-",
            f"{m['output_token_throughput']:.1f}" if m["output_token_throughput"] is not None else "-",
            _percentiles(m["ttft_ms"]),
            _percentiles(m["itl_ms"], ("p50", "p99")),
            _percentiles(m["latency_ms"]),
            _server(m["server_fetch_ms"], m["server_timing_missing"]),
            _server(m["server_decode_ms"], m["server_timing_missing"]),
        )
    return table


PART_HEADINGS = {"handoff": "hand-off", "network_and_engine": "network & engine"}


def split_table(runs: list[dict]) -> tuple[str, Table] | None:
    """Where the mean time to the first token (or the mean latency) went, per run: a
    heading and the table."""
    splits = [(m["concurrency"], m["split_ms"]) for m in runs if m["split_ms"]]
    if not splits:
        return None
    streamed = splits[0][1]["of"] == "ttft"
    parts = (
        ["network", "fetch", "decode", "other", "handoff", "engine"]
        if streamed
        else ["fetch", "decode", "other", "handoff", "network_and_engine"]
    )
    what = "TTFT" if streamed else "latency"
    table = Table(box=box.MARKDOWN)
    for heading in ["concurrency", f"mean {what}", *(PART_HEADINGS.get(p, p) for p in parts)]:
        table.add_column(heading, justify="right")
    for concurrency, split in splits:
        table.add_row(str(concurrency), _ms(split["total"]), *(_ms(split[p]) for p in parts))
    return (
        f"Where the mean {what} goes (ms; fetch, decode, other and hand-off from the server's "
        "Server-Timing):",
        table,
    )


def failure_lines(runs: list[dict]) -> list[str]:
    lines = []
    for m in runs:
        if m["failed"] and m.get("failure_kinds"):
            kinds = m["failure_kinds"]
            lines.append(
                f"concurrency {m['concurrency']}: {kinds['connection']} connection-level (reset, closed, "
                f"refused connect), {kinds['refused']} refused (503/429), {kinds['http']} other HTTP errors, "
                f"{kinds['timeout']} timed out, {kinds['stream']} broken streams"
            )
        lines += [
            f"concurrency {m['concurrency']}: {count} x {error}" for error, count in m["failures"].items()
        ]
    return lines


def file_server_refused(runs: list[dict], file_server: dict | None) -> str | None:
    """What to do when the target refused the media URLs of bench's own file server: mmprep
    refuses loopback and private addresses by default (SSRF), so against a default `mmprep
    serve` every request with local media fails as `media_forbidden`."""
    refused = sum(
        count for m in runs for error, count in m["failures"].items() if error.endswith(" media_forbidden")
    )
    if not refused or file_server is None:
        return None
    return (
        f"{refused} request(s) refused as media_forbidden: the target would not fetch the media "
        f"from bench's file server at {file_server['url']}. mmprep serve refuses loopback and "
        "private addresses unless started with --allow-private-networks; or send the media "
        "inline with --media-as data"
    )


def markdown(table: Table) -> str:
    """The table as plain Markdown lines: no styles, no blank padding rows."""
    console = Console(file=io.StringIO(), width=400, color_system=None)
    with console.capture() as captured:
        console.print(table)
    return "\n".join(line.rstrip() for line in captured.get().splitlines() if line.strip())


def print_summary(runs: list[dict], out=None) -> None:
    out = out or sys.stdout
    print("Per run (ms unless said; fetch and decode from the server's Server-Timing):", file=out)
    print(markdown(summary_table(runs)), file=out)
    split = split_table(runs)
    if split is not None:
        heading, table = split
        print(f"\n{heading}", file=out)
        print(markdown(table), file=out)
    if any(m["split_ms"] and m["split_ms"]["other"] is None for m in runs):
        print(
            "\nthe server's fetch and decode add up to more than its preprocessing (sums over media items "
            "handled side by side): 'other' is left out",
            file=out,
        )
    missing = sum(m["server_timing_missing"] for m in runs)
    if missing:
        print(
            f"\n{missing} completed request(s) came without a Server-Timing header "
            "(fetch;dur, decode;dur, preprocess;dur): server figures missing for them",
            file=out,
        )
    clients = [(m["concurrency"], m["client"]) for m in runs if m.get("client")]
    if clients:
        print(
            "\nbench's own CPU (the client): "
            + "; ".join(
                f"concurrency {c}: {f['cpu_s']:.1f} s over {f['processes']} process(es), busiest at "
                f"{f['busiest_process_cpu']:.0%} of a core"
                for c, f in clients
            ),
            file=out,
        )
    for concurrency, figures in clients:
        if figures["saturated"]:
            print(
                f"warning: at concurrency {concurrency} a bench process was busy "
                f"{figures['busiest_process_cpu']:.0%} of the run: the client, not the target, may be the "
                "limit; its latencies include its own queue (more --client-processes, or a machine of its "
                "own)",
                file=out,
            )
    failures = failure_lines(runs)
    if failures:
        print("\nfailures:\n  " + "\n  ".join(failures), file=out)


def write_results(path: Path, results: dict) -> None:
    path.write_text(json.dumps(results, indent=2) + "\n")


def plot_runs(path: Path, runs: list[dict], title: str) -> None:
    """Latency percentiles (left) and throughput (right) against concurrency."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    x = [m["concurrency"] for m in runs]
    figure, (latency, throughput) = plt.subplots(1, 2, figsize=(12, 4.5))
    for metric, label, style in (("ttft_ms", "TTFT", "-"), ("latency_ms", "latency", "--")):
        for key, colour in (("p50", "tab:blue"), ("p90", "tab:orange"), ("p99", "tab:red")):
            y = [m[metric][key] if m[metric] else None for m in runs]
            if any(v is not None for v in y):
                latency.plot(
                    x,
                    [float("nan") if v is None else v for v in y],
                    style,
                    marker="o",
                    color=colour,
                    label=f"{label} {key}",
                )
    latency.set(xlabel="concurrency", ylabel="milliseconds", title="latency percentiles")
    latency.legend(fontsize="small")
    throughput.plot(
        x, [m["request_throughput"] or 0 for m in runs], "-o", color="tab:green", label="requests/s"
    )
    throughput.set(xlabel="concurrency", ylabel="requests per second", title="throughput")
    tokens = throughput.twinx()
    tokens.plot(
        x,
        [m["output_token_throughput"] or 0 for m in runs],
        "--s",
        color="tab:purple",
        label="output tokens/s",
    )
    tokens.set_ylabel("output tokens per second")
    throughput.legend(handles=throughput.get_lines() + tokens.get_lines(), fontsize="small", loc="upper left")
    for axis in (latency, throughput):
        axis.set_xticks(x)
        axis.grid(alpha=0.3)
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
