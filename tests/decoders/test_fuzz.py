"""The fuzz run (tests/decoders/fuzz_media.py) with a fixed seed, in a child process so that a
crash fails this test, and the inputs that once broke something, replayed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.decoders.fuzz_media import KEPT, MEDIA, case, run_one, seeds

FUZZ = Path(__file__).with_name("fuzz_media.py")
CASES = 2500


@pytest.mark.slow  # tests/decoders/fuzz_media.py as a process, 2500 cases
def test_thousands_of_damaged_inputs_give_frames_or_media_error(tmp_path):
    progress = tmp_path / "progress"
    result = subprocess.run(
        [sys.executable, str(FUZZ), "--cases", str(CASES), "--seed", "1", "--progress", str(progress)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if result.returncode != 0:
        index = int(progress.read_text())
        name, data, request = case(index, 1, seeds())
        KEPT.mkdir(exist_ok=True)
        kept = KEPT / f"crash--seed1-case{index}-{name}"
        kept.write_bytes(data)
        pytest.fail(
            f"case {index} ({name}, {request}) broke the run; kept as {kept}:\n{result.stderr[-3000:]}"
        )
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert sum(summary["outcomes"].values()) == CASES
    assert summary["outcomes"]["ok"] > 100 and summary["outcomes"]["corrupt_media"] > 100  # it really mutates
    assert summary["slowest_s"] < 10  # the decode deadline holds
    assert summary["rss_end_mib"] - summary["rss_warm_mib"] < 64  # no leak across thousands of decodes


MEDIA_ERROR_CODES = {
    "corrupt_media",
    "no_video_stream",
    "unsupported_codec",
    "media_too_large",
    "decode_timeout",
}


@pytest.mark.parametrize("path", sorted(KEPT.glob("*--*")), ids=lambda p: p.name)
def test_kept_damaged_inputs_keep_their_outcome(path):
    expected, _, origin = path.name.partition("--")
    fixture = origin.split("-", 2)[-1]
    outcome = run_one(fixture, path.read_bytes(), {})
    if expected == "crash":  # once broke the run: any orderly outcome will do
        assert outcome in MEDIA_ERROR_CODES | {"ok"}
    else:
        assert outcome == expected


def test_the_kept_corpus_has_every_orderly_outcome():
    outcomes = {path.name.partition("--")[0] for path in KEPT.glob("*--*")}
    assert {"ok", "corrupt_media", "no_video_stream", "unsupported_codec", "media_too_large"} <= outcomes


def test_the_fixture_pool_is_what_the_fuzzer_mutates():
    names = {name for name, _ in seeds()}
    assert {"224p_6_vp9.webm", "bframes_h264.mp4", "av1.webm", "image.png", "image.jpeg"} <= names
    assert all((MEDIA / n).exists() for n in names if not n.startswith("image."))
