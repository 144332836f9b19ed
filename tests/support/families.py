"""What the family tests (tests/families/) share, so a new family adds its cases, not copies:
mmprep serving a family's model folder on the echo engine (its account of what the model
would get), test pictures, the chats rendered against transformers, and the transformers
engine's answer held to the model's own generate. Their fixtures (`server`, `model`) are
tests/families/conftest.py's, over each module's `folder`."""

from __future__ import annotations

import asyncio
import io
import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import numpy as np
import pytest
from PIL import Image

from mmprep.core.config import Settings
from mmprep.decoders import decode_image
from mmprep.interface.prepared import MediaItem, PreparedRequest, SamplingParams
from mmprep.model import ModelFolder
from mmprep.processors import Processor, load_processor
from mmprep.render import Renderer
from tests.support.chat import chat, data_url, image, png_data_url, video
from tests.support.media import MEDIA
from tests.support.model_folder import as_transformers
from tests.support.servers import LiveServer

if TYPE_CHECKING:
    from mmprep.engines.transformers_engine import TransformersEngine

REASON = "needs torch, torchvision and transformers (pip install torch torchvision transformers)"


class FamilyServer(LiveServer):
    """mmprep on a family's model folder (served under the folder's name), on the echo engine."""

    def __init__(self, folder: Path):
        super().__init__(Settings(model=folder))
        self.model = folder.name

    def ask(self, *parts: dict, **extra) -> httpx.Response:
        """A chat of one user message of `parts`, as many tokens allowed as the echo needs."""
        body = chat(*parts, model=self.model, max_tokens=1_000_000, **extra)
        return httpx.post(f"{self.url}/v1/chat/completions", json=body, timeout=120)

    def render(self, *parts: dict, **extra) -> httpx.Response:
        """The same chat through vLLM's render route."""
        body = chat(*parts, model=self.model, **extra)
        return httpx.post(f"{self.url}/v1/chat/completions/render", json=body, timeout=120)


def account(answer: httpx.Response) -> dict:
    """The echo engine's account of a chat: what the model would get."""
    assert answer.status_code == 200, answer.text
    return json.loads(answer.json()["choices"][0]["message"]["content"])


def check_a_video_is_refused(server: FamilyServer, family: str) -> None:
    """A family that takes images only refuses a video beside an image, naming itself and the part."""
    answer = server.ask(image(png_data_url(64, 48)), video(data_url(MEDIA / "224p_6_vp9.webm", "video/webm")))
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (
        error["code"] == "unsupported_content_type" and error["param"] == "messages[0].content[1].video_url"
    )
    assert family in error["message"] and "video" in error["message"]


def transformers_processor(folder: Path):
    """The folder as mmprep loads it, and transformers' AutoProcessor for it (the tests skipped
    where torch, torchvision or transformers is missing)."""
    pytest.importorskip("torch", reason=REASON)
    pytest.importorskip("torchvision", reason=REASON)
    transformers = pytest.importorskip("transformers", reason=REASON)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        processor = transformers.AutoProcessor.from_pretrained(str(folder))
    return ModelFolder.load(folder), processor


# -- pictures and chats ---------------------------------------------------------------------


def noise(height: int, width: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed + height + width).integers(0, 256, (height, width, 3), dtype=np.uint8)


def exif_jpeg(height: int, width: int, orientation: int) -> bytes:
    """A JPEG stored `height` x `width` whose EXIF orientation turns it (6: 90 degrees)."""
    stored = Image.fromarray(noise(height, width, 7))
    exif = Image.Exif()
    exif[0x0112] = orientation
    out = io.BytesIO()
    stored.save(out, "JPEG", quality=90, exif=exif)
    return out.getvalue()


def four_pictures() -> list[np.ndarray]:
    """The pictures of four_images_chat: a wide one, an odd size, an EXIF-turned JPEG (stored
    1000 wide, upright 1000 tall) and a 1080p one."""
    turned = decode_image(exif_jpeg(300, 1000, 6)).pixels
    assert turned.shape == (1000, 300, 3)
    return [noise(300, 1000), noise(97, 131), turned, noise(1080, 1920)]


