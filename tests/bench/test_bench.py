"""`mmprep bench` against a real mmprep on loopback (LiveServer, echo engine), with media
from files and folders (bench's own file server), http URLs (the tests' media server),
data URLs and generated videos.

The echo engine answers with an account of what it decoded, so a test can see what the
target received; bench keeps that text in its per-request records (--save-records).
"""

from __future__ import annotations

import json
import re
import socket
import struct
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import xxhash
from PIL import Image

from mmprep.bench.errors import BenchError
from mmprep.bench.inputs import unique_trailer
from mmprep.bench.synthetic import write_clip
from mmprep.cli import main
from mmprep.core.config import Settings
from mmprep.decoders import decode_video
from tests.support.cli import bench, run_mmprep
from tests.support.media import MEDIA
from tests.support.servers import LiveServer, WorkerProcess

WEBM = "224p_6_vp9.webm"


@pytest.fixture(scope="module")
def server():
    with LiveServer(echo_chars_per_token=16) as live:
        yield live


@pytest.fixture(autouse=True)
def synthetic_cache(tmp_path, monkeypatch):
    """Generated clips go to a cache of the test's own, not the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    """A folder with two tiny camera-like clips, H.264/MP4 and VP9/WebM."""
    folder = tmp_path_factory.mktemp("clips")
    write_clip(folder / "pan.mp4", 64, 64, 1.0, 10, "h264", seed=1)
    write_clip(folder / "pan.webm", 64, 48, 1.0, 10, "vp9", seed=2)
    return folder


@pytest.fixture(scope="module")
def still(tmp_path_factory):
    path = tmp_path_factory.mktemp("images") / "still.png"
    Image.new("RGB", (40, 30), (200, 30, 60)).save(path)
    return path


def accounts(run: dict) -> list[dict]:
    """The echo engine's account of each completed request: what the server decoded."""
    return [json.loads(record["text"]) for record in run["records"] if record["ok"]]


def assert_ordered(figures: dict | None) -> None:
    assert figures is not None
    assert 0 <= figures["p50"] <= figures["p90"] <= figures["p99"]


def test_streaming_sweep_over_a_folder_reports_where_the_time_goes(server, clips, tmp_path, capsys):
    # --unique-media: the server's decode cache cannot answer for any request, so decode is real work
    status, results = bench(
        server.url,
        tmp_path,
        "--video",
        str(clips),
        "--concurrency",
        "1,2",
        "--requests",
        "4",
        "--num-frames",
        "3",
        "--unique-media",
    )
    assert status == 0
    assert [run["metrics"]["concurrency"] for run in results["runs"]] == [1, 2]
    for run in results["runs"]:
        m = run["metrics"]
        assert m["sent"] == 4 and m["completed"] + m["failed"] == m["sent"] and m["completed"] == 4
        for figure in ("ttft_ms", "itl_ms", "latency_ms", "server_fetch_ms", "server_decode_ms"):
            assert_ordered(m[figure])
        assert m["server_decode_ms"]["mean"] > 0 and m["server_timing_missing"] == 0
        assert m["output_tokens"] > 0 and m["output_tokens_counted_by"] == ["usage"]
        assert m["ttft_ms"]["mean"] <= m["latency_ms"]["mean"]
        split = m["split_ms"]
        assert split["of"] == "ttft" and split["total"] == pytest.approx(m["ttft_ms"]["mean"], abs=0.01)
        assert split["decode"] == pytest.approx(m["server_decode_ms"]["mean"], abs=0.01)
        assert split["handoff"] == pytest.approx(m["server_engine_ms"]["mean"], abs=0.01)
        # requests take the folder's videos in turn, sampled as --num-frames asked
        sent = [record["media"][0]["name"] for record in run["records"]]
        assert sent == ["pan.mp4", "pan.webm"] * 2
        for name, account in zip(sent, accounts(run), strict=True):
            video = account["media"][0]
            assert video["shape"][0] == 3
            assert video["metadata"]["codec"] == ("h264" if name.endswith(".mp4") else "vp9")
    # a URL of its own per request, fetched by the target once
    assert results["file_server"]["urls_fetched"] == 8 and results["file_server"]["fetches"] == 8
    table = capsys.readouterr().out
    assert "| concurrency |" in table and "Where the mean TTFT goes" in table


