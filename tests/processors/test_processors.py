"""The processors' contract apart from transformers' numbers (those are in
test_processors_golden.py and test_processors_live.py): loading, sizes and token counts
that agree with the tensors, padding, threads, and clear errors for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mmprep.processors import (
    FAMILIES,
    ProcessorConfigError,
    ProcessorError,
    ProcessorInputError,
    cast,
    load_processor,
    preset_models,
    torch_name,
)


def frames(count: int, height: int, width: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (count, height, width, 3), dtype=np.uint8)


# -- loading --


def test_family_names_build_transformers_class_defaults():
    qwen2 = load_processor("qwen2_vl")
    assert (qwen2.video_config.min_pixels, qwen2.video_config.max_pixels) == (128 * 28 * 28, 28 * 28 * 768)
    assert (qwen2.image_config.min_pixels, qwen2.image_config.max_pixels) == (56 * 56, 28 * 28 * 1280)
    assert qwen2.video_config.patch_size == 14 and qwen2.video_config.image_mean[0] == pytest.approx(
        0.48145466
    )
    qwen3 = load_processor("qwen3_vl")
    assert (qwen3.video_config.min_pixels, qwen3.video_config.max_pixels) == (128 * 32 * 32, 32 * 32 * 768)
    assert qwen3.video_config.patch_size == qwen3.image_config.patch_size == 16
    assert qwen3.image_config.image_std == (0.5, 0.5, 0.5)


def test_presets_are_the_published_configs_and_ignore_case():
    models = preset_models()
    assert {"qwen/qwen2-vl-7b-instruct", "qwen/qwen2.5-vl-7b-instruct", "qwen/qwen3-vl-8b-instruct"} <= set(
        models
    )
    qwen25 = load_processor("Qwen/Qwen2.5-VL-7B-Instruct")
    assert qwen25.family == "qwen2_5_vl"
    # no video_preprocessor_config.json was published: video reads preprocessor_config.json
    assert (qwen25.video_config.min_pixels, qwen25.video_config.max_pixels) == (3136, 12845056)
    qwen3 = load_processor("qwen/QWEN3-VL-30B-A3B-Instruct")
    assert qwen3.family == "qwen3_vl"
    assert (qwen3.video_config.min_pixels, qwen3.video_config.max_pixels) == (4096, 25165824)
    assert (qwen3.image_config.min_pixels, qwen3.image_config.max_pixels) == (65536, 16777216)


def test_overrides_use_transformers_keys_and_beat_the_file():
    proc = load_processor("Qwen/Qwen2.5-VL-7B-Instruct", size={"shortest_edge": 4096, "longest_edge": 65536})
    assert (proc.video_config.min_pixels, proc.video_config.max_pixels) == (4096, 65536)
    proc = load_processor("qwen2_vl", max_pixels=50000, image_mean=0.5)
    assert proc.image_config.max_pixels == proc.video_config.max_pixels == 50000
    assert proc.video_config.image_mean == (0.5, 0.5, 0.5)
    # Qwen3VLVideoProcessor has no min/max_pixels in transformers: only the image side takes them
    proc = load_processor("qwen3_vl", max_pixels=50000)
    assert proc.image_config.max_pixels == 50000 and proc.video_config.max_pixels == 32 * 32 * 768


def test_folder_with_nested_processor_config(tmp_path):
    video = {
        "size": {"shortest_edge": 1000, "longest_edge": 90000},
        "patch_size": 16,
        "image_mean": 0.5,
        "image_std": 0.5,
        "video_processor_type": "Qwen3VLVideoProcessor",
        "fps": 2,
    }
    (tmp_path / "processor_config.json").write_text(json.dumps({"video_processor": video}))
    proc = load_processor(tmp_path)
    assert proc.family == "qwen3_vl"
    assert proc.video_config.max_pixels == 90000
    assert proc.image_config is None
    with pytest.raises(ProcessorConfigError, match="without an image processor config"):
        proc.process_image(frames(1, 32, 32)[0])


def test_folder_family_from_config_json(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen2_5_vl"}))
    (tmp_path / "preprocessor_config.json").write_text(json.dumps({"min_pixels": 3136, "max_pixels": 200704}))
    proc = load_processor(str(tmp_path))
    assert (
        proc.family == "qwen2_5_vl" and proc.image_config.max_pixels == proc.video_config.max_pixels == 200704
    )


@pytest.mark.parametrize(
    ("name", "overrides", "message"),
    [
        ("llava", {}, "neither a processor family"),
        ("Qwen/Qwen9-VL", {}, "neither a processor family"),
        ("qwen2_vl", {"do_center_crop": True}, "do_center_crop=true: the Qwen-VL processors never take"),
        ("qwen2_vl", {"do_pad": True, "pad_size": {"height": 8}}, "do_pad=true"),
        ("qwen2_vl", {"tile_size": 448}, "unknown processor setting.*tile_size"),
        ("qwen2_vl", {"resample": 1}, r"only bilinear \(2\) and bicubic \(3\)"),
        ("qwen2_vl", {"patch_size": 0}, "patch_size must be a positive integer"),
        ("qwen2_vl", {"image_std": [0.5, 0]}, "image_std must be a number or a list of 3"),
        ("qwen2_vl", {"image_std": 0}, "image_std must be a non-zero number"),
        ("qwen2_vl", {"size": {"height": 224, "width": 224}}, "size.shortest_edge"),
        ("qwen2_vl", {"do_rescale": "yes"}, "do_rescale must be true or false"),
    ],
)
def test_bad_names_and_settings_say_what_is_wrong(name, overrides, message):
    with pytest.raises(ProcessorConfigError, match=message):
        load_processor(name, **overrides)


HUB_QWEN3_VL = Path(__file__).parents[1] / "data" / "processors" / "Qwen3-VL-8B-Instruct"


def test_a_fast_processor_dump_loads_as_the_published_config():
    # Qwen3-VL's configs as a fast processor saves them: every attribute, unset ones as null,
    # steps the Qwen-VL classes never take (center crop, pad) among them, off
    dumped = json.loads((HUB_QWEN3_VL / "preprocessor_config.json").read_text())
    assert dumped["do_center_crop"] is None and dumped["crop_size"] is None and dumped["do_pad"] is None
    proc, published = load_processor(HUB_QWEN3_VL), load_processor("Qwen/Qwen3-VL-8B-Instruct")
    assert proc.family == "qwen3_vl"
    assert (proc.image_config, proc.video_config) == (published.image_config, published.video_config)


@pytest.mark.parametrize(
    "knobs",
    [
        {"do_center_crop": False, "crop_size": {"height": 224, "width": 224}},  # off: the size is unused
        {"do_pad": False, "pad_size": {"height": 32, "width": 32}, "size_divisor": None},
        {
            "tile_size": None,
            "do_resize": None,
            "size": None,
        },  # null: the class default, as transformers reads it
    ],
)
def test_a_knob_that_changes_nothing_is_accepted(knobs):
    assert load_processor("qwen2_vl", **knobs).video_config == load_processor("qwen2_vl").video_config


def test_a_step_that_would_change_the_output_is_refused_naming_it_and_the_file(tmp_path):
    for name in ("preprocessor_config.json", "video_preprocessor_config.json"):
        dumped = json.loads((HUB_QWEN3_VL / name).read_text())
        (tmp_path / name).write_text(json.dumps(dumped | {"do_center_crop": name.startswith("video")}))
    with pytest.raises(ProcessorConfigError, match=r"video_preprocessor_config.json: do_center_crop=true"):
        load_processor(tmp_path)


def test_unreadable_folders_say_which_file(tmp_path):
    with pytest.raises(ProcessorConfigError, match="has no processor config"):
        load_processor(tmp_path)
    (tmp_path / "preprocessor_config.json").write_text("{not json")
    with pytest.raises(ProcessorConfigError, match="cannot read .*preprocessor_config.json"):
        load_processor(tmp_path)
    (tmp_path / "preprocessor_config.json").write_text(json.dumps({"min_pixels": 3136}))
    with pytest.raises(ProcessorConfigError, match="cannot tell the model family"):
        load_processor(tmp_path)


# -- sizes, tokens, tensors --


@pytest.mark.parametrize("name", ["qwen2_vl", "Qwen/Qwen2.5-VL-7B-Instruct", "qwen3_vl"])
@pytest.mark.parametrize("shape", [(1, 33, 47), (4, 120, 90), (7, 64, 480)])
def test_sizes_and_tokens_agree_with_the_tensors(name, shape):
    proc = load_processor(name, size={"shortest_edge": 3136, "longest_edge": 28 * 28 * 40})
    count, height, width = shape
    out = proc.process_video(frames(*shape))
    config = proc.video_config
    resized_height, resized_width = proc.video_size(count, height, width)
    grid = [
        -(-count // config.temporal_patch_size),
        resized_height // config.patch_size,
        resized_width // config.patch_size,
    ]
    assert resized_height % config.factor == 0 and resized_width % config.factor == 0
    assert out.tensors["video_grid_thw"].tolist() == [grid]
    assert out.tensors["video_grid_thw"].dtype == np.int64
    assert out.tensors["pixel_values_videos"].shape == (
        np.prod(grid),
        3 * config.temporal_patch_size * config.patch_size**2,
    )
    assert out.tensors["pixel_values_videos"].dtype == np.float32
    assert out.num_tokens == proc.video_tokens(count, height, width) == np.prod(grid) // config.merge_size**2

    image = proc.process_image(frames(1, height, width)[0])
    assert list(image.tensors) == ["pixel_values", "image_grid_thw"]
    assert image.num_tokens == proc.image_tokens(height, width)


def test_frames_already_at_the_grid_size_are_only_normalized():
    proc = load_processor("qwen3_vl", size={"shortest_edge": 64 * 64, "longest_edge": 32 * 32 * 60})
    clip = frames(2, 64, 96)
    assert proc.video_size(2, 64, 96) == (64, 96)
    values = proc.process_video(clip).tensors["pixel_values_videos"]
    # the first patch: channel 0, frame 0, its 16x16 pixels, as (x / 255 - 0.5) / 0.5
    expected = (clip[0, :16, :16, 0] / 255 - 0.5) / 0.5
    np.testing.assert_allclose(values[0, :256].reshape(16, 16), expected, atol=1e-6)
    # the same patch of frame 1 follows channel 0 of frame 0
    np.testing.assert_allclose(
        values[0, 256:512].reshape(16, 16), (clip[1, :16, :16, 0] / 255 - 0.5) / 0.5, atol=1e-6
    )


def test_odd_frame_counts_repeat_the_last_frame():
    proc = load_processor("qwen2_vl", size={"shortest_edge": 3136, "longest_edge": 50000})
    clip = frames(3, 70, 90)
    padded = np.concatenate([clip, clip[-1:]])
    np.testing.assert_array_equal(
        proc.process_video(clip).tensors["pixel_values_videos"],
        proc.process_video(padded).tensors["pixel_values_videos"],
    )


def test_qwen3_clip_shorter_than_a_temporal_patch_is_padded_not_refused():
    proc = load_processor("Qwen/Qwen3-VL-8B-Instruct")
    clip = frames(1, 100, 150)
    out = proc.process_video(clip)
    assert out.tensors["video_grid_thw"][0, 0] == 1
    np.testing.assert_array_equal(
        out.tensors["pixel_values_videos"],
        proc.process_video(np.concatenate([clip, clip])).tensors["pixel_values_videos"],
    )


def test_an_image_is_one_temporal_block_of_copies():
    proc = load_processor("qwen2_vl")
    image = frames(1, 100, 130)[0]
    out = proc.process_image(image)
    values = out.tensors["pixel_values"].reshape(-1, 3, 2, 14 * 14)
    np.testing.assert_array_equal(values[:, :, 0], values[:, :, 1])
    assert out.tensors["image_grid_thw"].tolist()[0][0] == 1


def test_threads_do_not_change_the_result():
    proc = load_processor("qwen3_vl", size={"shortest_edge": 4096, "longest_edge": 32 * 32 * 400})
    clip = frames(9, 120, 200)
    one = proc.process_video(clip, threads=1).tensors["pixel_values_videos"]
    np.testing.assert_array_equal(one, proc.process_video(clip, threads=3).tensors["pixel_values_videos"])


# -- streaming: frames processed as they are decoded --


def streamed(proc, clip: np.ndarray, announce, threads: int = 3):
    """The stream's result for `clip`, after `announce(stream.add)` announced what it chose."""
    with proc.stream_video(threads) as stream:
        announce(stream.add)
        return stream.result(clip).tensors["pixel_values_videos"]


