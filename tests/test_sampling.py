"""The sampling contract, line by line, on the pure functions."""

import math

import numpy as np
import pytest

from decoders import InvalidSamplingError
from decoders.sampling import check_sampling, pick_frames, target_times

EVERY_FRAME = np.arange(6) * 0.5  # a 6-frame, 2 fps, 3 s video


def targets(**request):
    return target_times(3.0, 2.0, EVERY_FRAME, **request).tolist()


def test_fps_takes_floor_of_duration_times_rate_targets_at_k_over_r():
    assert targets(fps=1.0) == [0.0, 1.0, 2.0]
    assert targets(fps=0.7) == pytest.approx([0.0, 1 / 0.7])  # floor(2.1) = 2


def test_fps_asks_for_at_least_one_frame():
    assert targets(fps=0.1) == [0.0]


def test_fps_over_max_frames_spreads_max_frames_over_the_whole_video():
    assert targets(fps=10.0, max_frames=4) == [0.0, 0.75, 1.5, 2.25]


def test_fps_is_not_fooled_by_float_rounding():
    # 0.3 s * 10 fps is 2.9999999999999996 in floats; the contract means 3 frames.
    assert len(target_times(0.3, 10.0, np.arange(3) / 10, fps=10.0)) == 3


def test_num_frames_spans_first_frame_to_last_frame_start():
    assert targets(num_frames=2) == [0.0, 2.5]  # D - 1/f = 3.0 - 0.5
    assert targets(num_frames=6) == pytest.approx([0.0, 0.5, 1.0, 1.5, 2.0, 2.5])


def test_one_frame_is_the_middle_of_the_video():
    assert targets(num_frames=1) == [1.5]


def test_num_frames_is_capped_by_max_frames():
    assert targets(num_frames=10, max_frames=3) == [0.0, 1.25, 2.5]


def test_neither_means_every_frame():
    assert targets() == EVERY_FRAME.tolist()


def test_every_frame_over_max_frames_spreads_max_frames():
    assert targets(max_frames=3) == [0.0, 1.0, 2.0]


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
    check_sampling(num_frames=8, max_frames=4, max_pixels=448 * 448)
    check_sampling(fps=1, max_frames=np.int64(4))


FRAMES = np.array([0.0, 0.5, 1.0, 1.5])


def test_on_screen_frame_is_the_last_started_within_a_millisecond():
    assert pick_frames(FRAMES, [0.2, 0.4999, 0.9995, 1.2]).tolist() == [0, 1, 2]


def test_a_target_before_the_first_frame_takes_the_first_frame():
    assert pick_frames(FRAMES + 1.0, [0.0]).tolist() == [0]


def test_a_target_past_the_end_takes_the_last_frame():
    assert pick_frames(FRAMES, [99.0]).tolist() == [3]


def test_a_frame_chosen_twice_is_returned_once_in_order():
    assert pick_frames(FRAMES, [0.0, 0.1, 0.2, 1.6, 1.7]).tolist() == [0, 3]
