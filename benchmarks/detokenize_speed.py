"""What the answer's post-processing costs: token ids through detokenization, stop
strings, the reasoning parser and the tool-call parser, against the same answer from a
text engine (no post-processing), through mmprep's server under N concurrent streams.

    python benchmarks/detokenize_speed.py                     # 64, 512 and 2048 streams
    python benchmarks/detokenize_speed.py --streams 64 --tokens 64 --interval 0.05

An engine (tests/support/engines.py) emits one token every --interval seconds per stream
(the answer: a Qwen3 reasoning block, text and a tool call, in the real Qwen3 vocabulary);
the server is `mmprep serve --model` (a Qwen3-VL model folder built offline, the engine
`--engine-class tests.support.engines:TokenReplayEngine`) in its own process, a lean asyncio
client in this one. Three setups, in turn, on the same load:

- text:    the engine's text pieces, passed through (the path every text engine takes)
- tokens:  token ids, detokenized (DecodeStream) with a stop string checked
- parsed:  as tokens, with --reasoning-parser qwen3 --enable-auto-tool-choice
           --tool-call-parser hermes

The server process is pinned to the first core and the client to the others. First, in this
process, the post-processing alone: CPU microseconds per token of the chat handler's work
per engine output (derender, chunk objects, SSE lines), each setup in turn, the median of
7 rounds (the ratio that the machine's other load does not move). Then, through the
server, per setup: streams answered without error, output tokens per second, the
server's CPU per token (user + system, from /proc) and tokens per CPU-second (per core),
and the inter-token latency at the client minus the engine's own interval (p50, p99):
what mmprep adds between the engine's token and the client's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's root: tests.support

from tests.support.model_folder import make_model_folder
from tests.support.servers import REPO, AppProcess

SETUPS = ("text", "tokens", "parsed")
MODEL = "Qwen3-VL-Bench"  # the model folder's name: the served name
ANSWER = (
    "<think>\nThe user wants the weather in Paris for three days. I should call the weather tool, "
    "then summarise it in French, with an emoji or two. 🌦️\n</think>\n\n"
    "Je vérifie la météo à Paris pour les trois prochains jours. 🇫🇷\n"
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call>'
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            },
        },
    }
]


def answer_ids(tokens: int) -> list[int]:
    """`tokens` ids: the answer, repeated inside the reasoning to the length asked."""
    from tokenizers import Tokenizer

    from tests.support.qwen_tokenizer import tokenizer_file

    tokenizer = Tokenizer.from_file(str(tokenizer_file("qwen3_vl")))
    ids = tokenizer.encode(ANSWER).ids
    filler = tokenizer.encode(" Still thinking about the forecast, 天气预报.").ids
    while len(ids) < tokens:
        ids[2:2] = filler  # more reasoning
    return ids[-tokens:] if len(ids) > tokens else ids


# -- in process: the post-processing alone ------------------------------------------------


def in_process(ids: list[int], texts: list[str], rounds: int = 7, answers: int = 100) -> dict:
    """CPU microseconds per token of what the chat handler does per engine output (derender,
    chunk objects, SSE lines) for each setup, in this process, the setups taken in turn
    `rounds` times (the median): the server's work without the server's."""
    from tokenizers import Tokenizer

    from mmprep.api.common.chat_answers import CompletionBuilder, sse
    from mmprep.derender import Derendering, ModelFacts, OutputOptions
    from mmprep.interface.engine import EngineOutput
    from mmprep.interface.prepared import SamplingParams
    from tests.support.qwen_tokenizer import tokenizer_file

    facts = ModelFacts(Tokenizer.from_file(str(tokenizer_file("qwen3_vl"))), (151645, 151643))
    setups = {
        "text": (Derendering(), [EngineOutput(text=text) for text in texts]),
        "tokens": (Derendering(facts), [EngineOutput(token_ids=(i,)) for i in ids]),
        "parsed": (
            Derendering(facts, "qwen3", "hermes", enable_auto_tool_choice=True),
            [EngineOutput(token_ids=(i,)) for i in ids],
        ),
    }
    sampling, options = SamplingParams(stop=("never appears",)), OutputOptions(tools=tuple(TOOLS))
    timings: dict[str, list[float]] = {name: [] for name in setups}
    for _ in range(rounds):
        for name, (setup, outputs) in setups.items():
            started = time.process_time()  # CPU time: what neighbours' load moves least
            for _ in range(answers):
                builder, derender = CompletionBuilder("bench", "bench"), setup.start(sampling, options)
                for output in outputs:
                    delta = derender.feed(output)
                    if delta:
                        for chunk in builder.delta_chunks(delta):
                            sse(chunk)
                derender.finish()
            timings[name].append((time.process_time() - started) / (answers * len(outputs)) * 1e6)
    return {name: round(statistics.median(values), 2) for name, values in timings.items()}


# -- the server: `mmprep serve --model`, a process ---------------------------------------


def server_flags(setup: str, folder: Path) -> list[str]:
    flags = [
        "--model",
        str(folder),
        "--engine-class",
        "tests.support.engines:TokenReplayEngine",
        "--max-concurrent-requests",
        "100000",
    ]
    if setup == "parsed":
        flags += ["--reasoning-parser", "qwen3", "--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
    return flags


class Server(AppProcess):
    """`mmprep serve` for one setup, pinned to the first core: the client runs on the
    others (where there are others), and one process uses one core anyway."""

    def __init__(self, setup: str, folder: Path):
        super().__init__("serve", *server_flags(setup, folder), import_from=[REPO])

    def start(self) -> Server:
        super().start()
        assert self.process is not None  # AppProcess.start made it
        os.sched_setaffinity(self.process.pid, {0})
        return self

    def cpu_seconds(self) -> float:
        if self.process is None:
            raise ValueError("cpu_seconds of a server not started")
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- the client ----------------------------------------------------------------------------


def request_bytes(setup: str, ids: list[int], texts: list[str], interval: float, port: int) -> bytes:
    replay = {"texts": texts} if setup == "text" else {"token_ids": ids}
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "weather?"}],
        "stream": True,
        "stop": ["never appears"],
        "tools": TOOLS,
        "replay": {**replay, "interval": interval, "chunk": 1},
    }
    data = json.dumps(body).encode()
    return (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    ).encode() + data


async def one_stream(port: int, request: bytes, gaps: list[float]) -> int:
    """Reads one SSE answer (chunked transfer), noting the gap between its events; the
    number of events, or -1 for an error."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=2**20)
    try:
        writer.write(request)
        status = await reader.readline()
        if b" 200 " not in status:
            return -1
        events, last, tail = 0, None, b""
        while True:
            data = await reader.read(65536)
            if not data:
                return -1
            now = time.perf_counter()
            seen = tail + data
            count = seen.count(b"\r\ndata: ")  # each event is one chunk of the chunked body
            tail = seen[-8:]
            for _ in range(count):  # events that came together: all but the first waited
                if last is not None:
                    gaps.append(now - last)
                last = now
            events += count
            if b"data: [DONE]" in seen:
                return events
    finally:
        writer.close()


