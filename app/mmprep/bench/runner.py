"""`mmprep bench` from start to exit status: inputs, file server, target, runs, report."""

from __future__ import annotations

import asyncio
import math
import sys
from contextlib import nullcontext
from datetime import UTC, datetime

import httpx
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .client import RequestTemplate
from .config import BenchConfig
from .errors import BenchError
from .fileserver import FileServer
from .fleet import ClientSpec, RunResult, default_processes, open_fleet
from .inputs import MediaSender, collect_inputs, needs_file_server
from .load import LoadPlan
from .metrics import summarize
from .report import file_server_refused, plot_runs, print_summary, write_results

READY_POLL_SECONDS = 0.5


def run_bench(config: BenchConfig) -> int:
    """Run the benchmark the config describes. Returns the exit status: 0, 1 when a run's
    failure rate passed --max-failure-rate, 2 for bad input or an unreachable target."""
    notes = Console(stderr=True, quiet=config.quiet, highlight=False)
    try:
        _check_outputs(config)
        inputs = collect_inputs(config, note=notes.print)
        sender = MediaSender(inputs, config.media_as, config.unique_media)
        server = _file_server(config, notes) if needs_file_server(inputs, config.media_as) else None
        with server or nullcontext():
            if server:
                sender.publish(server)
            results = _bench(config, sender, notes)
            results["inputs"] = [
                {"kind": i.kind, "name": i.name, "source": str(i.path or i.url)} for i in inputs
            ]
            results["file_server"] = server.summary() if server else None
    except BenchError as error:
        print(f"mmprep bench: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mmprep bench: interrupted", file=sys.stderr)
        return 130
    return _report(config, results)


def _check_outputs(config: BenchConfig) -> None:
    """Before the runs, not after them: a typo in a path must not cost a benchmark."""
    for flag, path in (("--output", config.output), ("--plot", config.plot)):
        if path is not None and not path.resolve().parent.is_dir():
            raise BenchError(f"{flag} {path}: the folder {path.resolve().parent} does not exist")
    if config.plot is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise BenchError(
                "--plot needs matplotlib: pip install -e '.[plot]' in mmprep's checkout"
            ) from None


def _file_server(config: BenchConfig, notes: Console) -> FileServer:
    try:
        server = FileServer(config.media_host, connections=max(config.concurrency))
    except OSError as error:
        raise BenchError(f"the media file server cannot listen on {config.media_host}: {error}") from None
    cap = server.backlog_cap()
    if cap is not None:
        notes.print(
            f"note: the kernel caps the file server's listen backlog at {cap} (net.core.somaxconn), "
            f"below --concurrency {max(config.concurrency)}: fetches past it wait for a SYN retry"
        )
    return server


def _bench(config: BenchConfig, sender: MediaSender, notes: Console) -> dict:
    model = asyncio.run(_wait_ready(config))
    notes.print(f"target {config.url}, model {model}, {'streaming' if config.stream else 'not streaming'}")
    template = RequestTemplate(
        model,
        config.prompt,
        config.stream,
        config.max_tokens,
        _video_sampling(config),
        config.extra_body_fields(),
        config.prompt_words or 0,
    )
    processes = config.client_processes or default_processes(max(config.concurrency))
    spec = ClientSpec(
        config.url,
        _headers(config),
        config.timeout,
        math.ceil(max(config.concurrency) / processes),
        template,
        sender,
        config.client_keep_alive,
    )
    limit = config.request_limit()
    if limit is not None and limit < max(config.concurrency):
        notes.print(
            f"note: --requests {limit} is below --concurrency {max(config.concurrency)}: "
            f"the run never has that many in flight"
        )
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    runs = []
    fleet = open_fleet(spec, processes)
    try:
        next_number = 0  # across warm-ups and runs: every request's media is its own
        for position, concurrency in enumerate(config.concurrency):
            plan = LoadPlan(
                concurrency,
                config.request_rate,
                config.request_limit(),
                config.duration,
                config.seed + position,
            )
            if config.warmup:
                warmup = fleet.run(LoadPlan(concurrency, None, config.warmup, None), next_number)
                next_number = _after(warmup.records, next_number)
            result = _run_with_progress(plan, fleet, next_number, notes)
            next_number = _after(result.records, next_number)
            client = result.client_figures(min(fleet.processes, concurrency))
            run: dict[str, dict | list[dict]] = {
                "metrics": summarize(
                    result.records, result.wall_s, concurrency, config.request_rate, config.stream, client
                )
            }
            if config.save_records:
                run["records"] = [record.to_dict() for record in result.records]
            runs.append(run)
    finally:
        fleet.close()
    return {
        "started_at": started_at,
        "config": config.model_dump(mode="json", exclude={"api_key"}),
        "target": {"url": config.url, "model": model},
        "runs": runs,
    }


