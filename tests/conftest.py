"""Shared helpers: where the fixtures are, and an independent reference decode."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest
from make_fixtures import read_painted_index, write_painted_clip

MEDIA = Path(__file__).parent / "data" / "media"


def painted(frames: np.ndarray) -> list[int]:
    """The index each returned frame painted into its pixels (see make_fixtures.paint)."""
    return [read_painted_index(frame) for frame in frames]


def reference_decode(path) -> tuple[np.ndarray, list[int]]:
    """Every frame the plain PyAV loop yields, as (seconds from the first frame, painted
    index): the oracle the sampler must agree with, written without any of its code."""
    times, indices = [], []
    with av.open(str(path)) as container:
        for frame in container.decode(video=0):
            times.append(float(frame.time))
            rgb = frame.to_ndarray(format="rgb24")
            turns = round(frame.rotation / 90) % 4
            indices.append(read_painted_index(np.rot90(rgb, turns)))
    times = np.asarray(times) - times[0]
    return times, indices


def on_screen(times: np.ndarray, targets) -> list[int]:
    """Positions of the frames on screen at `targets`, by the contract's words:
    the last frame starting at or before t + 1 ms, the first if none; each once."""
    chosen: list[int] = []
    for t in targets:
        started = [i for i, start in enumerate(times) if start <= t + 1e-3]
        position = started[-1] if started else 0
        if position not in chosen:
            chosen.append(position)
    return chosen


@pytest.fixture(scope="session")
def media_server():
    """The fixtures folder over HTTP on loopback (see servers.MediaServer for its extra routes)."""
    from servers import MediaServer

    with MediaServer(MEDIA) as server:
        yield server


@pytest.fixture(scope="session")
def long_clips(tmp_path_factory) -> dict[str, Path]:
    """Clips with many keyframes, so seeking and frame skipping really happen."""
    folder = tmp_path_factory.mktemp("long_clips")
    x264 = {"crf": "18", "bf": "3", "g": "10", "sc_threshold": "0"}
    return {
        "h264_bframes.mp4": write_painted_clip(folder / "a.mp4", "mp4", "libx264", 10, 120, 128, 64, x264),
        "h264_bframes.mkv": write_painted_clip(folder / "a.mkv", "matroska", "libx264", 10, 120, 128, 64, x264),
        "hevc.mp4": write_painted_clip(
            folder / "b.mp4", "mp4", "libx265", 10, 120, 128, 64,
            {"crf": "18", "x265-params": "keyint=10:min-keyint=10:bframes=3:log-level=error"}, "hvc1",
        ),
        "vp9.webm": write_painted_clip(
            folder / "c.webm", "webm", "libvpx-vp9", 10, 120, 128, 64, {"crf": "20", "b": "0", "g": "10"}
        ),
        "av1.mkv": write_painted_clip(
            folder / "d.mkv", "matroska", "libsvtav1", 10, 120, 128, 64, {"crf": "20", "g": "10", "preset": "12"}
        ),
        "mpeg4.avi": write_painted_clip(
            folder / "e.avi", "avi", "mpeg4", 10, 120, 128, 64, {"qscale": "2", "bf": "2", "g": "10"}, "XVID"
        ),
    }
