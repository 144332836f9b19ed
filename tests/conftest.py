"""Fixtures the whole suite shares: the media fixtures over HTTP, long clips made once per
run, and the quick run's skipping of slow modules. What tests import by name is in
tests/support/media.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.data.media.make_fixtures import write_painted_clip
from tests.support.alone import machine_share
from tests.support.media import MEDIA
from tests.support.media_store import MediaStore


@pytest.fixture(autouse=True)
def _share_the_machine(request):
    """A test marked `alone` (it times something) runs with no test beside it on the other
    worker (tests/support/alone.py)."""
    with machine_share(request.config.rootpath, alone=request.node.get_closest_marker("alone") is not None):
        yield


@pytest.fixture(scope="session")
def media_server():
    """The fixtures folder over HTTP on loopback, with the misbehaviours of media stores
    (tests/support/media_store.py)."""
    with MediaStore(folder=MEDIA) as server:
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


# Test files that never run beside one another on scripts/test.sh's two workers (`--dist
# loadfile`): Ray's clusters keep every core busy for seconds, even between their module's
# tests, and the huge-body tests time /health against a parse measured beside it, which a
# Ray cluster on the other worker turned 0.3 s into 0.8 s. They go to one worker, one after
# another (so the cluster is gone before they start); every other file as loadfile, and the
# `alone` tests wait for the other worker's test to end (_share_the_machine).
ONE_AT_A_TIME = ("tests/rayserve/", "tests/transport/test_huge_body.py")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling  # type: ignore[import-not-found]

    class OneAtATime(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = super()._split_scope(nodeid)
            return "one at a time" if file.startswith(ONE_AT_A_TIME) else file

    return OneAtATime(config, log)
