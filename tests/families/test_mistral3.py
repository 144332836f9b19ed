"""Mistral 3 (families/mmprep/families/mistral3.py): its facts, its sizes as transformers 5.24's
PixtralImageProcessor sizes images (held here, so a run without transformers checks them),
the service's refusals, and, where torch and transformers are installed, the processor's
tensors and the rendered prompt against transformers itself, on the same pixels."""

from __future__ import annotations

import io
import json
import warnings

import httpx
import numpy as np
import pytest
from PIL import Image

from mmprep import families
from mmprep.core.config import Settings
from mmprep.decoders import decode_image
from mmprep.families.mistral3 import resized_size
from mmprep.interface.prepared import MediaItem
from mmprep.model import ModelFolder
from mmprep.processors import ProcessorConfigError, ProcessorInputError, load_processor
from mmprep.render import Renderer
from tests.support.chat import chat, data_url, image, png_data_url, video
from tests.support.media import MEDIA
from tests.support.model_folder import as_transformers, make_model_folder
from tests.support.servers import LiveServer

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


def noise(height: int, width: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed + height + width).integers(0, 256, (height, width, 3), dtype=np.uint8)


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


def ask(server, *parts: dict, **extra) -> httpx.Response:
    body = chat(*parts, model=MODEL, max_tokens=1_000_000, **extra)
    return httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=120)


def account(answer: httpx.Response) -> dict:
    assert answer.status_code == 200, answer.text
    return json.loads(answer.json()["choices"][0]["message"]["content"])


@pytest.fixture(scope="module")
def server(folder):
    with LiveServer(Settings(model=folder)) as live:
        yield live


def test_a_video_is_refused_naming_the_family_and_the_part(server):
    answer = ask(
        server, image(png_data_url(64, 48)), video(data_url(MEDIA / "224p_6_vp9.webm", "video/webm"))
    )
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (
        error["code"] == "unsupported_content_type" and error["param"] == "messages[0].content[1].video_url"
    )
    assert "mistral3" in error["message"] and "video" in error["message"]


def test_the_echo_account_of_an_image(server):
    """A 1000 x 300 image: 308 x 1008, 11 rows of 36 [IMG] and a break (the last an end)."""
    answer = account(ask(server, image(png_data_url(1000, 300, noise=True))))
    (item,) = answer["media"]
    assert item["processed"]["num_tokens"] == 11 * 36
    assert item["processed"]["tensors"]["pixel_values"]["shape"] == [1, 3, 308, 1008]
    assert [placeholder["length"] for placeholder in answer["prompt"]["placeholders"]] == [11 * 37]


def test_a_requests_size_changes_its_images(server):
    wide = image(png_data_url(1000, 300, noise=True))
    for kwargs in ({"size": {"longest_edge": 560}}, {"images_kwargs": {"size": {"longest_edge": 560}}}):
        answer = account(ask(server, wide, mm_processor_kwargs=kwargs))
        assert answer["media"][0]["processed"]["tensors"]["pixel_values"]["shape"] == [1, 3, 168, 560]
    assert account(ask(server, wide))["media"][0]["processed"]["num_tokens"] == 11 * 36  # not cached


def test_a_size_of_another_shape_is_a_400_naming_it(server):
    answer = ask(
        server, image(png_data_url(64, 48)), mm_processor_kwargs={"size": {"height": 100, "width": 100}}
    )
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_processor_option" and "size.longest_edge" in error["message"]


def test_on_vllms_wire_only_a_one_row_image_goes(server):
    """vLLM 0.33's generate takes every token of a range for an embedding: an image of one
    row goes as its run of [IMG] (the [IMG_END] after it left out, as vLLM's runner finds the
    run in its own range); rows split by [IMG_BREAK] cannot be said on that wire: a 400
    naming the part."""
    body = chat(image(png_data_url(3000, 10)), model=MODEL)
    answer = httpx.post(f"{server.url}/v1/chat/completions/render", json=body, timeout=120)
    assert answer.status_code == 200, answer.text
    (placeholder,) = answer.json()["features"]["mm_placeholders"]["image"]
    ids = answer.json()["token_ids"]
    assert placeholder["length"] == 55 and ids[placeholder["offset"] + 55] == END
    assert set(ids[placeholder["offset"] : placeholder["offset"] + 55]) == {IMG}
    body = chat(image(png_data_url(64, 48)), model=MODEL)
    answer = httpx.post(f"{server.url}/v1/chat/completions/render", json=body, timeout=120)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "unsupported_placeholder" and error["param"] == "messages[0].content[0].image_url"


# -- against transformers, here and now -------------------------------------------------------

REASON = "needs torch, torchvision and transformers (pip install torch torchvision transformers)"


@pytest.fixture(scope="module")
def model(folder):
    pytest.importorskip("torch", reason=REASON)
    pytest.importorskip("torchvision", reason=REASON)
    transformers = pytest.importorskip("transformers", reason=REASON)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        processor = transformers.AutoProcessor.from_pretrained(str(folder))
    return ModelFolder.load(folder), processor


