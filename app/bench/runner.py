"""`mmprep bench` from start to exit status: inputs, file server, target, runs, report."""

from __future__ import annotations

import asyncio
import itertools
import sys
import tempfile
from contextlib import nullcontext
from datetime import UTC, datetime
from pathlib import Path

import httpx
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .client import ChatClient, chat_body
from .config import BenchConfig
from .errors import BenchError
from .fileserver import FileServer
from .inputs import MediaSender, collect_inputs, needs_file_server
from .load import LoadPlan, drive
from .metrics import summarize
from .report import plot_runs, print_summary, write_results

READY_POLL_SECONDS = 0.5


def run_bench(config: BenchConfig) -> int:
    """Run the benchmark the config describes. Returns the exit status: 0, 1 when a run's
    failure rate passed --max-failure-rate, 2 for bad input or an unreachable target."""
    notes = Console(stderr=True, quiet=config.quiet, highlight=False)
    try:
        _check_outputs(config)
        with tempfile.TemporaryDirectory(prefix="mmprep-bench-") as workdir:
            inputs = collect_inputs(config, Path(workdir), note=notes.print)
            server = _file_server(config) if needs_file_server(inputs, config.media_as) else None
            with server or nullcontext():
                sender = MediaSender(inputs, config.media_as, config.unique_media, server)
                results = asyncio.run(_bench(config, sender, notes))
                results["inputs"] = [{"kind": i.kind, "name": i.name, "source": str(i.path or i.url)} for i in inputs]
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
            raise BenchError("--plot needs matplotlib: pip install 'mmprep[plot]'") from None


def _file_server(config: BenchConfig) -> FileServer:
    try:
        return FileServer(config.media_host)
    except OSError as error:
        raise BenchError(f"the media file server cannot listen on {config.media_host}: {error}") from None


async def _bench(config: BenchConfig, sender: MediaSender, notes: Console) -> dict:
    headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
    most = max(config.concurrency)
    limits = httpx.Limits(max_connections=most, max_keepalive_connections=most)
    async with httpx.AsyncClient(headers=headers, limits=limits, timeout=httpx.Timeout(config.timeout)) as http:
        model = await wait_ready(http, config)
        notes.print(f"target {config.url}, model {model}, {'streaming' if config.stream else 'not streaming'}")
        chat = ChatClient(http, config.url, config.stream)
        numbers = itertools.count()  # across warm-ups and runs: every request's media is its own

        async def send(_: int):
            number = next(numbers)
            parts, media = sender.parts(number)
            body = chat_body(model, config.prompt, parts, stream=config.stream, max_tokens=config.max_tokens,
                             video_sampling=_video_sampling(config), extra=config.extra_body_fields())
            return await chat.send(number, body, media)

        started_at = datetime.now(UTC).isoformat(timespec="seconds")
        runs = []
        for position, concurrency in enumerate(config.concurrency):
            plan = LoadPlan(concurrency, config.request_rate, config.request_limit(), config.duration, config.seed + position)
            if config.warmup:
                await drive(LoadPlan(concurrency, None, config.warmup, None), send)
            records, wall = await _run_with_progress(plan, send, notes)
            run = {"metrics": summarize(records, wall, concurrency, config.request_rate, config.stream)}
            if config.save_records:
                run["records"] = [record.to_dict() for record in records]
            runs.append(run)
    return {
        "started_at": started_at,
        "config": config.model_dump(mode="json", exclude={"api_key"}),
        "target": {"url": config.url, "model": model},
        "runs": runs,
    }


def _video_sampling(config: BenchConfig) -> dict:
    return {key: value for key, value in (("fps", config.fps), ("num_frames", config.num_frames)) if value is not None}


async def wait_ready(http: httpx.AsyncClient, config: BenchConfig) -> str:
    """Poll /v1/models until the server answers; the model to ask for (--model, else the
    first listed)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + config.ready_timeout
    while True:
        try:
            response = await http.get(f"{config.url}/v1/models", timeout=5)
            if response.status_code in (401, 403):
                raise BenchError(f"{config.url} refused the request ({response.status_code}): check --api-key")
            if response.status_code == 200 or (config.model and response.status_code < 500):
                break
            problem = f"/v1/models answered {response.status_code}"
        except httpx.HTTPError as error:
            problem = f"{type(error).__name__}: {error}".replace("\n", " ")
        if loop.time() >= deadline:
            raise BenchError(f"no server answered at {config.url} within {config.ready_timeout:g} s ({problem})")
        await asyncio.sleep(READY_POLL_SECONDS)
    if config.model:
        return config.model
    try:
        return response.json()["data"][0]["id"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise BenchError(f"{config.url}/v1/models lists no model: give --model") from None


async def _run_with_progress(plan: LoadPlan, send, notes: Console):
    """drive() with a progress bar on a terminal (none when quiet or redirected)."""
    progress = Progress(
        TextColumn(f"concurrency {plan.concurrency}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[failed]} failed"), TimeElapsedColumn(),
        console=notes, disable=notes.quiet or not notes.is_terminal, transient=True,
    )
    with progress:
        task = progress.add_task("run", total=plan.limit, failed=0)
        failed = 0

        def advance(record) -> None:
            nonlocal failed
            failed += not record.ok
            progress.update(task, advance=1, failed=failed)

        return await drive(plan, send, advance)


def _report(config: BenchConfig, results: dict) -> int:
    runs = [run["metrics"] for run in results["runs"]]
    print_summary(runs)
    if config.output:
        write_results(config.output, results)
    if config.plot:
        mode = "streaming" if config.stream else "not streaming"
        plot_runs(config.plot, runs, f"{results['target']['model']} at {config.url}, {mode}")
    worst = max(runs, key=lambda m: m["failure_rate"])
    if worst["failure_rate"] > config.max_failure_rate:
        print(
            f"mmprep bench: {worst['failed']} of {worst['sent']} requests failed at concurrency "
            f"{worst['concurrency']} ({worst['failure_rate']:.0%}), more than --max-failure-rate {config.max_failure_rate:g}",
            file=sys.stderr,
        )
        return 1
    return 0
