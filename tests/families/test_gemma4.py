"""Gemma 4 (families/mmprep/families/gemma4.py): its facts, its token counts at every budget as
transformers 5.24's Gemma4Processor gave them (held here, so a run without transformers
checks them), and, where torch and transformers are installed, the processor's tensors and
the rendered prompt against transformers itself, on the same pixels and decoded frames."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from mmprep import families
from mmprep.decoders import decode_video
from mmprep.families.gemma4 import SOFT_TOKEN_BUDGETS, frame_stamps, patches
from mmprep.interface.prepared import MediaItem
from mmprep.model import ModelFolder
from mmprep.processors import ProcessorInputError, load_processor
from mmprep.render import Renderer
from tests.support.families import video_chat
from tests.support.media import MEDIA
from tests.support.model_folder import as_transformers, make_model_folder, video_item

FAMILY = families.get("gemma4")
# (height, width) -> soft tokens at each budget (70, 140, 280, 560, 1120), from transformers
# 5.24's get_aspect_ratio_preserving_size: odd sizes, a phone photo, slivers both ways
IMAGES = {
    (90, 120): (63, 130, 266, 540, 1064),
    (300, 500): (60, 135, 252, 540, 1075),
    (1080, 1920): (66, 120, 264, 527, 1100),
    (37, 1000): (43, 122, 258, 492, 1038),
    (2000, 300): (63, 120, 258, 549, 1032),
    (500, 1400): (70, 133, 280, 546, 1120),
    (48, 48): (64, 121, 256, 529, 1089),
    (5, 2000): (70, 140, 280, 473, 669),
    (4000, 3000): (63, 130, 266, 540, 1064),
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_model_folder("gemma4", tmp_path_factory.mktemp("gemma4") / "gemma4")


def test_the_registry_knows_it_by_model_type_and_class_names():
    assert families.for_model_type("gemma4") is FAMILY
    assert families.for_processor_class("processor_class", "Gemma4Processor") is FAMILY
    assert families.for_processor_class("video_processor_type", "Gemma4VideoProcessor") is FAMILY
    assert families.for_image_processor_type("Gemma4ImageProcessor") is FAMILY
    # vllm 0.33's gemma4_mm.py: no device normalize, video metadata parsed with the frames
    assert not FAMILY.device_normalizes and FAMILY.video_metadata_in_hash
    assert (FAMILY.image.vllm_pixels_field, FAMILY.video.vllm_pixels_field) == ("batched", "flat")


def test_the_published_folder_loads_with_its_budgets(folder):
    processor = ModelFolder.load(folder).processor
    assert processor.family == "gemma4"
    assert processor.image_config.option("max_soft_tokens") == 280
    assert processor.video_config.option("max_soft_tokens") == 70
    assert not processor.image_config.do_normalize and processor.video_config.do_normalize
    assert ModelFolder.load(folder).vision_token_ids == {
        "image_token_id": 258880,
        "video_token_id": 258884,
        "boi_token_id": 255999,
        "eoi_token_id": 258882,
        "audio_token_id": 258881,
        "boa_token_id": 256000,
        "eoa_token_id": 258883,
    }


@pytest.mark.parametrize(("size", "expected"), IMAGES.items())
def test_image_tokens_at_every_budget(folder, size, expected):
    pixels = np.random.default_rng(sum(size)).integers(0, 256, (*size, 3), dtype=np.uint8)
    for budget, tokens in zip(SOFT_TOKEN_BUDGETS, expected, strict=True):
        processor = load_processor(folder, max_soft_tokens=budget)
        processed = processor.process_image(pixels)
        assert processed.num_tokens == processor.image_tokens(*size) == tokens
        assert processed.tensors["pixel_values"].shape == (1, budget * 9, 768)
        assert FAMILY.image.item_grid(processed.tensors) == [tokens * 9]


def test_a_budget_transformers_refuses_is_refused(folder):
    processor = load_processor(folder, max_soft_tokens=300)
    with pytest.raises(
        ProcessorInputError, match=r"max_soft_tokens must be one of \(70, 140, 280, 560, 1120\)"
    ):
        processor.process_image(np.zeros((64, 64, 3), np.uint8))


def test_patches_are_cut_row_by_row_and_padded():
    frames = np.arange(2 * 3 * 32 * 48, dtype=np.float32).reshape(2, 3, 32, 48)
    pixels, positions = patches(frames, 16, 9)
    assert pixels.shape == (2, 9, 768) and positions.shape == (2, 9, 2)
    # patch 1 is row 0, column 1: its first pixel is (0, 16), channels last
    assert pixels[0, 1, :3].tolist() == frames[0, :, 0, 16].tolist()
    assert positions[1].tolist() == [[0, 0], [1, 0], [2, 0], [0, 1], [1, 1], [2, 1]] + [[-1, -1]] * 3
    assert not pixels[:, 6:].any()


def test_frames_are_stamped_minutes_and_seconds():
    video = families.SampledVideo(indices=(0, 59, 3600, 3659), fps=60.0)
    assert frame_stamps(video) == ["00:00", "00:00", "01:00", "01:00"]
    assert frame_stamps(families.SampledVideo(indices=(24 * 61,))) == ["01:01"]  # 24 fps where unknown


def test_vllm_renders_frames_rescaled_as_images(folder):
    """gemma4_mm.py sends a video's frames through the image processor: x * (1/255), where
    transformers' video processor divides by 255 (its mean 0, std 1 folded in)."""
    processor = ModelFolder.load(folder).processor
    frames = np.random.default_rng(5).integers(0, 256, (2, 96, 96, 3), dtype=np.uint8)
    as_video = processor.process_video(frames).tensors["pixel_values_videos"]
    as_images = processor.as_vllm_renders().process_video(frames).tensors["pixel_values_videos"]
    # the first frame as an image at the video's budget: gemma4_mm.py's max_soft_tokens 70
    image = load_processor(folder, max_soft_tokens=70).process_image(frames[0]).tensors["pixel_values"]
    np.testing.assert_array_equal(as_images[:1], image)
    assert not np.array_equal(as_video, as_images)
    np.testing.assert_allclose(as_video, as_images, rtol=1e-6)


