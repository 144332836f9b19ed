"""Mistral 3 (families/mmprep/families/mistral3.py): its facts, its sizes as transformers 5.24's
PixtralImageProcessor sizes images (held here, so a run without transformers checks them),
the service's refusals, and, where torch and transformers are installed, the processor's
tensors and the rendered prompt against transformers itself, on the same pixels."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

from mmprep import families
from mmprep.families.mistral3 import resized_size
from mmprep.model import ModelFolder
from mmprep.processors import ProcessorConfigError, ProcessorInputError, load_processor
from tests.support.chat import image, png_data_url
from tests.support.families import (
    REASON,
    account,
    check_a_video_is_refused,
    check_the_engine_answers_as_transformers,
    four_images_chat,
    noise,
    render_as_transformers,
)
from tests.support.model_folder import make_model_folder

FAMILY = families.get("mistral3")
MODEL = "Mistral-Small-3.1-24B-Instruct-2503"
IMG, BREAK, END = 10, 12, 13
# (height, width) -> the resized (height, width) at the published longest_edge 1540 and
# patch 14 x merge 2, as transformers 5.24's PixtralImageProcessor resized them
SIZES = {
    (97, 131): (112, 140),  # never scaled up: each side rounded up to 28
    (28, 28): (28, 28),
    (29, 57): (56, 84),
    (300, 1000): (308, 1008),
    (1000, 300): (1008, 308),
    (1540, 1540): (1540, 1540),
    (2000, 3000): (1036, 1540),  # scaled down to fit 1540, floored, then rounded up
    (1080, 1920): (868, 1540),
    (3000, 800): (1540, 420),
    (10, 3000): (28, 1540),  # one row
    (1541, 7): (1540, 28),
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_model_folder("mistral3", tmp_path_factory.mktemp("mistral3") / MODEL)


def test_the_registry_knows_it_by_model_type_and_class_names():
    assert families.for_model_type("mistral3") is FAMILY
    assert families.for_processor_class("processor_class", "PixtralProcessor") is FAMILY
    assert families.for_image_processor_type("PixtralImageProcessor") is FAMILY
    assert families.for_image_processor_type("PixtralImageProcessorFast") is FAMILY
    # images only; vllm 0.33's mistral3.py: each image its own unpadded pixels, no image_sizes,
    # uint8 pixels normalized on the device by default
    assert FAMILY.takes("image") and not FAMILY.takes("video")
    assert FAMILY.device_normalizes and FAMILY.image.vllm_pixels_field == "batched"
    assert FAMILY.image.vllm_unpadded and FAMILY.image.vllm_left_out == ("image_sizes",)


def test_the_published_folder_loads(folder):
    loaded = ModelFolder.load(folder)
    config = loaded.processor.image_config
    assert loaded.family == "mistral3" and config.max_pixels == 1540 and config.resample == 3
    # processor_config.json's patch_size and spatial_merge_size, over the image file's patch_size
    assert (config.patch_size, config.merge_size, config.factor) == (14, 2, 28)
    assert loaded.vision_token_ids == {
        "image_token_id": IMG,
        "image_break_token_id": BREAK,
        "image_end_token_id": END,
    }
    assert loaded.pad_token_id("image") == IMG  # the template's [IMG], which the rows replace
    assert loaded.eos_token_ids == (2,)
    assert loaded.special_token_ids >= {0, 1, 2, 3, 4, IMG, BREAK, END, 17, 18}


@pytest.mark.parametrize(
    "model",
    ["mistralai/Mistral-Small-3.1-24B-Instruct-2503", "mistralai/Mistral-Small-3.2-24B-Instruct-2506"],
)
def test_the_preset_model_ids(model):
    """models.json's ids: the preset folder's files, processor_config.json's keys included."""
    processor = load_processor(model)
    assert processor.family == "mistral3" and processor.image_config.factor == 28
    assert processor.image_size(1080, 1920) == (868, 1540) and processor.image_tokens(1080, 1920) == 31 * 55


