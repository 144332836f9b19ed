"""Llama 4 (families/mmprep/families/llama4.py): its facts, its canvases as transformers 5.24's
Llama4ImageProcessor picks them (held here, so a run without transformers checks them), the
service's refusals and vLLM's wire, and, where torch and transformers are installed, the
processor's bfloat16 tensors and the rendered prompt against transformers itself, on the same
pixels."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from mmprep import families
from mmprep.families.llama4 import supported_canvases
from mmprep.model import ModelFolder
from mmprep.processors import ProcessorInputError, load_processor
from tests.support.chat import image, png_data_url
from tests.support.families import (
    REASON,
    account,
    check_a_video_is_refused,
    four_images_chat,
    noise,
    render_as_transformers,
)
from tests.support.model_folder import make_model_folder

FAMILY = families.get("llama4")
MODEL = "Llama-4-Scout-17B-16E-Instruct"
PATCH, IMAGE, START, END, TILE_X, TILE_Y = 200092, 200090, 200080, 200081, 200084, 200085
# (height, width) -> (rows, columns) of tiles at the published 336 / 16, as transformers
# 5.24's Llama4ImageProcessor gave them (aspect_ratios)
GRIDS = {
    (336, 336): (1, 1),
    (97, 131): (1, 1),  # upscaled to one tile, no further
    (300, 1000): (1, 3),
    (1000, 300): (3, 1),
    (1080, 1920): (3, 5),
    (720, 1280): (3, 4),
    (3000, 800): (8, 2),
    (37, 1000): (1, 3),
    (500, 600): (2, 2),
    (336, 672): (1, 2),
    (5000, 40): (15, 1),
    (400, 800): (2, 3),
    (2000, 2000): (4, 4),
    (123, 4567): (1, 14),
    (337, 336): (2, 1),  # one pixel over a tile: two
    (335, 1344): (1, 4),
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_model_folder("llama4", tmp_path_factory.mktemp("llama4") / MODEL)


def test_the_registry_knows_it_by_model_type_and_class_names():
    assert families.for_model_type("llama4") is FAMILY
    assert families.for_processor_class("processor_class", "Llama4Processor") is FAMILY
    assert families.for_image_processor_type("Llama4ImageProcessorFast") is FAMILY
    # images only; vllm 0.33's mllama4.py: flat pixels sized by patches_per_image, no device
    # normalize; transformers' processor rounds its pixels to bfloat16
    assert FAMILY.takes("image") and not FAMILY.takes("video")
    assert not FAMILY.device_normalizes and FAMILY.image.vllm_pixels_field == "flat"
    assert FAMILY.normalizes_in == "bfloat16"
    # transformers 5.24's Llama4ForConditionalGeneration.forward raises: no transformers engine
    assert not FAMILY.transformers_engine
    fields = FAMILY.image.vllm_batched_fields({"pixel_values": np.zeros((5, 3, 4, 4), np.float32)})
    assert list(fields) == ["patches_per_image"] and fields["patches_per_image"].dtype == np.int64
    assert fields["patches_per_image"].shape == () and int(fields["patches_per_image"]) == 5


def test_the_canvases_are_transformers_list():
    """find_supported_resolutions(4, 224)'s docstring: its order, by aspect as first met."""
    assert supported_canvases(4, 224) == (
        (224, 896),
        (448, 448),
        (224, 224),
        (896, 224),
        (224, 672),
        (672, 224),
        (224, 448),
        (448, 224),
    )


def test_the_published_folder_loads(folder):
    loaded = ModelFolder.load(folder)
    config = loaded.processor.image_config
    assert loaded.family == "llama4" and config.fixed_size == (336, 336) and config.resample == 2
    assert (config.image_mean, config.image_std) == ((0.5,) * 3, (0.5,) * 3)
    assert config.option("max_patches") == 16 and config.option("resize_to_max_canvas") is False
    assert loaded.vision_token_ids == {
        "image_token_id": PATCH,
        "fake_image_token_id": IMAGE,
        "boi_token_id": START,
        "eoi_token_id": END,
        "tile_x_separator_token_id": TILE_X,
        "tile_y_separator_token_id": TILE_Y,
    }
    assert loaded.pad_token_id("image") == IMAGE  # the template's <|image|>
    assert loaded.eos_token_ids == (200001, 200007, 200008)
    assert loaded.special_token_ids >= {200000, 200005, 200006, 200008, PATCH, IMAGE, START, END}