def test_not_streaming_with_data_urls(server, clips, tmp_path):
    status, results = bench(
        server.url,
        tmp_path,
        "--video",
        str(clips / "pan.mp4"),
        "--media-as",
        "data",
        "--no-stream",
        "--fps",
        "2",
        "--requests",
        "3",
        "--unique-media",
    )
    assert status == 0
    run = results["runs"][0]
    m = run["metrics"]
    assert m["completed"] == 3 and m["ttft_ms"] is None and m["itl_ms"] is None
    assert_ordered(m["latency_ms"])
    assert m["split_ms"]["of"] == "latency" and m["server_decode_ms"]["mean"] > 0
    assert results["file_server"] is None  # nothing to serve: the bytes travel in the requests
    data = (clips / "pan.mp4").read_bytes()
    for record, account in zip(run["records"], accounts(run), strict=True):
        assert "url" not in record["media"][0]
        padding = unique_trailer(data[:16], record["number"])
        assert record["media"][0]["bytes"] == len(data + padding)
        assert record["media"][0]["crc32"] == f"{zlib.crc32(data + padding):08x}"
        assert account["media"][0]["timestamps"] == [0.0, 0.5]  # fps=2 over one second


def test_http_url_video_and_a_local_image_in_every_request(server, still, media_server, tmp_path):
    url = f"{media_server.url}/{WEBM}"
    before = media_server.fetches[f"/{WEBM}"]
    status, results = bench(
        server.url, tmp_path, "--video", url, "--image", str(still), "--requests", "3", "--concurrency", "3"
    )
    assert status == 0
    assert media_server.fetches[f"/{WEBM}"] - before == 3  # the target fetched the URL itself, each time
    # the same image bytes in every request: one URL of bench's file server, fetched each time
    assert results["file_server"]["urls_fetched"] == 1 and results["file_server"]["fetches"] == 3
    # two media items fetched and decoded side by side: the server's phases are wall-clock
    # time counted once, so they fit in its preprocessing and "other" is never negative
    for record in results["runs"][0]["records"]:
        timing = record["server_timing"]
        assert timing["fetch"] + timing["decode"] <= timing["preprocess"]
    assert results["runs"][0]["metrics"]["split_ms"]["other"] >= 0
    for record, account in zip(results["runs"][0]["records"], accounts(results["runs"][0]), strict=True):
        assert [item["kind"] for item in record["media"]] == ["video", "image"]
        assert record["media"][0]["url"] == url
        video, image = account["media"]
        assert video["metadata"]["num_frames"] == 6 and image["shape"] == [30, 40, 3]


def test_synthetic_videos_are_generated_as_asked(server, tmp_path):
    status, results = bench(
        server.url,
        tmp_path,
        "--synthetic",
        "2",
        "--synthetic-size",
        "64x48",
        "--synthetic-duration",
        "1",
        "--synthetic-fps",
        "10",
        "--synthetic-codec",
        "vp9",
        "--requests",
        "4",
        "--concurrency",
        "2",
    )
    assert status == 0
    seen = accounts(results["runs"][0])
    assert len(seen) == 4
    for account in seen:
        meta = account["media"][0]["metadata"]
        assert (meta["codec"], meta["width"], meta["height"], meta["duration"], meta["num_frames"]) == (
            "vp9",
            64,
            48,
            1.0,
            10,
        )
    # two scenes, not one clip twice
    assert len({account["media"][0]["xxh3"] for account in seen}) == 2


@pytest.mark.parametrize("media_as", ["url", "data"])
def test_unique_media_sends_different_bytes_with_the_same_frames(server, clips, tmp_path, media_as):
    status, results = bench(
        server.url,
        tmp_path,
        "--video",
        str(clips),
        "--unique-media",
        "--media-as",
        media_as,
        "--requests",
        "6",
        "--concurrency",
        "2",
        "--warmup",
        "1",
    )
    assert status == 0
    run = results["runs"][0]
    media = [record["media"][0] for record in run["records"]]
    assert len({item["crc32"] for item in media}) == 6
    if media_as == "url":
        assert len({item["url"] for item in media}) == 6
        # every request's URL fetched exactly once (the warm-up's too): nothing to cache
        assert results["file_server"]["fetches"] == results["file_server"]["urls_fetched"] == 7
    # the padding is skipped by the demuxer: the server decoded the same frames as without it
    for item, account in zip(media, accounts(run), strict=True):
        plain = decode_video(clips / item["name"], fps=2.0, max_frames=32)
        assert account["media"][0]["xxh3"] == xxhash.xxh3_64_hexdigest(plain.frames.data)