def test_the_class_defaults_without_a_folder():
    """PixtralImageProcessor's longest_edge 1024 and PixtralProcessor's patch 16, merge 1."""
    config = load_processor("mistral3").image_config
    assert (config.max_pixels, config.factor) == (1024, 16)


@pytest.mark.parametrize(("size", "resized"), SIZES.items())
def test_sizes_and_tokens(folder, size, resized):
    assert resized_size(*size, 1540, 28) == resized
    processor = load_processor(folder)
    rows, columns = resized[0] // 28, resized[1] // 28
    assert processor.image_size(*size) == resized
    assert processor.image_tokens(*size) == rows * columns  # the embeddings: one per [IMG]
    processed = processor.process_image(noise(*size))
    assert processed.tensors["pixel_values"].shape == (1, 3, *resized)
    assert processed.tensors["image_sizes"].tolist() == [list(resized)]
    assert processed.num_tokens == rows * columns


def test_a_request_may_set_the_longest_edge(folder):
    """vLLM and transformers take `size` per call (vLLM's mistral3.py counts the tokens by it)."""
    processor = load_processor(folder, size={"longest_edge": 560})
    assert processor.image_size(1080, 1920) == (336, 560)


@pytest.mark.parametrize("size", [{"height": 100, "width": 100}, {"longest_edge": 0}, {"shortest_edge": 56}])
def test_a_size_without_a_longest_edge_is_refused(folder, size):
    with pytest.raises(ProcessorConfigError, match="size.longest_edge must be a positive integer"):
        load_processor(folder, size=size)


def test_an_image_too_thin_to_scale_is_refused(folder):
    with pytest.raises(ProcessorInputError, match="cannot be resized"):
        load_processor(folder).image_size(1, 5000)


def test_there_is_no_video(folder):
    processor = load_processor(folder)
    with pytest.raises(ProcessorInputError, match="mistral3 models take no video"):
        processor.process_video(np.zeros((2, 32, 32, 3), np.uint8))
    with pytest.raises(ProcessorInputError, match="mistral3 models take no video"):
        processor.video_tokens(2, 32, 32)


def test_an_images_tokens_are_rows_closed_by_breaks(folder):
    loaded = ModelFolder.load(folder)
    config, token_ids = loaded.processor.image_config, loaded.vision_token_ids
    tokens = FAMILY.image.item_tokens([56, 84], config, token_ids, None, loaded.encode)
    assert tokens == [IMG] * 3 + [BREAK] + [IMG] * 3 + [END]
    assert FAMILY.image.item_tokens([28, 1540], config, token_ids, None, loaded.encode) == [IMG] * 55 + [END]


def test_a_batch_pads_to_the_largest_image():
    wide, tall = np.ones((1, 3, 28, 84), np.float32), np.full((1, 3, 56, 28), 2, np.float32)
    first, second = FAMILY.image.batch_pixels([wide, tall])
    assert first.shape == second.shape == (1, 3, 56, 84)
    assert (first[..., :28, :] == 1).all() and (first[..., 28:, :] == 0).all()
    assert (second[..., :, :28] == 2).all() and (second[..., :, 28:] == 0).all()


# -- the service (the echo engine's account of what a model would get) ----------------------


def test_a_video_is_refused_naming_the_family_and_the_part(server):
    check_a_video_is_refused(server, "mistral3")


def test_the_echo_account_of_an_image(server):
    """A 1000 x 300 image: 308 x 1008, 11 rows of 36 [IMG] and a break (the last an end)."""
    answer = account(server.ask(image(png_data_url(1000, 300, noise=True))))
    (item,) = answer["media"]
    assert item["processed"]["num_tokens"] == 11 * 36
    assert item["processed"]["tensors"]["pixel_values"]["shape"] == [1, 3, 308, 1008]
    assert [placeholder["length"] for placeholder in answer["prompt"]["placeholders"]] == [11 * 37]