def _after(records, first_number: int) -> int:
    """The first request number free after a run."""
    return max((record.number for record in records), default=first_number - 1) + 1


def _headers(config: BenchConfig) -> dict[str, str]:
    return {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}


async def _wait_ready(config: BenchConfig) -> str:
    async with httpx.AsyncClient(headers=_headers(config)) as http:
        return await wait_ready(http, config)


def _video_sampling(config: BenchConfig) -> dict:
    return {
        key: value
        for key, value in (("fps", config.fps), ("num_frames", config.num_frames))
        if value is not None
    }


async def wait_ready(http: httpx.AsyncClient, config: BenchConfig) -> str:
    """Poll /v1/models until the server answers; the model to ask for (--model, else the
    first listed)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + config.ready_timeout
    while True:
        try:
            response = await http.get(f"{config.url}/v1/models", timeout=5)
            if response.status_code in (401, 403):
                raise BenchError(
                    f"{config.url} refused the request ({response.status_code}): check --api-key"
                )
            if response.status_code == 200 or (config.model and response.status_code < 500):
                break
            problem = f"/v1/models answered {response.status_code}"
        except httpx.HTTPError as error:
            problem = f"{type(error).__name__}: {error}".replace("\n", " ")
        if loop.time() >= deadline:
            raise BenchError(
                f"no server answered at {config.url} within {config.ready_timeout:g} s ({problem})"
            )
        await asyncio.sleep(READY_POLL_SECONDS)
    if config.model:
        return config.model
    try:
        return response.json()["data"][0]["id"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise BenchError(f"{config.url}/v1/models lists no model: give --model") from None


def _run_with_progress(plan: LoadPlan, fleet, first_number: int, notes: Console) -> RunResult:
    """fleet.run() with a progress bar on a terminal (none when quiet or redirected)."""
    progress = Progress(
        TextColumn(f"concurrency {plan.concurrency}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[failed]} failed"),
        TimeElapsedColumn(),
        console=notes,
        disable=notes.quiet or not notes.is_terminal,
        transient=True,
    )
    with progress:
        task = progress.add_task("run", total=plan.limit, failed=0)
        return fleet.run(
            plan, first_number, lambda done, failed: progress.update(task, completed=done, failed=failed)
        )


def _report(config: BenchConfig, results: dict) -> int:
    runs = [run["metrics"] for run in results["runs"]]
    print_summary(runs)
    if config.output:
        write_results(config.output, results)
    if config.plot:
        mode = "streaming" if config.stream else "not streaming"
        plot_runs(config.plot, runs, f"{results['target']['model']} at {config.url}, {mode}")
    refused = file_server_refused(runs, results["file_server"])
    if refused:
        print(f"mmprep bench: {refused}", file=sys.stderr)
    worst = max(runs, key=lambda m: m["failure_rate"])
    if worst["failure_rate"] > config.max_failure_rate:
        print(
            f"mmprep bench: {worst['failed']} of {worst['sent']} requests failed at concurrency "
            f"{worst['concurrency']} ({worst['failure_rate']:.0%}), more than --max-failure-rate "
            f"{config.max_failure_rate:g}",
            file=sys.stderr,
        )
        return 1
    return 0
