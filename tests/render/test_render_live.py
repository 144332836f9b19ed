"""The rendered prompt against transformers itself, run here and now on real decoded frames:
skipped unless torch and transformers are installed (CI's 3.13 run checks the stored goldens
in test_render.py instead). Also checks that splicing each item's tokens into the once-
tokenized text equals tokenizing the text transformers expands."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from mmprep.decoders import decode_video
from mmprep.interface.prepared import MediaItem
from mmprep.model import ModelFolder
from mmprep.render import Renderer
from tests.support.media import MEDIA
from tests.support.model_folder import as_transformers, make_model_folder, video_item

pytestmark = pytest.mark.slow  # transformers (and torch) as the oracle

REASON = "needs torch and transformers (pip install torch transformers)"
pytest.importorskip("torch", reason=REASON)
transformers = pytest.importorskip("transformers", reason=REASON)

VIDEOS = {"webm": (MEDIA / "224p_6_vp9.webm", 5), "mp4": (MEDIA / "rotated_90_h264.mp4", 6)}
CONVERSATION = [
    {"role": "system", "content": "Watch closely."},
    {
        "role": "user",
        "content": [
            {"type": "video", "media_index": 0},
            {"type": "text", "text": "Und das? 🎬"},
            {"type": "image", "media_index": 1},
        ],
    },
    {"role": "assistant", "content": "Zwei Dinge."},
    {"role": "user", "content": [{"type": "text", "text": "Again:"}, {"type": "video", "media_index": 2}]},
]


@pytest.fixture(scope="module", params=["qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_5", "qwen3_5_moe"])
def family(request, tmp_path_factory):
    path = make_model_folder(request.param, tmp_path_factory.mktemp(request.param) / request.param)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        processor = transformers.AutoProcessor.from_pretrained(str(path))
    return ModelFolder.load(path), processor


def media(folder: ModelFolder, videos: dict = VIDEOS) -> list[MediaItem]:
    items = []
    for name in ("webm", "image", "mp4"):
        if name == "image":
            pixels = np.random.default_rng(3).integers(0, 256, (90, 120, 3), dtype=np.uint8)
            items.append(
                MediaItem("image", pixels, {}, "image", processed=folder.processor.process_image(pixels))
            )
            continue
        path, frames = videos[name]
        items.append(video_item(decode_video(path.read_bytes(), num_frames=frames), folder.processor, name))
    return items


def test_the_prompt_equals_transformers_on_decoded_frames(family):
    folder, processor = family
    from transformers.video_utils import VideoMetadata

    items = media(folder)
    prompt = Renderer(folder).render(CONVERSATION, items)
    text = processor.apply_chat_template(as_transformers(CONVERSATION), add_generation_prompt=True)
    videos = [item for item in items if item.kind == "video"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = processor(
            text=text,
            images=[items[1].tensor],
            videos=[v.tensor for v in videos],
            video_metadata=[VideoMetadata(**v.hf_metadata) for v in videos],
            do_sample_frames=False,
        )
    assert prompt.text == text
    assert list(prompt.token_ids) == list(expected["input_ids"][0])
    # the grids we expanded with are the ones transformers made
    assert [v.processed.tensors["video_grid_thw"].tolist() for v in videos] == [
        [row] for row in np.asarray(expected["video_grid_thw"]).tolist()
    ]


def assert_splicing_is_tokenizing(folder: ModelFolder, conversation: list, items: list[MediaItem]) -> None:
    """The spliced ids equal the tokenizer's ids of their own decoded text."""
    prompt = Renderer(folder).render(conversation, items)
    expanded = folder.tokenizer.decode(list(prompt.token_ids), skip_special_tokens=False)
    assert folder.tokenizer.encode(expanded, add_special_tokens=False).ids == list(prompt.token_ids)


def test_splicing_equals_tokenizing_the_expanded_text(family):
    folder, _ = family
    assert_splicing_is_tokenizing(folder, CONVERSATION, media(folder))


# InternVL (families/mmprep/families/internvl.py): transformers' processor takes the videos of one call as
# one batch, so they must have as many frames each.
INTERNVL_VIDEOS = {"webm": (MEDIA / "224p_6_vp9.webm", 6), "mp4": (MEDIA / "rotated_90_h264.mp4", 6)}
INTERNVL_CONVERSATION = [
    *CONVERSATION[:3],
    # text glued to the video: transformers tokenizes "Again" and "Frame1: " as one text
    {"role": "user", "content": [{"type": "text", "text": "Again"}, {"type": "video", "media_index": 2}]},
]


@pytest.fixture(scope="module")
def internvl(tmp_path_factory):
    path = make_model_folder("internvl", tmp_path_factory.mktemp("internvl") / "internvl")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        processor = transformers.AutoProcessor.from_pretrained(str(path))
    folder = ModelFolder.load(path)
    items = media(folder, INTERNVL_VIDEOS)  # the 90 x 120 image: six tiles and the thumbnail
    return folder, processor, items


def test_internvl_prompt_and_tiles_equal_transformers_on_decoded_frames(internvl):
    """The ids InternVLProcessor gives (each image's tiles, each video's `Frame{i}:` lines),
    and its one pixel_values: every item's tiles in prompt order, to the bit."""
    folder, processor, items = internvl
    prompt = Renderer(folder).render(INTERNVL_CONVERSATION, items)
    text = processor.apply_chat_template(as_transformers(INTERNVL_CONVERSATION), add_generation_prompt=True)
    videos = [item for item in items if item.kind == "video"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = processor(
            text=text, images=[items[1].tensor], videos=[v.tensor for v in videos], return_tensors="pt"
        )
    assert prompt.text == text
    assert list(prompt.token_ids) == expected["input_ids"][0].tolist()
    tiles = [item.processed.tensors[folder.processor.tensor_names(item.kind)[0]] for item in items]
    np.testing.assert_array_equal(np.concatenate(tiles), expected["pixel_values"].numpy())


def test_internvl_splicing_equals_tokenizing_the_expanded_text(internvl):
    folder, _, items = internvl
    assert_splicing_is_tokenizing(folder, INTERNVL_CONVERSATION, items)