@pytest.mark.parametrize(("size", "grid"), GRIDS.items())
def test_tiles(folder, size, grid):
    processor = load_processor(folder)
    rows, columns = grid
    tiles = rows * columns + (rows * columns > 1)  # and the global tile
    assert processor.image_size(*size) == (336 * rows, 336 * columns)
    assert processor.image_tokens(*size) == 144 * tiles
    processed = processor.process_image(noise(*size))
    assert processed.tensors["pixel_values"].shape == (tiles, 3, 336, 336)
    assert processed.tensors["pixel_values"].dtype == np.float32
    assert processed.tensors["aspect_ratios"].tolist() == [[rows, columns]]
    assert processed.num_tokens == 144 * tiles
    # every value a bfloat16: its low 16 bits zero
    assert not (processed.tensors["pixel_values"].view(np.uint32) & 0xFFFF).any()


def test_a_config_file_may_ask_for_fewer_tiles_or_the_largest_canvas(folder, tmp_path):
    changed = make_model_folder("llama4", tmp_path / "four")
    config = json.loads((changed / "preprocessor_config.json").read_text())
    (changed / "preprocessor_config.json").write_text(json.dumps(config | {"max_patches": 4}))
    assert load_processor(changed).image_size(1080, 1920) == (672, 672)  # transformers' (2, 2)
    (changed / "preprocessor_config.json").write_text(json.dumps(config | {"resize_to_max_canvas": True}))
    # blown up to the canvas it scales most into: transformers' (3, 5)
    assert load_processor(changed).image_size(97, 131) == (336 * 3, 336 * 5)


def test_there_is_no_video(folder):
    processor = load_processor(folder)
    with pytest.raises(ProcessorInputError, match="llama4 models take no video"):
        processor.process_video(np.zeros((2, 32, 32, 3), np.uint8))
    with pytest.raises(ProcessorInputError, match="llama4 models take no video"):
        processor.video_tokens(2, 32, 32)


def test_an_images_tokens(folder):
    loaded = ModelFolder.load(folder)
    config, ids = loaded.processor.image_config, loaded.vision_token_ids

    def tokens(grid: list[int]) -> list[int]:
        return FAMILY.image.item_tokens(grid, config, ids, None, loaded.encode)

    patch = [PATCH] * 144
    assert tokens([1, 1]) == [START, IMAGE, *patch, END]
    assert tokens([2, 2]) == [
        START,
        *patch,
        TILE_X,
        *patch,
        TILE_Y,
        *patch,
        TILE_X,
        *patch,
        TILE_Y,
        IMAGE,
        *patch,
        END,
    ]
    assert tokens([1, 3]).count(TILE_X) == 2 and tokens([3, 1]).count(TILE_Y) == 3


# -- the service (the echo engine's account of what a model would get) ----------------------


def test_a_video_is_refused_naming_the_family_and_the_part(server):
    check_a_video_is_refused(server, "llama4")


def test_an_images_placeholder_is_its_tiles(server):
    answer = account(server.ask(image(png_data_url(1000, 300, noise=True)), image(png_data_url(64, 48))))
    lengths = [placeholder["length"] for placeholder in answer["prompt"]["placeholders"]]
    # 3 tiles and the global one, 2 x-separators, 1 y-separator, start, <|image|>, end; one tile
    assert lengths == [4 * 144 + 2 + 1 + 3, 144 + 3]
    assert [item["processed"]["tensors"]["pixel_values"]["shape"][0] for item in answer["media"]] == [4, 1]


