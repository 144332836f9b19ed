"""The sampling contract, line by line, on the pure functions."""

import math
from fractions import Fraction

import numpy as np
import pytest

from mmprep.decoders import InvalidArgumentError, InvalidSamplingError, MediaError, VideoSampling
from mmprep.decoders.sampling import (
    check_limits,
    check_sampling,
    pick_frames,
    seconds_to_ticks,
    spread,
    target_ticks,
)

MS = Fraction(1, 1000)
EVERY_FRAME = np.arange(6) * 500  # a 6-frame, 2 fps, 3 s video, in milliseconds


def targets(**request):
    return target_ticks(EVERY_FRAME, MS, 3.0, **request).tolist()


def test_fps_takes_floor_of_duration_times_rate_targets_at_k_over_r():
    assert targets(fps=1.0) == [0, 1000, 2000]
    assert targets(fps=0.7) == [0, 1428]  # floor(2.1) = 2 targets; 1/0.7 s = 1428.57 ms


def test_fps_asks_for_at_least_one_frame():
    assert targets(fps=0.1) == [0]


def test_fps_over_max_frames_spreads_max_frames_over_the_whole_video():
    assert targets(fps=10.0, max_frames=4) == [0, 750, 1500, 2250]


def test_fps_is_not_fooled_by_float_rounding():
    # 0.3 s * 10 fps is 2.9999999999999996 in floats; the contract means 3 frames.
    assert len(target_ticks(np.arange(3) * 100, MS, 0.3, fps=10.0)) == 3


NTSC = Fraction(1, 30000)  # 30000/1001 fps in MP4: frame k at 1001 * k


def test_fps_takes_the_frame_on_screen_not_the_one_a_millisecond_later():
    ticks = np.arange(90) * 1001
    # At t = 1 s frame 29 (0.9676 s) is on screen; frame 30 starts at 1.001 s.
    assert pick_frames(ticks, target_ticks(ticks, NTSC, 3.003, fps=1.0)).tolist() == [0, 29, 59]


def test_fps_targets_allow_float_rounding_and_nothing_more():
    # 1/3 s is 29999.999999999996 ticks of 1/90000 s in floats: frame 10 starts exactly then.
    ticks = np.arange(30) * 3000
    assert pick_frames(ticks, target_ticks(ticks, Fraction(1, 90000), 1.0, fps=3.0)).tolist() == [0, 10, 20]
    # A frame starting 0.67 microseconds after t is not on screen at t.
    assert seconds_to_ticks([6.039366], Fraction(1, 10**8)).tolist() == [603936610]
    assert pick_frames(
        np.array([0, 603936667]), seconds_to_ticks([6.039366], Fraction(1, 10**8))
    ).tolist() == [0]


def test_num_frames_spans_first_frame_to_last_frame_pts():
    assert targets(num_frames=2) == [0, 2500]
    assert targets(num_frames=6) == [0, 500, 1000, 1500, 2000, 2500]
    assert targets(num_frames=4) == [0, 833, 1666, 2500]  # rounded down, in whole ticks


def test_one_frame_is_the_first_frame():
    assert targets(num_frames=1) == [0]


