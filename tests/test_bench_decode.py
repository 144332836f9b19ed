"""`mmprep bench-decode` as a user runs it: a real process on generated videos."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys

import pytest

from app.bench.synthetic import write_clip

HAS_OPENCV = importlib.util.find_spec("cv2") is not None


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    folder = tmp_path_factory.mktemp("decode")
    return {
        "mp4": write_clip(folder / "pan.mp4", 96, 64, 2.0, 15, "h264", seed=4),
        "webm": write_clip(folder / "pan.webm", 96, 64, 2.0, 15, "vp9", seed=5),
    }


def bench_decode(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", "bench-decode", *args],
                          capture_output=True, text=True, timeout=120, check=False)


def test_prints_each_loaders_time_and_ratio_to_mmprep(videos, tmp_path):
    output = tmp_path / "decode.json"
    result = bench_decode(str(videos["mp4"]), str(videos["webm"]), "--num-frames", "4", "--repeats", "2",
                          "--output", str(output))
    assert result.returncode == 0, result.stderr
    loaders = ["mmprep decode_video", "PyAV, every frame", "transformers PyAV loop"]
    loaders += ["vLLM OpenCV loader"] if HAS_OPENCV else []
    results = json.loads(output.read_text())

    mp4 = {t["loader"]: t for t in results["pan.mp4"]["timings"]}
    assert list(mp4) == loaders
    assert all(t["seconds"] > 0 and t["error"] is None for t in mp4.values())
    assert mp4["PyAV, every frame"]["frames"] == 30
    assert all(t["frames"] == 4 for name, t in mp4.items() if name != "PyAV, every frame")

    # WebM does not say how many frames it has: transformers' loop has nothing to sample
    webm = {t["loader"]: t for t in results["pan.webm"]["timings"]}
    assert webm["mmprep decode_video"]["frames"] == 4
    assert webm["transformers PyAV loop"]["seconds"] is None and "0 frames" in webm["transformers PyAV loop"]["error"]

    # the printed tables: mmprep is the reference, every other timed loader gets its ratio
    blocks = {block.split(":")[0]: block for block in result.stdout.strip().split("\n\n")}
    for name, timings in (("pan.mp4", mp4), ("pan.webm", webm)):
        rows = re.findall(r"^\| (.+?) \| [\d.]+ m?s \| \d+ \| ([\d.]+)x \|$", blocks[name], re.MULTILINE)
        assert {loader for loader, _ in rows} == {loader for loader, t in timings.items() if t["seconds"]}
        for loader, ratio in rows:
            expected = timings[loader]["seconds"] / timings["mmprep decode_video"]["seconds"]
            assert float(ratio) == pytest.approx(expected, abs=0.006)
    assert "pan.webm: vp9, 96x64, 2.0 s, 30 frames" in result.stdout


def test_generates_its_own_videos_when_asked():
    result = bench_decode("--synthetic", "1", "--synthetic-size", "64x64", "--synthetic-duration", "1",
                          "--synthetic-codec", "av1", "--num-frames", "2", "--repeats", "1")
    assert result.returncode == 0, result.stderr
    assert "synthetic_0_64x64_av1.webm: av1, 64x64, 1.0 s, 30 frames" in result.stdout


@pytest.mark.parametrize("args, says", [
    (["/no/such.mp4"], "'/no/such.mp4' is not a file"),
    ([], "no videos"),
])
def test_bad_input_is_one_line_and_status_2(args, says):
    result = bench_decode(*args)
    assert result.returncode == 2
    assert says in result.stderr and "Traceback" not in result.stderr
