"""Shared helpers: where the fixtures are, and an independent reference decode."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest
from make_fixtures import read_painted_index, write_painted_clip

from mmprep.cli import main
from mmprep.testing.fileserver import FileServer

MEDIA = Path(__file__).parent / "data" / "media"


def painted(frames: np.ndarray) -> list[int]:
    """The index each returned frame painted into its pixels (see make_fixtures.paint)."""
    return [read_painted_index(frame) for frame in frames]


@dataclass(frozen=True)
class Reference:
    """Every frame the plain PyAV loop yields from FFmpeg's best video stream."""

    pts: list[int]  # presentation times from the first frame's, in `time_base`
    time_base: Fraction
    indices: list[int]  # the index each frame painted into its pixels

    @property
    def times(self) -> np.ndarray:
        """Seconds from the first frame."""
        return np.array([float(p * self.time_base) for p in self.pts])

    def seconds(self, position: int) -> Fraction:
        return self.pts[position] * self.time_base


def reference_decode(path) -> Reference:
    """The oracle the sampler must agree with, written without any of its code."""
    pts, indices = [], []
    with av.open(str(path)) as container:
        stream = container.streams.best("video")
        if not isinstance(stream, av.VideoStream):
            raise ValueError(f"{path} has no video stream")
        time_base = Fraction(stream.time_base.numerator, stream.time_base.denominator)
        for frame in container.decode(stream):
            if frame.pts is None:
                raise ValueError(f"{path}: a frame without a pts")
            pts.append(frame.pts)
            rgb = frame.to_ndarray(format="rgb24")
            turns = round(frame.rotation / 90) % 4
            indices.append(read_painted_index(np.rot90(rgb, turns)))
    return Reference([p - pts[0] for p in pts], time_base, indices)


def reference_targets(
    ref: Reference,
    duration: float,
    fps: float | None = None,
    num_frames: int | None = None,
    max_frames: int | None = None,
):
    """The moments the contract names for a request, as exact seconds (Fractions)."""
    cap = max_frames or math.inf
    if num_frames is not None and num_frames != -1:  # never above max_frames: refused before this
        count = num_frames
        if count == 1:
            return [Fraction(0)]
        return [ref.seconds(-1) * j / (count - 1) for j in range(count)]
    if fps is not None:
        count = max(1, math.floor(round(duration * fps, 9)))
        if count <= cap:
            # k / r, allowed 0.1 microsecond for the float rounding of k / r
            return [Fraction(k) / Fraction(fps) + Fraction(1, 10**7) for k in range(count)]
    elif len(ref.pts) <= cap:
        return [ref.seconds(i) for i in range(len(ref.pts))]
    assert max_frames  # cap is finite here: it was below the frames asked for
    return [Fraction(k) * Fraction(duration) / max_frames + Fraction(1, 10**7) for k in range(max_frames)]


def on_screen(ref: Reference, targets) -> list[int]:
    """Positions of the frames on screen at `targets` (seconds), by the contract's words:
    the last frame starting at or before t, the first if none; each once."""
    chosen: list[int] = []
    for t in targets:
        started = [i for i in range(len(ref.pts)) if ref.seconds(i) <= t]
        position = started[-1] if started else 0
        if position not in chosen:
            chosen.append(position)
    return chosen


def bench(server_url: str, tmp_path, *args: str) -> tuple[int, dict]:
    """Run `mmprep bench` in this process; (exit status, the JSON results)."""
    output = tmp_path / "results.json"
    status = main(["bench", "--url", server_url, "--output", str(output), "--save-records", "--quiet", *args])
    return status, json.loads(output.read_text()) if output.exists() else {}


@pytest.fixture(scope="session")
def media_server():
    """The fixtures folder over HTTP on loopback (mmprep.testing.fileserver has its extra routes)."""
    with FileServer(folder=MEDIA) as server:
        yield server


# The client APIs' servers (tests/client_api_fixtures.py), here and not in a conftest.py of
# tests/client_apis/: a second conftest module would take this one's place as `conftest`,
# which test modules import by that name.
@pytest.fixture(scope="session")
def echo_server():
    import client_api_fixtures

    with client_api_fixtures.echo_server() as server:
        yield server


@pytest.fixture(scope="session")
def plain_server():
    import client_api_fixtures

    with client_api_fixtures.plain_server() as server:
        yield server


@pytest.fixture(scope="session")
def parsing_server():
    import client_api_fixtures

    with client_api_fixtures.parsing_server() as server:
        yield server


@pytest.fixture(scope="session")
def long_clips(tmp_path_factory) -> dict[str, Path]:
    """Clips with many keyframes, so seeking and frame skipping really happen."""
    folder = tmp_path_factory.mktemp("long_clips")
    x264 = {"crf": "18", "bf": "3", "g": "10", "sc_threshold": "0"}
    return {
        "h264_bframes.mp4": write_painted_clip(folder / "a.mp4", "mp4", "libx264", 10, 120, 128, 64, x264),
        "h264_bframes.mkv": write_painted_clip(
            folder / "a.mkv", "matroska", "libx264", 10, 120, 128, 64, x264
        ),
        "hevc.mp4": write_painted_clip(
            folder / "b.mp4",
            "mp4",
            "libx265",
            10,
            120,
            128,
            64,
            {"crf": "18", "x265-params": "keyint=10:min-keyint=10:bframes=3:log-level=error"},
            "hvc1",
        ),
        "vp9.webm": write_painted_clip(
            folder / "c.webm", "webm", "libvpx-vp9", 10, 120, 128, 64, {"crf": "20", "b": "0", "g": "10"}
        ),
        "av1.mkv": write_painted_clip(
            folder / "d.mkv",
            "matroska",
            "libsvtav1",
            10,
            120,
            128,
            64,
            {"crf": "20", "g": "10", "preset": "12"},
        ),
        "mpeg4.avi": write_painted_clip(
            folder / "e.avi", "avi", "mpeg4", 10, 120, 128, 64, {"qscale": "2", "bf": "2", "g": "10"}, "XVID"
        ),
    }


SLOW_MODULE = "\npytestmark = pytest.mark.slow"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With `-m "not slow"`, a module whose every test is slow (its `pytestmark` says so) is
    not imported at all: importing torch, Ray Serve and Playwright only to deselect their
    tests was 5 of the quick half's 60 s."""
    if config.getoption("markexpr") != "not slow" or collection_path.suffix != ".py":
        return None
    if collection_path.name.startswith("test_") and SLOW_MODULE in collection_path.read_text():
        return True
    return None
