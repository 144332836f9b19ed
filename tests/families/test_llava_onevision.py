"""LLaVA-OneVision (families/mmprep/families/llava_onevision.py): its facts, its token counts as transformers
5.24's LlavaOnevisionProcessor gave them (held here, so a run without transformers checks
them), and, where torch and transformers are installed, the processor's tensors and the
rendered prompt against transformers itself, on the same pixels and decoded frames."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from mmprep import families
from mmprep.decoders import decode_video
from mmprep.families.llava_onevision import best_resolution, patch_output_size, video_tokens
from mmprep.interface.prepared import MediaItem
from mmprep.processors import ProcessorConfigError, load_processor
from mmprep.render import Renderer
from tests.support.families import video_chat
from tests.support.media import MEDIA
from tests.support.model_folder import as_transformers, make_model_folder, video_item

FAMILY = families.get("llava_onevision")
# (height, width) -> (tiles with the base one, <image> tokens), from transformers 5.24's
# LlavaOnevisionProcessor over the presets (the published llava-hf configs)
IMAGES = {
    (90, 120): (2, 1317),
    (384, 384): (2, 1485),
    (1000, 11): (4, 891),
    (300, 1200): (5, 3672),
    (899, 1024): (10, 6551),  # the image transformers' conversion script checks (899 x 1024)
    (50, 60): (2, 1373),
}
VIDEOS = {1: 197, 3: 589, 5: 981}  # frames -> <video> tokens: 14 x 14 a frame, one newline


def test_the_registry_knows_it_by_model_type_and_class_names():
    assert families.for_model_type("llava_onevision") is FAMILY
    assert families.for_processor_class("processor_class", "LlavaOnevisionProcessor") is FAMILY
    assert families.for_processor_class("video_processor_type", "LlavaOnevisionVideoProcessor") is FAMILY
    assert families.for_image_processor_type("LlavaOnevisionImageProcessorFast") is FAMILY
    # vllm 0.33's llava_onevision.py: no supports_mm_device_do_normalize, no video metadata
    assert not FAMILY.device_normalizes and not FAMILY.video_metadata_in_hash
    assert FAMILY.image.vllm_pixels_field == FAMILY.video.vllm_pixels_field == "batched"
    assert FAMILY.layout == "tiles"


def test_the_presets_are_the_llava_hf_models():
    """The class defaults are OpenAI CLIP's mean and std; the published models say SigLIP's 0.5."""
    assert load_processor("llava_onevision").image_config.image_mean[0] == 0.48145466
    for model in ("llava-hf/llava-onevision-qwen2-0.5b-ov-hf", "llava-hf/llava-onevision-qwen2-72B-si-hf"):
        processor = load_processor(model)
        assert processor.family == "llava_onevision"
        assert processor.image_config.image_mean == processor.video_config.image_std == (0.5, 0.5, 0.5)
        assert processor.image_config.fixed_size == processor.video_config.fixed_size == (384, 384)


def test_the_grid_resolution_is_transformers_choice():
    pinpoints = load_processor("llava_onevision").image_config.grid_pinpoints
    assert len(pinpoints) == 36 and pinpoints[0] == (384, 384) and pinpoints[-1] == (2304, 2304)
    assert best_resolution(899, 1024, pinpoints) == (1152, 1152)
    assert best_resolution(1000, 11, pinpoints) == (1152, 384)  # the first of the equals wins
    assert patch_output_size(899, 1024, (1152, 1152)) == (1012, 1152)
    assert patch_output_size(1000, 11, (1152, 384)) == (1152, 13)


@pytest.mark.parametrize(("size", "expected"), IMAGES.items())
def test_image_tokens_and_tiles(size, expected):
    processor = load_processor("llava_onevision")
    pixels = np.random.default_rng(sum(size)).integers(0, 256, (*size, 3), dtype=np.uint8)
    processed = processor.process_image(pixels)
    tiles, tokens = expected
    assert processed.tensors["pixel_values"].shape == (1, tiles, 3, 384, 384)
    assert processed.tensors["image_sizes"].tolist() == [list(size)]
    assert processed.num_tokens == processor.image_tokens(*size) == tokens
    assert FAMILY.image.item_grid(processed.tensors) == list(size)


def test_video_tokens():
    processor = load_processor("llava_onevision")
    for frames, tokens in VIDEOS.items():
        assert video_tokens(frames) == processor.video_tokens(frames, 90, 120) == tokens
    processed = processor.process_video(np.zeros((3, 20, 30, 3), np.uint8))
    assert list(processed.tensors) == ["pixel_values_videos"]
    assert processed.tensors["pixel_values_videos"].shape == (1, 3, 3, 384, 384)
    assert processed.num_tokens == 589 and FAMILY.video.item_grid(processed.tensors) == [3]


def test_vllm_keeps_the_batch_padding_of_images():
    """The HF processor pads a prompt's images to one tile count (do_pad), and vLLM's
    batched field keeps each item's padded tiles."""
    one, three = np.ones((1, 2, 3, 4, 4), np.float32), np.ones((1, 3, 3, 4, 4), np.float32)
    padded = FAMILY.image.batch_pixels([one, three])
    assert [tiles.shape[1] for tiles in padded] == [3, 3] and not padded[0][0, 2].any()
    assert padded[0][0, :2].all() and padded[1] is three
    assert [frames.shape[1] for frames in FAMILY.video.batch_pixels([one, three])] == [2, 3]