@pytest.mark.parametrize("threads", [1, 3])
def test_frames_processed_as_they_are_decoded_equal_process_video(threads):
    from mmprep.decoders import decode_video
    from tests.support.media import MEDIA

    proc = load_processor("qwen2_vl", size={"shortest_edge": 3136, "longest_edge": 40000})
    with proc.stream_video(threads) as stream:
        video = decode_video(MEDIA / "cfr_25fps_h264.mp4", num_frames=7, on_frame=stream.add)
        out = stream.result(video.frames)
    expected = proc.process_video(video.frames)
    assert out.tensors["video_grid_thw"].tolist() == expected.tensors["video_grid_thw"].tolist()
    assert out.num_tokens == expected.num_tokens
    np.testing.assert_array_equal(out.tensors["pixel_values_videos"], expected.tensors["pixel_values_videos"])


def test_frames_announced_out_of_order_again_or_not_at_all_give_the_same_result():
    proc = load_processor("qwen3_vl", size={"shortest_edge": 4096, "longest_edge": 32 * 32 * 300})
    clip, other = frames(5, 90, 150), frames(5, 90, 150, seed=1)
    expected = proc.process_video(clip).tensors["pixel_values_videos"]

    def backwards_and_twice(add):
        for position in (4, 2, 0, 3, 1):
            add(position, 5, other[position])  # a first pass's frames, replaced below
        for position in reversed(range(5)):
            add(position, 5, clip[position])

    np.testing.assert_array_equal(streamed(proc, clip, backwards_and_twice), expected)
    # a decode that returned fewer frames than it planned (and announced): done from the frames
    fewer = frames(3, 90, 150)
    partial = streamed(proc, fewer, lambda add: [add(i, 5, clip[i]) for i in range(3)])
    np.testing.assert_array_equal(partial, proc.process_video(fewer).tensors["pixel_values_videos"])
    np.testing.assert_array_equal(streamed(proc, clip, lambda add: None), expected)