@pytest.mark.parametrize(
    "name", ["bframes_h264.mp4", "edit_list_h264.mp4", WEBM, "vfr_h264.mkv", "bframes_mpeg4.avi"]
)
def test_unique_padding_changes_the_bytes_not_the_frames(name):
    data = (MEDIA / name).read_bytes()
    first, second = unique_trailer(data[:16], 1), unique_trailer(data[:16], 2)
    assert first != second
    plain, padded = decode_video(data), decode_video(data + first)
    assert padded.metadata == plain.metadata
    assert padded.frames.tobytes() == plain.frames.tobytes()


def test_unique_padding_refuses_a_format_it_does_not_know():
    with pytest.raises(BenchError, match="cannot pad"):
        unique_trailer(b"\x00\x00\x01\xb3" + bytes(12), 1, "clip.mpg")


def test_closed_loop_keeps_at_most_concurrency_requests_in_flight(server, clips, tmp_path):
    status, results = bench(
        server.url,
        tmp_path,
        "--video",
        str(clips / "pan.mp4"),
        "--requests",
        "8",
        "--concurrency",
        "2",
        "--no-stream",
    )
    assert status == 0
    spans = [(r["start_ms"], r["start_ms"] + r["latency_ms"]) for r in results["runs"][0]["records"]]
    for start, _ in spans:
        in_flight = sum(1 for s, e in spans if s <= start < e - 0.5)  # 0.5 ms: one ends as the next starts
        assert in_flight <= 2


def test_request_rate_spreads_arrivals_and_duration_stops_new_requests(server, clips, tmp_path):
    status, results = bench(
        server.url,
        tmp_path,
        "--video",
        str(clips / "pan.webm"),
        "--request-rate",
        "20",
        "--duration",
        "0.6",
        "--concurrency",
        "4",
        "--seed",
        "3",
    )
    assert status == 0
    run = results["runs"][0]
    starts = [r["start_ms"] for r in run["records"]]
    assert run["metrics"]["request_rate"] == 20 and run["metrics"]["sent"] == len(starts) >= 2
    assert max(starts) < 600  # nothing started after --duration
    assert sorted(starts) == starts and starts[-1] - starts[0] > 50  # Poisson gaps, not all at once


def test_max_tokens_and_extra_body_reach_the_server(server, clips, tmp_path):
    status, results = bench(
        server.url,
        tmp_path,
        "--video",
        str(clips / "pan.mp4"),
        "--requests",
        "2",
        "--max-tokens",
        "5",
        "--extra-body",
        '{"seed": 7, "temperature": 0.5}',
    )
    assert status == 0
    assert results["runs"][0]["metrics"]["output_tokens"] == 10  # the echo engine stops at max_tokens
    status, results = bench(
        server.url,
        tmp_path,
        "--video",
        str(clips / "pan.mp4"),
        "--requests",
        "1",
        "--extra-body",
        '{"seed": 7, "temperature": 0.5}',
        "--max-tokens",
        "1000",
    )
    sampling = accounts(results["runs"][0])[0]["sampling"]
    assert (sampling["seed"], sampling["temperature"]) == (7, 0.5)


def test_failures_are_counted_by_status_and_code_and_set_the_exit_status(
    server, clips, media_server, tmp_path
):
    good, bad = str(clips / "pan.mp4"), f"{media_server.url}/status/404"
    args = ["--video", good, "--video", bad, "--requests", "4", "--concurrency", "2"]
    status, results = bench(server.url, tmp_path, *args)
    m = results["runs"][0]["metrics"]
    assert status == 1
    assert (m["sent"], m["completed"], m["failed"]) == (4, 2, 2)
    assert m["failures"] == {"400 media_fetch_failed": 2} and m["failure_rate"] == 0.5
    assert main(["bench", "--url", server.url, "--quiet", "--max-failure-rate", "0.5", *args]) == 0
    assert main(["bench", "--url", server.url, "--quiet", "--max-failure-rate", "0.4", *args]) == 1


def test_a_target_that_refuses_the_file_servers_urls_is_told_which_flag_it_needs(
    clips, media_server, tmp_path, capsys
):
    """A default mmprep refuses loopback media URLs (SSRF): bench says what to give it."""
    with LiveServer(allow_private_networks=False) as default:
        status, results = bench(default.url, tmp_path, "--video", str(clips / "pan.mp4"), "--requests", "2")
        assert status == 1 and results["runs"][0]["metrics"]["failures"] == {"400 media_forbidden": 2}
        err = capsys.readouterr().err
        assert "2 request(s) refused as media_forbidden" in err
        assert "--allow-private-networks" in err and "--media-as data" in err
        # a URL of the user's own refused alike: the target's rule, not bench's file server
        status, results = bench(
            default.url, tmp_path, "--video", f"{media_server.url}/{WEBM}", "--requests", "1"
        )
        assert status == 1 and results["runs"][0]["metrics"]["failures"] == {"400 media_forbidden": 1}
        assert "--allow-private-networks" not in capsys.readouterr().err


