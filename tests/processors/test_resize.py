"""resize.py's C kernel against a plain numpy reading of the same tables (torchvision
itself is the oracle in test_processors_live.py, where torch is installed), and its
refusal of tables that would read or write outside their buffers."""

from __future__ import annotations

import numpy as np
import pytest

from mmprep.processors import resize as resize_module
from mmprep.processors.resize import BICUBIC, BILINEAR, Scatter, resize, resize_into
from tests.support.resize_reference import reference_resize

SIZES = [
    ((720, 1280), (728, 1288)),  # Qwen's grid for 720p: both sides up a little (slices)
    ((1080, 1920), (252, 448)),  # a large factor down (every pixel gathered)
    ((97, 131), (112, 140)),
    ((131, 97), (56, 196)),  # one side down, the other up
    ((333, 250), (333, 252)),  # only the width changes
    ((250, 333), (56, 333)),  # only the height changes
    ((5, 3000), (5, 2)),
    ((1, 1), (3, 5)),
]


@pytest.mark.parametrize("resample", [BICUBIC, BILINEAR])
@pytest.mark.parametrize(("size", "resized"), SIZES)
def test_the_kernel_is_the_tables_arithmetic(size, resized, resample):
    frame = np.random.default_rng(sum(size + resized)).integers(0, 256, (*size, 3), dtype=np.uint8)
    np.testing.assert_array_equal(
        resize(frame, *resized, resample), reference_resize(frame, *resized, resample)
    )


def test_the_kernel_on_random_sizes_and_channel_counts():
    rng = np.random.default_rng(7)
    for _ in range(80):
        height, width, out_height, out_width = (int(side) for side in rng.integers(1, 160, 4))
        channels = int(rng.integers(1, 5))
        frame = rng.integers(0, 256, (height, width, channels), dtype=np.uint8)
        for resample in (BICUBIC, BILINEAR):
            where = f"{(height, width, channels)} -> {(out_height, out_width)}, resample {resample}"
            np.testing.assert_array_equal(
                resize(frame, out_height, out_width, resample),
                reference_resize(frame, out_height, out_width, resample),
                err_msg=where,
            )


def test_a_frame_that_is_a_view_is_read_as_its_pixels():
    frame = np.random.default_rng(3).integers(0, 256, (60, 90, 3), dtype=np.uint8)
    crop = frame[5:45, 10:70]  # not C-contiguous
    np.testing.assert_array_equal(resize(crop, 33, 41), reference_resize(np.ascontiguousarray(crop), 33, 41))


def test_a_table_turns_levels_into_the_outputs_values():
    frame = np.random.default_rng(4).integers(0, 256, (20, 30, 3), dtype=np.uint8)
    table = (np.arange(3)[:, None] * 1000 + np.arange(256)[None, :]).astype(np.float32)
    out = np.empty((16, 24, 3), np.float32)
    plain = Scatter.plain(out)
    resize_into(frame, Scatter(out, plain.rows, plain.columns, plain.places, plain.channel_of, table), 16, 24)
    expected = reference_resize(frame, 16, 24).astype(np.float32) + np.arange(3, dtype=np.float32) * 1000
    np.testing.assert_array_equal(out, expected)


def test_tables_that_reach_outside_their_buffers_are_refused():
    frame = np.zeros((10, 10, 3), np.uint8)
    out = np.empty((10, 10, 3), np.uint8)
    plain = Scatter.plain(out)
    too_far = Scatter(out, plain.rows + 1, plain.columns, plain.places, plain.channel_of)
    with pytest.raises(ValueError, match="scatter"):
        resize_into(frame, too_far, 10, 10)
    negative = Scatter(out, plain.rows, plain.columns - 3, plain.places, plain.channel_of)
    with pytest.raises(ValueError, match="scatter"):
        resize_into(frame, negative, 10, 10)
    wrong_channel = Scatter(out, plain.rows, plain.columns, plain.places, plain.channel_of + 1)
    with pytest.raises(ValueError, match="channel_of"):
        resize_into(frame, wrong_channel, 10, 10)
    wide = Scatter.plain(np.empty((10, 12, 3), np.uint8))
    layout = (wide.out.reshape(-1), 1, wide.rows, wide.columns, wide.places, wide.channel_of, None)
    width, taps8, precision, starts, weights, pairs, runs = resize_module.horizontal_pass(10, 12)
    for name, bad_starts, bad_runs in [
        ("window starts", np.full_like(starts, 10), runs),  # a window past the row
        ("runs", starts, np.array([[0, 13]], np.int32)),  # a run past the outputs
        ("runs", starts[::-1].copy(), np.array([[0, 12]], np.int32)),  # windows that do not slide by one
    ]:
        horizontal = (width, taps8, precision, bad_starts, weights, pairs, bad_runs)
        with pytest.raises(ValueError, match=name):
            resize_module._resample.resample(frame, 10, 10, 3, horizontal, None, layout)


def test_the_vector_sums_are_the_plain_sums():
    """AVX2's two-taps-a-multiply passes (where the CPU has them) against the plain C loops,
    on sizes that take each path: runs of sliding windows, windows on their own, both."""
    rng = np.random.default_rng(11)
    sizes = [((720, 1280), (728, 1288)), ((1080, 1920), (252, 448)), ((300, 170), (308, 84))]
    sizes += [((int(a), int(b)), (int(c), int(d))) for a, b, c, d in rng.integers(1, 300, (30, 4))]
    for (height, width), resized in sizes:
        frame = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
        for resample in (BICUBIC, BILINEAR):
            vector = resize(frame, *resized, resample)
            before = resize_module._resample.use_simd(False)
            try:
                plain = resize(frame, *resized, resample)
            finally:
                resize_module._resample.use_simd(before)
            np.testing.assert_array_equal(vector, plain, err_msg=f"{(height, width)} -> {resized}")


def test_a_float_output_without_a_table_is_refused():
    with pytest.raises(ValueError, match="table"):
        resize_into(np.zeros((4, 4, 3), np.uint8), Scatter.plain(np.empty((4, 4, 3), np.float32)), 4, 4)