def test_a_clip_the_processor_refuses_is_refused_by_result_not_by_the_decoder():
    proc = load_processor("qwen2_vl", do_resize=False)
    clip = frames(2, 50, 84)
    with proc.stream_video(2) as stream:
        for position, frame in enumerate(clip):
            stream.add(position, 2, frame)  # the decoder would go on undisturbed
        with pytest.raises(ProcessorInputError, match="multiples of 28"):
            stream.result(clip)


def test_views_of_frames_are_accepted():
    proc = load_processor("qwen2_vl", size={"shortest_edge": 3136, "longest_edge": 50000})
    clip = frames(4, 80, 120)
    view = clip[::2, :, ::-1]
    np.testing.assert_array_equal(
        proc.process_video(view).tensors["pixel_values_videos"],
        proc.process_video(np.ascontiguousarray(view)).tensors["pixel_values_videos"],
    )


def test_rescale_only_and_no_normalization():
    rescaled = load_processor(
        "qwen2_vl", do_normalize=False, size={"shortest_edge": 3136, "longest_edge": 3136}
    )
    clip = frames(2, 56, 56)
    values = rescaled.process_video(clip).tensors["pixel_values_videos"]
    assert values.min() >= 0 and values.max() <= 1
    raw = load_processor(
        "qwen2_vl", do_normalize=False, do_rescale=False, size={"shortest_edge": 3136, "longest_edge": 3136}
    )
    assert raw.process_video(clip).tensors["pixel_values_videos"].dtype == np.uint8