def test_a_requests_own_tile_options(server):
    """max_patches and resize_to_max_canvas per request (mm_processor_kwargs, flat or in
    images_kwargs), as transformers' processor takes them per call."""
    wide = image(png_data_url(1920, 1080, noise=True))
    plain = account(server.ask(wide))["media"][0]["processed"]
    assert plain["num_tokens"] == 144 * 16  # 3 x 5 and the global tile
    for kwargs in ({"max_patches": 4}, {"images_kwargs": {"max_patches": 4}}):
        fewer = account(server.ask(wide, mm_processor_kwargs=kwargs))["media"][0]["processed"]
        assert fewer["num_tokens"] == 144 * 5 and fewer["tensors"]["aspect_ratios"]["shape"] == [1, 2]
    small = image(png_data_url(131, 97, noise=True))
    blown = account(server.ask(small, mm_processor_kwargs={"resize_to_max_canvas": True}))
    assert blown["media"][0]["processed"]["num_tokens"] == 144 * 16  # 3 x 5 and the global tile


def test_an_image_the_template_drops_is_a_400(server):
    """With tools, Llama 4's template writes the first user message's content through
    `|trim`, a list's text, so its image is lost: a 400 saying the placeholders and the media
    disagree (vLLM 0.33's render answers a 500, "Failed to apply prompt replacement")."""
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}
    answer = server.ask(image(png_data_url(64, 48)), tools=[tool], tool_choice="none")
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "placeholder_mismatch" and "images: 0 in the prompt, 1 sent" in error["message"]


def test_on_vllms_wire_one_tile_goes_as_its_patches(server):
    """vLLM 0.33's generate takes every token of a range for an embedding: a one-tile image
    goes as its 144 <|patch|>es (the run between <|image|> and <|image_end|>, which vLLM's
    runner finds in its own range)."""
    answer = server.render(image(png_data_url(200, 150, noise=True)))
    assert answer.status_code == 200, answer.text
    (placeholder,) = answer.json()["features"]["mm_placeholders"]["image"]
    ids = answer.json()["token_ids"]
    assert ids[placeholder["offset"] - 1] == IMAGE and placeholder["length"] == 144
    assert set(ids[placeholder["offset"] : placeholder["offset"] + 144]) == {PATCH}
    assert ids[placeholder["offset"] + 144] == END


def test_the_render_route_answers_a_tiled_image_as_vllms_render(server):
    """With more tiles an image's embeddings are split by separators and <|image|>: the
    render route answers the one image item vLLM's render answers (its whole range, every
    tile's pixels); --engine vllm-generate sends it as one image item per tile
    (tests/engines/test_vllm_generate.py)."""
    from mmprep.vllm.serde import decode_item

    url = png_data_url(1000, 300, noise=True)  # 1 x 3 tiles and the global one
    answer = server.render(image(url))
    assert answer.status_code == 200, answer.text
    features, ids = answer.json()["features"], answer.json()["token_ids"]
    (span,) = features["mm_placeholders"]["image"]
    inside = ids[span["offset"] : span["offset"] + span["length"]]
    assert inside.count(PATCH) == 4 * 144 and inside.count(TILE_X) == 2 and inside.count(IMAGE) == 1
    (item,) = [decode_item(text) for text in features["kwargs_data"]["image"]]
    assert item["pixel_values"].data.shape[0] == 4 and int(item["patches_per_image"].data) == 4


# -- against transformers, here and now -------------------------------------------------------

SIZES = list(GRIDS)


@pytest.mark.slow
def test_image_tensors_equal_transformers(model, folder):
    """transformers' bfloat16 pixels, each one the float32 mmprep holds; aspect_ratios."""
    _, processor = model
    ours = load_processor(folder)
    for size in SIZES:
        pixels = noise(*size)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = processor.image_processor(images=[pixels], return_tensors="pt")
        processed = ours.process_image(pixels)
        assert str(theirs["pixel_values"].dtype) == "torch.bfloat16"
        np.testing.assert_array_equal(
            processed.tensors["pixel_values"], theirs["pixel_values"].float().numpy(), err_msg=str(size)
        )
        assert processed.tensors["aspect_ratios"].tolist() == theirs["aspect_ratios"].tolist(), size
        assert processed.num_tokens == 144 * len(theirs["pixel_values"])