async def load(port: int, request: bytes, streams: int) -> tuple[int, list[float], float]:
    gaps: list[float] = []
    started = time.perf_counter()
    results = await asyncio.gather(
        *(one_stream(port, request, gaps) for _ in range(streams)), return_exceptions=True
    )
    wall = time.perf_counter() - started
    errors = sum(1 for r in results if isinstance(r, BaseException) or r < 0)
    return errors, gaps, wall


def measure(
    setup: str, streams: int, ids: list[int], texts: list[str], interval: float, folder: Path
) -> dict:
    with Server(setup, folder) as server:
        asyncio.run(load(server.port, request_bytes(setup, ids, texts, interval, server.port), 4))  # warm up
        request = request_bytes(setup, ids, texts, interval, server.port)
        cpu = server.cpu_seconds()
        errors, gaps, wall = asyncio.run(load(server.port, request, streams))
        cpu = server.cpu_seconds() - cpu
    tokens = (streams - errors) * len(ids)
    added = sorted(gap - interval for gap in gaps)
    return {
        "setup": setup,
        "streams": streams,
        "errors": errors,
        "tokens": tokens,
        "wall_s": round(wall, 2),
        "tokens_per_s": round(tokens / wall),
        "server_cpu_s": round(cpu, 2),
        "cpu_us_per_token": round(cpu / max(tokens, 1) * 1e6, 1),
        "tokens_per_cpu_s": round(tokens / cpu) if cpu else None,
        "itl_added_ms_p50": round(statistics.median(added) * 1e3, 2) if added else None,
        "itl_added_ms_p99": round(added[int(len(added) * 0.99)] * 1e3, 2) if added else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--streams", type=int, nargs="+", default=[64, 512, 2048])
    parser.add_argument("--tokens", type=int, default=128, help="output tokens per stream")
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between an engine's tokens")
    parser.add_argument("--setups", nargs="+", default=list(SETUPS), choices=SETUPS)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from tokenizers import Tokenizer

    from tests.support.qwen_tokenizer import tokenizer_file

    if len(os.sched_getaffinity(0)) > 1:
        os.sched_setaffinity(0, os.sched_getaffinity(0) - {0})
    ids = answer_ids(args.tokens)
    tokenizer = Tokenizer.from_file(str(tokenizer_file("qwen3_vl")))
    texts = [tokenizer.decode([i], skip_special_tokens=False) for i in ids]  # the text engine's same pieces
    print(
        f"{args.tokens} tokens per stream, one per {args.interval * 1e3:.0f} ms; {os.cpu_count()} cores",
        flush=True,
    )
    alone = in_process(ids, texts)
    print(
        json.dumps(
            {
                "in_process_us_per_token": alone,
                "over_text": {k: f"{v / alone['text'] - 1:+.0%}" for k, v in alone.items()},
            }
        ),
        flush=True,
    )
    results = [{"in_process_us_per_token": alone}]
    folder = make_model_folder("qwen3_vl", Path(tempfile.mkdtemp()) / MODEL)
    for streams in args.streams:
        for setup in args.setups:
            result = measure(setup, streams, ids, texts, args.interval, folder)
            results.append(result)
            print(json.dumps(result), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
