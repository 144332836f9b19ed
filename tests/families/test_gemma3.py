"""Gemma 3 (families/mmprep/families/gemma3.py): its facts, its pan-and-scan crops as
transformers 5.24's Gemma3ImageProcessor cut them (held here, so a run without transformers
checks them), the service's refusals, and, where torch and transformers are installed, the
processor's tensors and the rendered prompt against transformers itself, on the same
pixels, with pan and scan off and on."""

from __future__ import annotations

import json
import warnings

import httpx
import numpy as np
import pytest

from mmprep import families
from mmprep.families.gemma3 import image_text, pan_and_scan
from mmprep.model import ModelFolder
from mmprep.processors import ProcessorConfigError, ProcessorInputError, load_processor
from mmprep.render import Renderer
from tests.support.chat import image, png_data_url
from tests.support.families import (
    REASON,
    account,
    check_a_video_is_refused,
    check_the_engine_answers_as_transformers,
    four_images_chat,
    image_items,
    noise,
    render_as_transformers,
)
from tests.support.model_folder import make_model_folder

FAMILY = families.get("gemma3")
MODEL = "gemma-3-4b-it"
PAN_AND_SCAN = {"do_pan_and_scan": True}
# (height, width) -> pan-and-scan crops at Gemma3Processor's defaults (min crop 256, at most
# 4, from a ratio of 1.2), as transformers 5.24's Gemma3ImageProcessor cut them
CROPS = {
    (300, 1000): 3,  # wide: 3.3 rounds to 3
    (1000, 300): 3,  # tall
    (896, 896): 0,
    (500, 599): 0,  # a ratio under 1.2
    (500, 600): 2,  # 1.2 exactly: at least 2
    (100, 2000): 0,  # 500 x 100 crops: under the 256 minimum
    (3000, 800): 4,  # 3.75 rounds to 4
    (1080, 1920): 2,
    (4000, 3000): 2,
    (97, 131): 0,
    (257, 2600): 4,  # at most 4
    (700, 3000): 4,
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_model_folder("gemma3", tmp_path_factory.mktemp("gemma3") / MODEL)


def test_the_registry_knows_it_by_model_type_and_class_names():
    assert families.for_model_type("gemma3") is FAMILY
    assert families.for_processor_class("processor_class", "Gemma3Processor") is FAMILY
    assert families.for_image_processor_type("Gemma3ImageProcessor") is FAMILY
    assert families.for_image_processor_type("Gemma3ImageProcessorPil") is FAMILY
    # images only; vllm 0.33's gemma3_mm.py: flat pixels sized by num_patches, no device normalize
    assert FAMILY.takes("image") and not FAMILY.takes("video")
    assert not FAMILY.device_normalizes and FAMILY.image.vllm_pixels_field == "flat"
    assert FAMILY.image.vllm_names == {"num_crops": "num_patches"}
    grid = FAMILY.image.vllm_grid(np.array(2, np.int64))
    assert isinstance(grid, np.ndarray) and grid.dtype == np.int64 and grid.tolist() == 3


def test_the_published_folder_loads(folder):
    loaded = ModelFolder.load(folder)
    config = loaded.processor.image_config
    assert loaded.family == "gemma3" and config.fixed_size == (896, 896) and config.resample == 2
    assert (config.image_mean, config.image_std) == ((0.5,) * 3, (0.5,) * 3)
    assert config.option("image_seq_length") == 256 and config.option("do_pan_and_scan") is False
    assert loaded.vision_token_ids == {
        "image_token_id": 262144,
        "boi_token_id": 255999,
        "eoi_token_id": 256000,
    }
    assert loaded.pad_token_id("image") == 255999  # the template's <start_of_image>
    assert loaded.eos_token_ids == (1, 106)
    assert loaded.special_token_ids >= {0, 1, 2, 105, 106, 255999, 256000, 262144}
    # the published runs of line breaks: one token each, not special
    assert [loaded.encode("\n" * count) for count in (1, 2, 3, 4, 31)] == [[107], [108], [109], [110], [137]]
    assert 107 not in loaded.special_token_ids


def test_a_config_files_pan_and_scan_changes_nothing(folder, tmp_path):
    """Gemma3Processor passes its own pan-and-scan defaults over the image processor's
    config, so a file that turns it on changes nothing (transformers 5.24, tried)."""

    changed = make_model_folder("gemma3", tmp_path / "pas")
    config = json.loads((changed / "preprocessor_config.json").read_text())
    config |= {"do_pan_and_scan": True, "pan_and_scan_min_crop_size": 100}
    (changed / "preprocessor_config.json").write_text(json.dumps(config))
    assert load_processor(changed).image_config == load_processor(folder).image_config
    assert load_processor(changed).image_tokens(300, 1000) == 256


@pytest.mark.parametrize(("size", "crops"), CROPS.items())
def test_pan_and_scan_crops(folder, size, crops):
    cut = pan_and_scan(*size, 256, 4, 1.2)
    assert len(cut) == crops
    if cut:  # side by side along the longer side, covering it, the last what is left
        height, width = size
        along = 3 if width >= height else 2
        assert sum(crop[along] for crop in cut) == max(size)
        assert all(crop[5 - along] == min(size) for crop in cut)
    off, on = load_processor(folder), load_processor(folder, **PAN_AND_SCAN)
    assert off.image_tokens(*size) == 256 and on.image_tokens(*size) == 256 * (1 + crops)
    processed = on.process_image(noise(*size))
    assert processed.tensors["pixel_values"].shape == (1 + crops, 3, 896, 896)
    assert processed.tensors["num_crops"].tolist() == [crops] and processed.num_tokens == 256 * (1 + crops)


def test_pan_and_scan_options_are_checked(folder):
    with pytest.raises(ProcessorConfigError, match="do_pan_and_scan must be true or false"):
        load_processor(folder, do_pan_and_scan="yes")
    with pytest.raises(ProcessorConfigError, match="pan_and_scan_max_num_crops must be an integer"):
        load_processor(folder, pan_and_scan_max_num_crops=2.5)
    zero = load_processor(folder, do_pan_and_scan=True, pan_and_scan_min_crop_size=0)
    with pytest.raises(ProcessorInputError, match="must be positive"):
        zero.image_tokens(300, 1000)
    # the minimum ratio may be given as an integer, as JSON writes 2
    assert (
        load_processor(folder, do_pan_and_scan=True, pan_and_scan_min_ratio_to_activate=4).image_tokens(
            300, 1000
        )
        == 256
    )


def test_there_is_no_video(folder):
    processor = load_processor(folder)
    with pytest.raises(ProcessorInputError, match="gemma3 models take no video"):
        processor.process_video(np.zeros((2, 32, 32, 3), np.uint8))
    with pytest.raises(ProcessorInputError, match="gemma3 models take no video"):
        processor.video_tokens(2, 32, 32)


def test_an_images_text_and_its_tokens(folder):
    full = "\n\n<start_of_image>" + "<image_soft_token>" * 256 + "<end_of_image>\n\n"
    assert image_text(256, 0) == full
    assert image_text(256, 2) == (
        f"Here is the original image {full} and here are some crops to help you see better {full} {full}"
    )
    loaded = ModelFolder.load(folder)
    tokens = FAMILY.image.item_tokens(
        [0], loaded.processor.image_config, loaded.vision_token_ids, None, loaded.encode
    )
    assert tokens == [108, 255999] + [262144] * 256 + [256000, 108]
    # vLLM's merges: the line breaks an image's text meets become one token
    assert FAMILY.token_merges(loaded.encode) == [
        ([107, 108], [109]),
        ([108, 107], [109]),
        ([108, 108], [110]),
    ]


def test_placeholders_start_at_the_joined_line_breaks(folder):
    """After a turn's "\\n" the image's "\\n\\n" joins it (one token of three line breaks),
    and the placeholder starts there, as vLLM's; two images in a row share one of four."""
    loaded = ModelFolder.load(folder)
    pixels = noise(60, 80)
    items = image_items([pixels, pixels], loaded.processor)
    prompt = Renderer(loaded).render(
        [
            {
                "role": "user",
                "content": [{"type": "image", "media_index": 0}, {"type": "image", "media_index": 1}],
            }
        ],
        items,
    )
    ids = tuple(prompt.token_ids.tolist())
    first, second = prompt.placeholders
    assert ids[:4] == (2, 105, loaded.encode("user")[0], 109)  # <bos><start_of_turn>user, "\n\n\n"
    assert (first.offset, first.length) == (3, 260) and ids[first.offset + 1] == 255999
    assert (second.offset, second.length) == (3 + 259, 260) and ids[second.offset] == 110
    assert ids[second.offset + 259 : second.offset + 262] == (108, 106, 107)  # "\n\n" <end_of_turn> "\n"


# -- the service (the echo engine's account of what a model would get) ----------------------


def placeholder_lengths(answer: httpx.Response) -> list[int]:
    return [placeholder["length"] for placeholder in account(answer)["prompt"]["placeholders"]]


def test_a_video_is_refused_naming_the_family_and_the_part(server):
    check_a_video_is_refused(server, "gemma3")


@pytest.mark.parametrize(
    "kwargs",
    [{"max_soft_tokens": 70}, {"images_kwargs": {"max_patches": 6}}],  # Gemma 4's, InternVL's
)
def test_another_familys_knob_changes_nothing(server, kwargs):
    """As in vLLM: Gemma 3's processor takes no such key, and leaves it."""
    wide = image(png_data_url(1000, 300, noise=True))
    plain = account(server.ask(wide))
    answer = account(server.ask(wide, mm_processor_kwargs=kwargs))
    assert answer["prompt"]["placeholders"] == plain["prompt"]["placeholders"]
    assert answer["media"][0]["processed"] == plain["media"][0]["processed"]


def test_a_knob_of_the_wrong_type_is_a_400_naming_it(server):
    answer = server.ask(image(png_data_url(64, 48)), mm_processor_kwargs={"do_pan_and_scan": "yes"})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (
        error["code"] == "invalid_processor_option"
        and "do_pan_and_scan must be true or false" in error["message"]
    )


def test_pan_and_scan_per_request(server, folder):
    loaded = ModelFolder.load(folder)
    config, token_ids = loaded.processor.image_config, loaded.vision_token_ids
    with_crops = len(FAMILY.image.item_tokens([3], config, token_ids, None, loaded.encode))
    wide = image(png_data_url(1000, 300, noise=True))
    square = image(png_data_url(300, 300))
    assert placeholder_lengths(server.ask(wide, square)) == [260, 260]
    for kwargs in (PAN_AND_SCAN, {"images_kwargs": PAN_AND_SCAN}):  # flat, or in the images' scope
        answer = account(server.ask(wide, square, mm_processor_kwargs=kwargs))
        assert [item["processed"]["num_tokens"] for item in answer["media"]] == [4 * 256, 256]
        assert [item["processed"]["tensors"]["pixel_values"]["shape"][0] for item in answer["media"]] == [
            4,
            1,
        ]
        lengths = [placeholder["length"] for placeholder in answer["prompt"]["placeholders"]]
        assert lengths == [with_crops, 260] and with_crops > 4 * 260  # the words around the crops too
    # the same image again (a cache hit would be wrong): each request with its own options
    assert placeholder_lengths(server.ask(wide)) == [260]
    fewer = {**PAN_AND_SCAN, "pan_and_scan_max_num_crops": 2}
    assert (
        account(server.ask(wide, mm_processor_kwargs=fewer))["media"][0]["processed"]["num_tokens"] == 3 * 256
    )


def test_on_vllms_render_route_an_image_is_its_soft_tokens_and_crops_the_whole_item(server):
    """vLLM 0.33's generate takes every token of a range for an embedding: an image goes as
    its 256 <image_soft_token>s (the run its range holds between "\n\n<start_of_image>" and
    "<end_of_image>\n\n", which vLLM's runner finds in its own range). With crops its
    embeddings are split by words and markers: the render route answers vLLM's one item, its
    range the whole text ("Here is the original image ..."), as `vllm launch render` does
    (--engine vllm-generate sends one image item per view: tests/engines/test_vllm_generate.py)."""
    wide = image(png_data_url(1000, 300, noise=True))
    answer = server.render(wide)
    assert answer.status_code == 200, answer.text
    (placeholder,) = answer.json()["features"]["mm_placeholders"]["image"]
    ids = answer.json()["token_ids"]
    assert ids[placeholder["offset"] - 1] == 255999 and placeholder["length"] == 256
    assert set(ids[placeholder["offset"] : placeholder["offset"] + 256]) == {262144}
    answer = server.render(wide, mm_processor_kwargs=PAN_AND_SCAN)
    assert answer.status_code == 200, answer.text
    (placeholder,) = answer.json()["features"]["mm_placeholders"]["image"]
    span = answer.json()["token_ids"][placeholder["offset"] : placeholder["offset"] + placeholder["length"]]
    assert span.count(262144) == 4 * 256 and span.count(255999) == 4  # the image and 3 crops


# -- against transformers, here and now -------------------------------------------------------

SIZES = [(300, 1000), (1000, 300), (97, 131), (1080, 1920), (3000, 800), (896, 896), (37, 1000), (500, 600)]


@pytest.mark.slow
@pytest.mark.parametrize("pas", [False, True], ids=["pan-and-scan off", "pan-and-scan on"])
def test_image_tensors_equal_transformers(model, folder, pas):
    _, processor = model
    ours = load_processor(folder, do_pan_and_scan=pas)
    options = {
        "do_pan_and_scan": pas,
        "pan_and_scan_min_crop_size": 256,
        "pan_and_scan_max_num_crops": 4,
        "pan_and_scan_min_ratio_to_activate": 1.2,
    }  # Gemma3Processor's defaults, which the image processor alone lacks
    for size in SIZES:
        pixels = noise(*size)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = processor.image_processor(images=[pixels], return_tensors="np", **options)
        processed = ours.process_image(pixels)
        for key in ("pixel_values", "num_crops"):
            assert processed.tensors[key].dtype == theirs[key].dtype, key
            np.testing.assert_array_equal(processed.tensors[key], theirs[key], err_msg=f"{size} {key}")
        assert processed.num_tokens == 256 * (1 + int(theirs["num_crops"][0]))


CONVERSATION = four_images_chat()


@pytest.mark.slow
@pytest.mark.parametrize("pas", [False, True], ids=["pan-and-scan off", "pan-and-scan on"])
def test_the_prompt_equals_transformers(model, folder, pas):
    """A system prompt, two images in a row after it, an EXIF-turned JPEG (stored 1000 wide,
    upright 1000 tall: pan and scan cuts it as the tall image it shows), odd sizes."""
    ours = load_processor(folder, do_pan_and_scan=pas)
    prompt, media, expected = render_as_transformers(model, ours, CONVERSATION, do_pan_and_scan=pas)
    pixels = np.concatenate([item.processed.tensors["pixel_values"] for item in media])
    np.testing.assert_array_equal(pixels, expected["pixel_values"])
    soft = sum(item.processed.num_tokens for item in media)
    assert list(prompt.token_ids).count(262144) == soft == int(expected["token_type_ids"].sum())
    crops = [int(item.processed.tensors["num_crops"][0]) for item in media]
    assert crops == ([3, 0, 3, 2] if pas else [0, 0, 0, 0])


@pytest.mark.slow
def test_the_transformers_engine_answers_as_transformers(tmp_path):
    """A tiny random Gemma 3 (tiny_model.py: SigLIP at 896 / 14, two layers each way, its
    projector drawn at random, not zero): the transformers engine's greedy ids and logprobs
    (the top 3 each step) on mmprep's prompt and tensors (a wide image cut in 3 crops, an
    odd-size one) are the model's own on transformers' processor output. The engine hands it
    token_type_ids (its images attend both ways: without them the logprobs move by 3e-2) and
    not num_crops (generate refuses it)."""
    pytest.importorskip("torch", reason=REASON)
    pytest.importorskip("transformers", reason=REASON)
    from tests.support.tiny_model import build_model_folder

    folder = build_model_folder(tmp_path / "tiny-gemma3", "gemma3", initializer_range=0.2)
    check_the_engine_answers_as_transformers(folder, **PAN_AND_SCAN)