@pytest.mark.slow  # matplotlib, about 2 s
def test_plot_draws_latency_and_throughput_against_concurrency(server, clips, tmp_path):
    chart = tmp_path / "sweep.png"
    status, _ = bench(
        server.url,
        tmp_path,
        "--video",
        str(clips / "pan.mp4"),
        "--concurrency",
        "1,2,3",
        "--requests",
        "3",
        "--plot",
        str(chart),
    )
    assert status == 0
    with Image.open(chart) as image:
        assert image.format == "PNG" and image.size == (1200, 450)


@pytest.mark.slow  # a `mmprep worker` process
def test_the_hand_off_to_remote_workers_is_its_own_part_not_network(clips, tmp_path):
    with (
        WorkerProcess() as worker,
        LiveServer(Settings(engine="workers", worker_url=[worker.url], allow_private_networks=True)) as front,
    ):
        status, results = bench(front.url, tmp_path, "--video", str(clips / "pan.mp4"), "--requests", "4")
    assert status == 0
    run = results["runs"][0]
    split = run["metrics"]["split_ms"]
    assert split["handoff"] == pytest.approx(run["metrics"]["server_engine_ms"]["mean"], abs=0.01)
    assert split["total"] == pytest.approx(run["metrics"]["ttft_ms"]["mean"], abs=0.01)
    # the headers leave the server after preprocessing and the engine's first output, so
    # what is left for network is never negative: nothing is counted twice
    for record in run["records"]:
        timing = record["server_timing"]
        assert timing["engine"] > 0
        assert record["headers_ms"] - timing["preprocess"] - timing["engine"] >= -0.2