def exif_jpeg(height: int, width: int, orientation: int) -> bytes:
    """A JPEG stored `height` x `width` whose EXIF orientation turns it (6: 90 degrees)."""
    stored = Image.fromarray(noise(height, width, 7))
    exif = Image.Exif()
    exif[0x0112] = orientation
    out = io.BytesIO()
    stored.save(out, "JPEG", quality=90, exif=exif)
    return out.getvalue()


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


CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {
        "role": "user",
        "content": [
            {"type": "image", "media_index": 0},
            {"type": "image", "media_index": 1},
            {"type": "text", "text": "What is this image? 🖼"},
        ],
    },
    {"role": "assistant", "content": "A picture."},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "And these?"},
            {"type": "image", "media_index": 2},
            {"type": "text", "text": "please answer"},
            {"type": "image", "media_index": 3},
        ],
    },
]


@pytest.mark.slow
@pytest.mark.parametrize("system", [True, False], ids=["system prompt", "the template's own"])
def test_the_prompt_equals_transformers(model, folder, system):
    """A system prompt (or the template's, with today's date), two images in a row, an
    EXIF-turned JPEG (stored 1000 wide, upright 1000 tall), odd sizes, one over 1540: ids,
    text, the batch's padded pixels and the [IMG] count equal PixtralProcessor's."""
    loaded, processor = model
    ours = load_processor(folder)
    turned = decode_image(exif_jpeg(300, 1000, 6)).pixels
    assert turned.shape == (1000, 300, 3)
    pictures = [noise(300, 1000), noise(97, 131), turned, noise(1080, 1920)]
    media = [
        MediaItem("image", pixels, {}, f"image {i}", processed=ours.process_image(pixels))
        for i, pixels in enumerate(pictures)
    ]
    conversation = CONVERSATION if system else CONVERSATION[1:]
    prompt = Renderer(loaded).render(conversation, media)
    text = processor.apply_chat_template(as_transformers(conversation), add_generation_prompt=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # as vLLM tokenizes a rendered chat: the template wrote <s> itself
        expected = processor(text=text, images=pictures, add_special_tokens=False, return_tensors="np")
    assert prompt.text == text
    assert list(prompt.token_ids) == expected["input_ids"][0].tolist()
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
    transformers = pytest.importorskip("transformers", reason=REASON)
    torch = pytest.importorskip("torch", reason=REASON)
    import asyncio

    from mmprep.engines.transformers_engine import TransformersEngine
    from mmprep.interface.prepared import PreparedRequest, SamplingParams
    from tests.support.tiny_model import build_model_folder

    folder = build_model_folder(tmp_path / "tiny-mistral3", "mistral3")
    pictures = [noise(300, 1000), noise(97, 131)]
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "image", "media_index": 0},
                {"type": "text", "text": "Describe this image."},
                {"type": "image", "media_index": 1},
            ],
        }
    ]
    loaded = ModelFolder.load(folder)
    processor = load_processor(folder)
    media = [
        MediaItem(
            "image",
            pixels,
            {},
            f"messages[0].content[{2 * i}].image_url",
            processed=processor.process_image(pixels),
        )
        for i, pixels in enumerate(pictures)
    ]
    prompt = Renderer(loaded).render(messages, media)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = transformers.AutoProcessor.from_pretrained(str(folder))
        text = theirs.apply_chat_template(as_transformers(messages), add_generation_prompt=True)
        inputs = theirs(text=text, images=pictures, add_special_tokens=False, return_tensors="pt")
    assert list(prompt.token_ids) == inputs["input_ids"][0].tolist()
    model = transformers.AutoModelForImageTextToText.from_pretrained(str(folder)).eval()
    with torch.no_grad():
        out = model.generate(
            **inputs, max_new_tokens=4, do_sample=False, return_dict_in_generate=True, output_logits=True
        )
    expected_ids = out.sequences[0, inputs["input_ids"].shape[1] :].tolist()
    expected = torch.log_softmax(torch.stack(out.logits)[:, 0].float(), dim=-1)

    sampling = SamplingParams(max_tokens=4, logprobs=True, top_logprobs=3)
    request = PreparedRequest("chatcmpl-1", "tiny", messages, media, sampling, prompt=prompt)
    engine = TransformersEngine(folder, device="cpu")
    asyncio.run(engine.start())
    try:

        async def answer() -> list:
            return [logprob async for output in engine.generate(request) for logprob in output.logprobs]

        logprobs = asyncio.run(answer())
    finally:
        asyncio.run(engine.stop())
    assert [logprob.token_id for logprob in logprobs] == expected_ids
    for step, logprob in enumerate(logprobs):
        values, ids = expected[step].topk(3)
        assert [token for token, _ in logprob.top] == ids.tolist()
        assert [value for _, value in logprob.top] == pytest.approx(values.tolist(), abs=1e-5)
