"""`mmprep bench-decode` as a user runs it: a real process on generated videos."""

from __future__ import annotations

import importlib.util
import json
import re

import pytest

from mmprep.bench.synthetic import write_clip
from mmprep.decoders import decode_video
from tests.support.cli import run_mmprep, start_mmprep

pytestmark = pytest.mark.slow  # every test runs `python -m mmprep bench-decode` as a process

HAS_OPENCV = importlib.util.find_spec("cv2") is not None


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    """Generated clips go to a cache of the test's own, not the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "mmprep" / "synthetic"


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    folder = tmp_path_factory.mktemp("decode")
    return {
        "mp4": write_clip(folder / "pan.mp4", 96, 64, 2.0, 15, "h264", seed=4),
        "webm": write_clip(folder / "pan.webm", 96, 64, 2.0, 15, "vp9", seed=5),
    }


def test_prints_each_loaders_time_and_ratio_to_mmprep(videos, tmp_path):
    output = tmp_path / "decode.json"
    result = run_mmprep(
        "bench-decode",
        str(videos["mp4"]),
        str(videos["webm"]),
        "--num-frames",
        "4",
        "--repeats",
        "2",
        "--output",
        str(output),
    )
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
    assert (
        webm["transformers PyAV loop"]["seconds"] is None
        and "0 frames" in webm["transformers PyAV loop"]["error"]
    )

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
    result = run_mmprep(
        "bench-decode",
        "--synthetic",
        "1",
        "--synthetic-size",
        "64x64",
        "--synthetic-duration",
        "1",
        "--synthetic-codec",
        "av1",
        "--num-frames",
        "2",
        "--repeats",
        "1",
    )
    assert result.returncode == 0, result.stderr
    assert "synthetic_0_64x64_av1.webm: av1, 64x64, 1.0 s, 30 frames" in result.stdout


SMALL_CLIP = [
    "--synthetic",
    "1",
    "--synthetic-size",
    "64x48",
    "--synthetic-duration",
    "1",
    "--synthetic-fps",
    "10",
    "--num-frames",
    "2",
    "--repeats",
    "1",
]


def test_generated_clips_are_kept_in_the_cache_and_reused(cache):
    first = run_mmprep("bench-decode", *SMALL_CLIP)
    assert first.returncode == 0, first.stderr
    assert "generated 1 of 1 h264 video(s)" in first.stderr
    (clip,) = cache.glob("*/synthetic_0_64x48_h264.mp4")
    made = clip.stat()
    second = run_mmprep("bench-decode", *SMALL_CLIP)
    assert second.returncode == 0, second.stderr
    assert "all 1 from the cache" in second.stderr and "generated 1" not in second.stderr
    assert (clip.stat().st_ino, clip.stat().st_mtime_ns) == (
        made.st_ino,
        made.st_mtime_ns,
    )  # not written again
    assert first.stdout.splitlines()[0] == second.stdout.splitlines()[0]  # the same clip described
    # other options are another clip, in a folder of its own
    other = run_mmprep("bench-decode", *SMALL_CLIP, "--synthetic-fps", "5")
    assert other.returncode == 0 and "generated 1 of 1" in other.stderr
    assert len(list(cache.glob("*/synthetic_0_64x48_h264.mp4"))) == 2


def test_two_runs_making_the_same_clip_at_once_both_get_a_whole_file(cache):
    runs = [start_mmprep("bench-decode", *SMALL_CLIP, "--synthetic-duration", "3") for _ in range(2)]
    for run in runs:
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
        assert "64x48, 3.0 s, 30 frames" in out
    (clip,) = cache.glob("*/synthetic_0_64x48_h264.mp4")
    assert list(clip.parent.iterdir()) == [clip]  # no partial file left behind
    assert decode_video(clip).metadata.num_frames == 30


@pytest.mark.parametrize(
    "args, says",
    [
        (["/no/such.mp4"], "'/no/such.mp4' is not a file"),
        ([], "no videos"),
    ],
)
def test_bad_input_is_one_line_and_status_2(args, says):
    result = run_mmprep("bench-decode", *args)
    assert result.returncode == 2
    assert says in result.stderr and "Traceback" not in result.stderr