def test_a_requests_size_changes_its_images(server):
    wide = image(png_data_url(1000, 300, noise=True))
    for kwargs in ({"size": {"longest_edge": 560}}, {"images_kwargs": {"size": {"longest_edge": 560}}}):
        answer = account(server.ask(wide, mm_processor_kwargs=kwargs))
        assert answer["media"][0]["processed"]["tensors"]["pixel_values"]["shape"] == [1, 3, 168, 560]
    assert account(server.ask(wide))["media"][0]["processed"]["num_tokens"] == 11 * 36  # not cached


def test_a_size_of_another_shape_is_a_400_naming_it(server):
    answer = server.ask(
        image(png_data_url(64, 48)), mm_processor_kwargs={"size": {"height": 100, "width": 100}}
    )
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_processor_option" and "size.longest_edge" in error["message"]


def test_on_vllms_render_route_an_image_is_vllms_item(server):
    """vLLM 0.33's generate takes every token of a range for an embedding: an image of one
    row goes as its run of [IMG] (the [IMG_END] after it left out, as vLLM's runner finds the
    run in its own range); rows split by [IMG_BREAK] go as vLLM's render answers them, the
    whole range (which vLLM's generate cannot take, as it cannot its own render's)."""
    answer = server.render(image(png_data_url(3000, 10)))
    assert answer.status_code == 200, answer.text
    (placeholder,) = answer.json()["features"]["mm_placeholders"]["image"]
    ids = answer.json()["token_ids"]
    assert placeholder["length"] == 55 and ids[placeholder["offset"] + 55] == END
    assert set(ids[placeholder["offset"] : placeholder["offset"] + 55]) == {IMG}
    answer = server.render(image(png_data_url(64, 48)))  # 56 x 84: two rows of three
    assert answer.status_code == 200, answer.text
    (placeholder,) = answer.json()["features"]["mm_placeholders"]["image"]
    ids = answer.json()["token_ids"]
    assert ids[placeholder["offset"] : placeholder["offset"] + placeholder["length"]] == [
        *[IMG] * 3,
        BREAK,
        *[IMG] * 3,
        END,
    ]


def generate_body(folder, *parts: dict, **extra) -> tuple[dict, Any, int]:
    """The GenerateRequest `mmprep --engine vllm-generate` POSTs for a chat of `parts`, and
    the request it was made of."""
    from mmprep.vllm.request import generate_request
    from tests.vllm_real.real_vllm import prepared_in_process

    body = {"model": MODEL, "messages": [{"role": "user", "content": list(parts)}], **extra}
    prepared, options = prepared_in_process(folder, body, None, MODEL)
    assert options.max_model_len  # the folder's, as vLLM derives it
    return generate_request(prepared, options), prepared, options.max_model_len


def test_on_vllms_generate_wire_images_of_rows_go_as_their_files(folder):
    """Rows split by [IMG_BREAK] cannot go as features (no is_embed), nor a row as an item of
    its own (Pixtral attends across the whole image): the request's images go as their files
    (content_parts), for vLLM to process as its chat does, each still the one [IMG] the
    template wrote, in the ids vLLM's chat tokenizes; each keyed by mmprep's hash (vLLM's)."""
    from mmprep.vllm.hashing import mm_hash

    one_row, two_rows = png_data_url(3000, 10), png_data_url(64, 48, noise=True)
    sent, prepared, max_model_len = generate_body(
        folder, image(one_row), image(two_rows), {"type": "text", "text": "Compare."}
    )
    assert sent["features"] is None
    assert sent["content_parts"] == [
        {"type": "image_url", "url": url, "uuid": mm_hash(item, MODEL)}
        for url, item in zip((one_row, two_rows), prepared.media, strict=True)
    ]
    loaded = ModelFolder.load(folder)
    assert sent["token_ids"] == loaded.encode(prepared.prompt.text)
    assert sent["token_ids"].count(IMG) == 2 and BREAK not in sent["token_ids"]
    # the rest of the request is the expanded prompt's: vLLM's max_tokens leaves it room
    assert sent["sampling_params"]["max_tokens"] == max_model_len - len(prepared.prompt.token_ids)
    # a one-row image alone goes as its item, processed by mmprep
    sent, *_ = generate_body(folder, image(one_row))
    assert sent["content_parts"] is None and sent["features"]["mm_placeholders"]["image"][0]["length"] == 55