# -- the model's dtype (Processor.in_dtype) --


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("family", FAMILIES)
def test_a_processor_in_a_dtype_gives_the_float32_tensors_cast_as_torch_casts(family, dtype):
    """vLLM's processor casts transformers' floating outputs to the model's dtype: a processor
    made in that dtype writes every such tensor (each layout's pixels, Gemma 4's audio
    features) as the float32 processor's cast by `tensor.to(dtype)`, bit for bit, and leaves
    the rest (grids, counts, positions, masks) as they are."""
    float32, other = load_processor(family), load_processor(family).in_dtype(dtype)
    outputs = [(float32.process_image(frames(1, 97, 131)[0]), other.process_image(frames(1, 97, 131)[0]))]
    if float32.video_config.side().taken:
        clip = frames(4, 64, 96, seed=1)
        outputs.append((float32.process_video(clip), other.process_video(clip)))
    if float32.audio_config is not None:
        wave = np.random.default_rng(2).standard_normal(8000).astype(np.float32) * 0.1
        outputs.append((float32.process_audio(wave), other.process_audio(wave)))
    for ours, theirs in outputs:
        assert ours.tensors.keys() == theirs.tensors.keys() and ours.num_tokens == theirs.num_tokens
        for key, tensor in ours.tensors.items():
            if tensor.dtype == np.float32:
                assert torch_name(theirs.tensors[key]) == dtype, key
                np.testing.assert_array_equal(theirs.tensors[key], cast(tensor, dtype))
            else:
                np.testing.assert_array_equal(theirs.tensors[key], tensor)