class _HandlerServer:
    """A BaseHTTPRequestHandler class served on a free loopback port, in a thread."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


class _PlainOpenAIServer(_HandlerServer):
    """An OpenAI-compatible server that, like most, sends no Server-Timing header: one
    model, a streamed answer of three chunks (the SSE lines written without the optional
    space after `data:`)."""

    def __init__(self):
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self._send(
                    json.dumps({"object": "list", "data": [{"id": "plain-vlm", "object": "model"}]}).encode(),
                    "application/json",
                )

            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                chunks = [
                    {"choices": [{"index": 0, "delta": {"content": word}}]} for word in ("a ", "b ", "c")
                ]
                events = "".join(f"data:{json.dumps(chunk)}\n\n" for chunk in chunks) + "data:[DONE]\n\n"
                self._send(events.encode(), "text/event-stream")

            def _send(self, body: bytes, content_type: str):
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        super().__init__(Handler)


def test_a_server_without_server_timing_gets_its_figures_reported_missing(clips, tmp_path, capsys):
    with _PlainOpenAIServer() as plain:
        status, results = bench(plain.url, tmp_path, "--video", str(clips / "pan.mp4"), "--requests", "2")
    assert status == 0
    assert results["target"]["model"] == "plain-vlm"  # the first model /v1/models lists
    m = results["runs"][0]["metrics"]
    assert m["completed"] == 2 and m["server_timing_missing"] == 2
    assert m["server_decode_ms"] is None and m["split_ms"] is None
    assert m["output_tokens"] == 6 and m["output_tokens_counted_by"] == [
        "chunks"
    ]  # no usage sent: chunks counted
    assert m["itl_ms"]["count"] == 4 and results["runs"][0]["records"][0]["text"] == "a b c"
    assert "missing" in capsys.readouterr().out


@pytest.mark.slow  # `python -m mmprep bench` as a process
def test_the_command_prints_the_table_and_no_progress_bar_when_not_a_terminal(server, clips):
    result = run_mmprep("bench", "--url", server.url, "--video", str(clips / "pan.webm"), "--requests", "2")
    assert result.returncode == 0, result.stderr
    assert "| concurrency |" in result.stdout and "\x1b[" not in result.stdout + result.stderr
    assert "target " in result.stderr  # notes go to stderr, the summary to stdout


@pytest.mark.slow  # `python -m mmprep bench` as a process, per case
@pytest.mark.parametrize(
    "args, says",
    [
        (
            [
                "--url",
                "http://127.0.0.1:9",
                "--ready-timeout",
                "0.3",
                "--synthetic",
                "1",
                "--synthetic-size",
                "32x32",
                "--synthetic-duration",
                "0.2",
                "--quiet",
            ],
            "no server answered at http://127.0.0.1:9",
        ),
        (["--video", "/no/such/clip.mp4"], "'/no/such/clip.mp4' is neither a file nor a folder"),
        (["--video", "x.mp4", "--extra-body", "{not json"], "invalid extra_body: not JSON"),
        (["--video", "x.mp4", "--fps", "1", "--num-frames", "4"], "give --fps or --num-frames, not both"),
        ([], "no inputs"),
        (["--video", "x.mp4", "--concurrency", "0"], "concurrency"),
        (["--video", "x.mp4", "--output", "/no/such/dir/r.json"], "the folder /no/such/dir does not exist"),
    ],
)
def test_bad_input_is_one_line_and_status_2(args, says):
    result = run_mmprep("bench", *args)
    assert result.returncode == 2
    assert says in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.slow  # `python -m mmprep --help` as a process
def test_help_lists_the_benchmarks_and_their_flags():
    top = run_mmprep("--help")
    assert top.returncode == 0 and "bench" in top.stdout and "bench-decode" in top.stdout
    flags = run_mmprep("bench", "--help").stdout
    for flag in (
        "--url",
        "--video",
        "--media-as",
        "--unique-media",
        "--concurrency",
        "--request-rate",
        "--no-stream",
        "--extra-body",
        "--plot",
        "--max-failure-rate",
        "--client-processes",
    ):
        assert flag in flags
    assert "~/.cache/mmprep/synthetic" in flags  # where generated clips are kept


@pytest.mark.slow  # `python -m mmprep ... --help` as a process, per command
@pytest.mark.parametrize("command", ["bench", "bench-decode"])
def test_help_gives_each_flag_one_default_in_words(command):
    options = run_mmprep(command, "--help").stdout.split("options:", 1)[1]
    flags = [
        " ".join(flag.split()) for flag in re.split(r"\n  (?=--)", options)
    ]  # each flag's help, unwrapped
    for flag in flags:
        assert flag.count("(default") <= 1, flag
        assert "null" not in flag, flag
    described = {flag.split()[0]: flag for flag in flags}
    if command == "bench":
        assert described["--request-rate"].endswith("(default: as fast as it allows)")
        assert described["--model"].endswith("(default: the first one /v1/models lists)")
        assert described["--api-key"].endswith("(default: none)")
        assert described["--concurrency"].endswith("(default: [1])")


class _BusyServer(_HandlerServer):
    """An OpenAI-compatible server in trouble: every other chat request is refused with
    503, the others have their connection reset under them (SO_LINGER 0, no answer)."""

    def __init__(self):
        counter = iter(range(1_000_000))

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                body = json.dumps(
                    {"object": "list", "data": [{"id": "busy-vlm", "object": "model"}]}
                ).encode()
                self._send(200, body)

            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                if next(counter) % 2:
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.close_connection = True
                    return
                self._send(503, b'{"error": {"message": "busy", "code": "overloaded"}}', retry_after="1")

            def _send(self, status: int, body: bytes, retry_after: str | None = None):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                if retry_after:
                    self.send_header("Retry-After", retry_after)
                self.end_headers()
                self.wfile.write(body)

        super().__init__(Handler)


def test_connection_level_failures_are_told_apart_from_refusals(tmp_path, capsys):
    with _BusyServer() as busy:
        status, results = bench(
            busy.url, tmp_path, "--prompt-words", "50", "--requests", "6", "--concurrency", "1"
        )
    m = results["runs"][0]["metrics"]
    assert status == 1
    assert m["failure_kinds"] == {"connection": 3, "refused": 3, "http": 0, "timeout": 0, "stream": 0}
    assert m["failures"]["503 overloaded"] == 3
    assert "3 connection-level" in capsys.readouterr().out


def test_prompt_words_make_a_text_only_request_of_that_length(server, tmp_path):
    status, results = bench(
        server.url, tmp_path, "--prompt-words", "300", "--requests", "2", "--max-tokens", "4000"
    )
    assert status == 0
    texts = [json.loads(record["text"])["text"] for record in results["runs"][0]["records"]]
    prompt_words = 6 + 1  # "Describe what happens in this video." and the request's number
    assert all(len(text.split()) == prompt_words + 300 for text in texts)
    assert texts[0] != texts[1]  # every request its own words: no prefix cache answers for them
    assert all(json.loads(record["text"])["media"] == [] for record in results["runs"][0]["records"])