@pytest.mark.slow
@pytest.mark.parametrize("options", [{"max_patches": 4}, {"resize_to_max_canvas": True}, {"max_patches": 1}])
def test_tile_options_equal_transformers(model, folder, options):
    """A request's (or a folder's) max_patches and resize_to_max_canvas, as transformers'
    image processor takes them per call."""
    _, processor = model
    ours = load_processor(folder, **options)
    for size in [(1080, 1920), (97, 131), (3000, 800), (400, 800), (337, 336)]:
        pixels = noise(*size)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = processor.image_processor(images=[pixels], return_tensors="pt", **options)
        processed = ours.process_image(pixels)
        np.testing.assert_array_equal(
            processed.tensors["pixel_values"], theirs["pixel_values"].float().numpy(), err_msg=str(size)
        )
        assert processed.tensors["aspect_ratios"].tolist() == theirs["aspect_ratios"].tolist(), size


@pytest.mark.slow
@pytest.mark.parametrize("options", [{}, {"resize_to_max_canvas": True}], ids=["least", "max canvas"])
def test_random_sizes_equal_transformers(model, folder, options):
    """Seeded sizes of 4 to 1400 a side (a third of them at 1:2, 2:1, 1:4, 3:1 or 2:3, where
    the scales tie): the resize inside the canvas is computed partly in float32 as torch
    computes it (a canvas side from get_best_fit is a tensor), else an image lands a pixel
    short (400 x 800 at the largest canvas: 839 rows, not 840)."""
    _, processor = model
    ours = load_processor(folder, **options)
    rng = np.random.default_rng(11)
    for _ in range(12):
        height, width = (int(side) for side in rng.integers(4, 1400, 2))
        if rng.random() < 0.33:
            height = max(4, int(width * rng.choice([0.5, 2.0, 0.25, 3.0, 1.5])))
        pixels = noise(height, width)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = processor.image_processor(images=[pixels], return_tensors="pt", **options)
        np.testing.assert_array_equal(
            ours.process_image(pixels).tensors["pixel_values"],
            theirs["pixel_values"].float().numpy(),
            err_msg=f"{height}x{width}",
        )


CONVERSATION = four_images_chat()


@pytest.mark.slow
def test_the_prompt_equals_transformers(model, folder):
    """A system prompt, two images in a row after it, an EXIF-turned JPEG (stored 1000 wide,
    upright 1000 tall: tiled as the tall image it shows), odd sizes, 16 tiles."""
    prompt, media, expected = render_as_transformers(model, load_processor(folder), CONVERSATION, "pt")
    pixels = np.concatenate([item.processed.tensors["pixel_values"] for item in media])
    np.testing.assert_array_equal(pixels, expected["pixel_values"].float().numpy())
    patches = sum(item.processed.num_tokens for item in media)
    assert list(prompt.token_ids).count(PATCH) == patches == 144 * (4 + 1 + 4 + 16)
    # each placeholder spans the image's whole text, <|image_start|> to <|image_end|>
    for placeholder in prompt.placeholders:
        ids = prompt.token_ids[placeholder.offset : placeholder.offset + placeholder.length]
        assert (ids[0], ids[-1]) == (START, END)


@pytest.mark.slow
def test_the_transformers_engine_refuses_it_at_start(tmp_path):
    """A tiny random Llama 4 (tiny_model.py) builds and loads, but transformers 5.24's
    Llama4ForConditionalGeneration.forward raises on every call (it reads image_outputs off
    its language model's output, which has none): the engine refuses the folder at start,
    naming the family, rather than fail on the first request."""
    pytest.importorskip("transformers", reason=REASON)
    torch = pytest.importorskip("torch", reason=REASON)
    import asyncio

    from mmprep.engines.transformers_engine import TransformersEngine
    from tests.support.tiny_model import build_model_folder

    folder = build_model_folder(tmp_path / "tiny-llama4", "llama4")
    import transformers

    model = transformers.AutoModelForImageTextToText.from_pretrained(str(folder)).eval()
    with torch.no_grad(), pytest.raises(AttributeError, match="image_outputs"):
        model(input_ids=torch.tensor([[200000, 200005]]))
    engine = TransformersEngine(folder, device="cpu")
    with pytest.raises(ValueError, match="is of the llama4 family, which this engine cannot feed yet"):
        asyncio.run(engine.start())
    asyncio.run(engine.stop())