def test_its_config_keys_are_read_and_others_refused():
    assert load_processor("llava_onevision", size={"height": 336, "width": 336}).image_config.fixed_size == (
        336,
        336,
    )
    with pytest.raises(ProcessorConfigError, match="image_grid_pinpoints must be a list"):
        load_processor("llava_onevision", image_grid_pinpoints=[384])
    with pytest.raises(ProcessorConfigError, match="unknown processor setting"):
        load_processor("qwen2_vl", image_grid_pinpoints=[[384, 384]])
    with pytest.raises(ProcessorConfigError, match="do_pad=true"):
        load_processor("qwen2_vl", do_pad=True)


# -- against transformers, here and now -------------------------------------------------------

CONVERSATION = video_chat("image")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_model_folder("llava_onevision", tmp_path_factory.mktemp("llava") / "llava_onevision")


@pytest.mark.slow
@pytest.mark.parametrize("size", list(IMAGES))
def test_image_tensors_and_tokens_equal_transformers(model, size):
    folder, processor = model
    pixels = np.random.default_rng(sum(size)).integers(0, 256, (*size, 3), dtype=np.uint8)
    ours = folder.processor.process_image(pixels)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = processor.image_processor(images=[pixels], return_tensors="np")
        ids = processor(text="<image>", images=[pixels])["input_ids"][0]
    for key in ("pixel_values", "image_sizes"):
        assert ours.tensors[key].dtype == theirs[key].dtype, key
        np.testing.assert_array_equal(ours.tensors[key], theirs[key])  # to the bit
    assert ours.num_tokens == len(ids) == IMAGES[size][1]


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(1, 384, 384), (3, 90, 120), (5, 224, 400)])
def test_video_tensors_and_tokens_equal_transformers(model, shape):
    folder, processor = model
    frames = np.random.default_rng(sum(shape)).integers(0, 256, (*shape, 3), dtype=np.uint8)
    ours = folder.processor.process_video(frames)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = processor.video_processor(videos=[frames], return_tensors="np")
        ids = processor(text="<video>", videos=[frames])["input_ids"][0]
    assert list(ours.tensors) == list(theirs)
    np.testing.assert_array_equal(ours.tensors["pixel_values_videos"], theirs["pixel_values_videos"])
    assert ours.num_tokens == len(ids) == VIDEOS[shape[0]]


@pytest.mark.slow
def test_the_prompt_equals_transformers_on_decoded_frames(model):
    folder, processor = model
    video = decode_video((MEDIA / "224p_6_vp9.webm").read_bytes(), num_frames=5)
    images = [
        np.random.default_rng(seed).integers(0, 256, (*size, 3), dtype=np.uint8)
        for seed, size in enumerate([(90, 120), (300, 1200)])
    ]
    items = [video_item(video, folder.processor, "video")] + [
        MediaItem("image", pixels, {}, f"image{n}", processed=folder.processor.process_image(pixels))
        for n, pixels in enumerate(images)
    ]
    prompt = Renderer(folder).render(CONVERSATION, items)
    text = processor.apply_chat_template(as_transformers(CONVERSATION), add_generation_prompt=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = processor(text=text, images=images, videos=[video.frames])
    assert prompt.text == text
    assert list(prompt.token_ids) == list(expected["input_ids"][0])