def image_items(
    pictures: list[np.ndarray], processor: Processor, param: Callable[[int], str] = "image {}".format
) -> list[MediaItem]:
    """The pictures as the service hands them on with a vision processor, each named by
    `param` of its position."""
    return [
        MediaItem("image", pixels, {}, param(i), processed=processor.process_image(pixels))
        for i, pixels in enumerate(pictures)
    ]


def _part(kind: str, index: int) -> dict:
    return {"type": kind, "media_index": index}


def _text(text: str) -> dict:
    return {"type": "text", "text": text}


def four_images_chat(system: str = "Answer briefly.") -> list[dict]:
    """A system prompt, two images in a row after it, an answer, then a turn of text and
    images in turn."""
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": [_part("image", 0), _part("image", 1), _text("What is this image? 🖼")]},
        {"role": "assistant", "content": "A picture."},
        {
            "role": "user",
            "content": [_text("And these?"), _part("image", 2), _text("please answer"), _part("image", 3)],
        },
    ]


def video_chat(last: str) -> list[dict]:
    """A system prompt, a video, text and an image, an answer, then text and a third item of
    the modality `last`."""
    return [
        {"role": "system", "content": "Watch closely."},
        {"role": "user", "content": [_part("video", 0), _text("Und das? 🎬"), _part("image", 1)]},
        {"role": "assistant", "content": "Zwei Dinge."},
        {"role": "user", "content": [_text("Again:"), _part(last, 2)]},
    ]


def render_as_transformers(
    model, ours: Processor, conversation: list[dict], return_tensors: str = "np", **options
):
    """four_pictures in `conversation`, through mmprep's renderer (processed by `ours`) and
    through transformers' processor (`model`'s; the chat template's text tokenized as vLLM
    tokenizes a rendered chat: the template wrote the BOS itself), held to the same text and
    ids: (mmprep's prompt, its items, transformers' output) for the family's own checks."""
    loaded, processor = model
    pictures = four_pictures()
    media = image_items(pictures, ours)
    prompt = Renderer(loaded).render(conversation, media)
    text = processor.apply_chat_template(as_transformers(conversation), add_generation_prompt=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = processor(
            text=text, images=pictures, add_special_tokens=False, return_tensors=return_tensors, **options
        )
    assert prompt.text == text
    assert list(prompt.token_ids) == expected["input_ids"][0].tolist()
    return prompt, media, expected


# -- the transformers engine ----------------------------------------------------------------


def check_the_engine_answers_as_transformers(folder: Path, **options) -> None:
    """A tiny random model's transformers engine: its greedy ids and logprobs (the top 3 each
    step) on mmprep's prompt and tensors (a wide image and an odd-size one around a line of
    text) are the model's own on transformers' processor output. `options` go to both
    processors."""
    transformers = pytest.importorskip("transformers", reason=REASON)
    torch = pytest.importorskip("torch", reason=REASON)
    from mmprep.engines.transformers_engine import TransformersEngine  # imports torch

    pictures = [noise(300, 1000), noise(97, 131)]
    messages = [
        {"role": "user", "content": [_part("image", 0), _text("Describe this image."), _part("image", 1)]}
    ]
    loaded = ModelFolder.load(folder)
    media = image_items(
        pictures, load_processor(folder, **options), lambda i: f"messages[0].content[{2 * i}].image_url"
    )
    prompt = Renderer(loaded).render(messages, media)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = transformers.AutoProcessor.from_pretrained(str(folder))
        text = theirs.apply_chat_template(as_transformers(messages), add_generation_prompt=True)
        inputs = theirs(text=text, images=pictures, add_special_tokens=False, return_tensors="pt", **options)
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
    logprobs = _engine_logprobs(TransformersEngine(folder, device="cpu"), request)
    assert [logprob.token_id for logprob in logprobs] == expected_ids
    for step, logprob in enumerate(logprobs):
        values, ids = expected[step].topk(3)
        assert [token for token, _ in logprob.top] == ids.tolist()
        assert [value for _, value in logprob.top] == pytest.approx(values.tolist(), abs=1e-5)


def _engine_logprobs(engine: TransformersEngine, request: PreparedRequest) -> list:
    """Every logprob of the engine's answer, started and stopped around it."""
    asyncio.run(engine.start())
    try:

        async def answer() -> list:
            return [logprob async for output in engine.generate(request) for logprob in output.logprobs]

        return asyncio.run(answer())
    finally:
        asyncio.run(engine.stop())