def test_a_requests_processor_options_cannot_go_with_the_files(folder):
    from mmprep.interface.engine import EngineHTTPError

    with pytest.raises(EngineHTTPError) as refused:
        generate_body(
            folder, image(png_data_url(64, 48)), mm_processor_kwargs={"size": {"longest_edge": 560}}
        )
    assert refused.value.status == 400 and refused.value.param == "mm_processor_kwargs"
    assert refused.value.code == "unsupported_field"


# -- against transformers, here and now -------------------------------------------------------


@pytest.mark.slow
def test_image_tensors_equal_transformers(model, folder):
    """Every size above, through PixtralProcessor's image processor with the patch size it
    passes (14 x 2): pixels and image_sizes to the bit."""
    _, processor = model
    ours = load_processor(folder)
    for size in SIZES:
        pixels = noise(*size)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = processor.image_processor(images=[pixels], return_tensors="np", patch_size=28)
        processed = ours.process_image(pixels)
        for key in ("pixel_values", "image_sizes"):
            assert processed.tensors[key].dtype == theirs[key].dtype, key
            np.testing.assert_array_equal(processed.tensors[key], theirs[key], err_msg=f"{size} {key}")


CONVERSATION = four_images_chat("Be brief.")  # words of the test vocabulary


@pytest.mark.slow
@pytest.mark.parametrize("system", [True, False], ids=["system prompt", "the template's own"])
def test_the_prompt_equals_transformers(model, folder, system):
    """A system prompt (or the template's, with today's date), two images in a row, an
    EXIF-turned JPEG (stored 1000 wide, upright 1000 tall), odd sizes, one over 1540: ids,
    text, the batch's padded pixels and the [IMG] count equal PixtralProcessor's."""
    conversation = CONVERSATION if system else CONVERSATION[1:]
    prompt, media, expected = render_as_transformers(model, load_processor(folder), conversation)
    pixels = FAMILY.image.batch_pixels([item.processed.tensors["pixel_values"] for item in media])
    np.testing.assert_array_equal(np.concatenate(pixels), expected["pixel_values"])
    sizes = np.concatenate([item.processed.tensors["image_sizes"] for item in media])
    np.testing.assert_array_equal(sizes, expected["image_sizes"])
    embeddings = sum(item.processed.num_tokens for item in media)
    assert list(prompt.token_ids).count(IMG) == embeddings == int((expected["input_ids"] == IMG).sum())
    assert [p.length for p in prompt.placeholders] == [11 * 37, 4 * 6, 36 * 12, 31 * 56]


@pytest.mark.slow
def test_the_transformers_engine_answers_as_transformers(tmp_path):
    """A tiny random Mistral 3 (tiny_model.py: Pixtral at 1540 / 14, two layers each way): the
    transformers engine's greedy ids and logprobs (the top 3 each step) on mmprep's prompt and
    tensors (a wide image and an odd-size one: the batch padded to the wider, image_sizes
    beside it) are the model's own on transformers' processor output."""
    pytest.importorskip("torch", reason=REASON)
    pytest.importorskip("transformers", reason=REASON)
    from tests.support.tiny_model import build_model_folder

    check_the_engine_answers_as_transformers(build_model_folder(tmp_path / "tiny-mistral3", "mistral3"))