def test_raw_pixels_stay_uint8_in_any_dtype():
    processor = load_processor("qwen2_vl").with_raw_pixels().in_dtype("bfloat16")
    assert processor.process_image(frames(1, 56, 56)[0]).tensors["pixel_values"].dtype == np.uint8
    with pytest.raises(ProcessorConfigError, match="float32, float16, bfloat16"):
        load_processor("qwen2_vl").in_dtype("int8")


# -- bad input --


@pytest.mark.parametrize(
    ("pixels", "message"),
    [
        ([[[[0, 0, 0]]]], "must be a numpy array"),
        (np.zeros((2, 32, 32, 3), np.float32), "must be uint8"),
        (np.zeros((32, 32, 3), np.uint8), r"shaped \(T, H, W, 3\)"),
        (np.zeros((2, 32, 32, 4), np.uint8), r"shaped \(T, H, W, 3\)"),
        (np.zeros((0, 32, 32, 3), np.uint8), r"shaped \(T, H, W, 3\)"),
        (np.zeros((2, 2, 500, 3), np.uint8), "aspect ratio must be at most 200"),
    ],
)
def test_bad_frames_are_refused_clearly(pixels, message):
    with pytest.raises(ProcessorInputError, match=message) as caught:
        load_processor("qwen2_vl").process_video(pixels)
    assert (
        isinstance(caught.value, (ProcessorError, ValueError))
        and caught.value.code == "invalid_processor_input"
    )


def test_bad_image_is_refused_clearly():
    with pytest.raises(ProcessorInputError, match=r"shaped \(H, W, 3\)"):
        load_processor("qwen3_vl").process_image(np.zeros((2, 32, 32, 3), np.uint8))


def test_without_resize_frames_must_fit_the_grid():
    proc = load_processor("qwen2_vl", do_resize=False)
    assert proc.process_video(frames(2, 56, 84)).tensors["video_grid_thw"].tolist() == [[1, 4, 6]]
    with pytest.raises(ProcessorInputError, match="multiples of 28"):
        proc.process_video(frames(2, 50, 84))