# -- against transformers, here and now -------------------------------------------------------

CONVERSATION = video_chat("video")


@pytest.mark.slow
@pytest.mark.parametrize("budget", SOFT_TOKEN_BUDGETS)
def test_image_tensors_equal_transformers_at_every_budget(model, folder, budget):
    _, processor = model
    ours = load_processor(folder, max_soft_tokens=budget)
    for size in IMAGES:
        pixels = np.random.default_rng(sum(size)).integers(0, 256, (*size, 3), dtype=np.uint8)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = processor.image_processor(images=[pixels], max_soft_tokens=budget, return_tensors="np")
        processed = ours.process_image(pixels)
        for key in ("pixel_values", "image_position_ids"):
            assert processed.tensors[key].dtype == theirs[key].dtype, key
            np.testing.assert_array_equal(processed.tensors[key], theirs[key])  # to the bit
        assert [processed.num_tokens] == list(theirs["num_soft_tokens_per_image"])


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(1, 48, 48), (3, 90, 120), (8, 240, 320), (2, 1080, 1920)])
def test_video_tensors_equal_transformers(model, shape):
    folder, processor = model
    frames = np.random.default_rng(sum(shape)).integers(0, 256, (*shape, 3), dtype=np.uint8)
    ours = folder.processor.process_video(frames)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = processor.video_processor(videos=[frames], do_sample_frames=False, return_tensors="np")
    for key in ("pixel_values_videos", "video_position_ids", "num_frames_per_video"):
        np.testing.assert_array_equal(ours.tensors[key], theirs[key])
    assert ours.num_tokens == shape[0] * theirs["num_soft_tokens_per_video"][0]


@pytest.mark.slow
def test_the_prompt_equals_transformers_on_decoded_frames(model):
    from transformers.video_utils import VideoMetadata

    folder, processor = model
    webm = decode_video((MEDIA / "224p_6_vp9.webm").read_bytes(), num_frames=5)
    mp4 = decode_video((MEDIA / "rotated_90_h264.mp4").read_bytes(), num_frames=6)
    pixels = np.random.default_rng(3).integers(0, 256, (90, 120, 3), dtype=np.uint8)
    image = MediaItem("image", pixels, {}, "image", processed=folder.processor.process_image(pixels))
    videos = [video_item(webm, folder.processor, "webm"), video_item(mp4, folder.processor, "mp4")]
    prompt = Renderer(folder).render(CONVERSATION, [videos[0], image, videos[1]])
    text = processor.apply_chat_template(as_transformers(CONVERSATION), add_generation_prompt=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = processor(
            text=text,
            images=[pixels],
            videos=[video.tensor for video in videos],
            video_metadata=[VideoMetadata(**video.hf_metadata) for video in videos],
            do_sample_frames=False,
            return_tensors="np",
        )
    assert prompt.text == text
    assert list(prompt.token_ids) == list(expected["input_ids"][0])
    np.testing.assert_array_equal(image.processed.tensors["pixel_values"], expected["pixel_values"])
    for key in ("pixel_values_videos", "video_position_ids"):
        ours = np.concatenate([video.processed.tensors[key] for video in videos])
        np.testing.assert_array_equal(ours, expected[key])