@pytest.mark.parametrize("total", [7, 24, 50, 60, 97, 120, 301])
def test_num_frames_on_constant_rate_video_names_linspaces_frames(total):
    ticks = np.arange(total) * 512  # 25 fps in MP4's 1/12800
    for n in range(1, 65):
        exact = [j * (total - 1) // (n - 1) for j in range(n)] if n > 1 else [0]
        assert pick_frames(
            ticks, target_ticks(ticks, Fraction(1, 12800), total / 25, num_frames=n)
        ).tolist() == sorted(set(exact))


def test_num_frames_is_exact_where_linspace_rounds_an_integer_down():
    # 31 frames, 23 of them: target 11 is 11 * 30 / 22 = 15 exactly; np.linspace computes
    # 14.999999999999998 and its dtype=int truncates that to 14. The integer rule says 15.
    ticks = np.arange(31) * 1001
    assert np.linspace(0, 30, 23, dtype=int)[11] == 14
    assert pick_frames(ticks, target_ticks(ticks, NTSC, 31 * 1001 / 30000, num_frames=23))[11] == 15


def test_num_frames_is_decided_on_the_ticks_the_container_rounded():
    # Matroska and WebM count whole milliseconds: 60 fps frame k starts at round(k * 16.67).
    # 75 frames, 3 of them: the middle target is 1233 // 2 = 616 ms, before frame 37 (617 ms),
    # so frame 36 is on screen; np.linspace, counting frames, names 37.
    ticks = np.rint(np.arange(75) * 1000 / 60).astype(np.int64)
    assert pick_frames(ticks, target_ticks(ticks, MS, 1.25, num_frames=3)).tolist() == [0, 36, 74]
    assert np.linspace(0, 74, 3, dtype=int).tolist() == [0, 37, 74]


def test_spread_does_not_overflow_on_long_spans():
    span = 2**62 + 12345
    assert spread(span, 7).tolist() == [j * span // 6 for j in range(7)]


def test_an_explicit_num_frames_over_max_frames_is_refused_naming_the_limit():
    with pytest.raises(InvalidSamplingError, match="num_frames=10 is more than the limit of max_frames=3"):
        check_sampling(num_frames=10, max_frames=3)


def test_num_frames_minus_one_is_every_frame_within_max_frames():
    assert targets(num_frames=-1) == targets() == [0, 500, 1000, 1500, 2000, 2500]
    with pytest.raises(
        InvalidSamplingError, match="every frame, 6 here, more than the limit of max_frames=4"
    ):
        targets(num_frames=-1, max_frames=4)


def test_sampling_is_a_frozen_value_checked_once():
    sampling = VideoSampling(num_frames=4, max_frames=8)
    assert sampling == VideoSampling(num_frames=4, max_frames=8) and hash(sampling) == hash(
        VideoSampling(num_frames=4, max_frames=8)
    )
    with pytest.raises(InvalidSamplingError, match="num_frames"):
        VideoSampling(num_frames=0)


def test_neither_means_every_frame():
    assert targets() == EVERY_FRAME.tolist()


def test_every_frame_over_max_frames_spreads_max_frames():
    assert targets(max_frames=3) == [0, 1000, 2000]


@pytest.mark.parametrize(
    "request_",
    [
        {"fps": 1.0, "num_frames": 4},
        {"fps": 0},
        {"fps": -1.0},
        {"fps": math.nan},
        {"fps": math.inf},
        {"fps": True},
        {"fps": "2"},
        {"num_frames": 0},
        {"num_frames": -2},
        {"num_frames": 2.5},
        {"num_frames": True},
        {"max_frames": 0},
        {"max_frames": -3},
        {"max_pixels": 0},
    ],
)
def test_nonsense_requests_are_refused_by_name(request_):
    with pytest.raises(InvalidSamplingError) as caught:
        check_sampling(**request_)
    assert caught.value.code == "invalid_sampling"
    assert any(name in str(caught.value) for name in request_)


def test_sensible_requests_pass():
    check_sampling(fps=2.0)
    check_sampling(num_frames=4, max_frames=8, max_pixels=448 * 448)
    check_sampling(num_frames=-1, max_frames=8)
    check_sampling(fps=1, max_frames=np.int64(4))


def test_a_bad_argument_is_a_value_error_as_the_peers_raise():
    with pytest.raises(ValueError, match="num_frames"):
        check_sampling(num_frames=0)
    assert issubclass(InvalidSamplingError, MediaError)


@pytest.mark.parametrize(
    "limits",
    [
        {"threads": -1},
        {"threads": 1.5},
        {"threads": "2"},
        {"timeout": -1.0},
        {"timeout": math.nan},
        {"timeout": "5"},
        {"max_bytes": 0},
        {"max_bytes": "1"},
        {"max_source_pixels": -5},
    ],
    ids=repr,
)
def test_nonsense_limits_are_refused_by_name_as_value_errors(limits):
    with pytest.raises(InvalidArgumentError, match=next(iter(limits))) as caught:
        check_limits(**limits)
    assert isinstance(caught.value, ValueError) and caught.value.code == "invalid_argument"


def test_sensible_limits_pass():
    check_limits(threads=0, timeout=0, max_bytes=1, max_source_pixels=np.int64(10))
    check_limits(threads=4, timeout=2.5)


FRAMES = np.array([0, 500, 1000, 1500])


def test_on_screen_frame_is_the_last_started_at_or_before_t():
    assert pick_frames(FRAMES, [200, 499, 500, 999, 1200]).tolist() == [0, 1, 2]


def test_a_target_before_the_first_frame_takes_the_first_frame():
    assert pick_frames(FRAMES + 1000, [0]).tolist() == [0]


def test_a_target_past_the_end_takes_the_last_frame():
    assert pick_frames(FRAMES, [99000]).tolist() == [3]


def test_a_frame_chosen_twice_is_returned_once_in_order():
    assert pick_frames(FRAMES, [0, 100, 200, 1600, 1700]).tolist() == [0, 3]
