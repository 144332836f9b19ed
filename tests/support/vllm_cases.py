"""What the tests of vLLM's token-in protocol (app/mmprep/vllm) share, and the tests of the
engines that speak it (tests/support/vllm_like.py's vLLM-like /inference/v1/generate checks
requests with these ids): a Qwen-VL chat prompt as the renderer expands it, media items as
mmprep's preprocessing leaves them (benchmarks/vllm_body.py sends them too), and the
protocol's cases (`CASES`, made by `build_case`), whose answers from vLLM 0.33.0 itself
tests/data/vllm/make_goldens.py stored in tests/data/vllm/goldens.json."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from mmprep.decoders import decode_image
from mmprep.interface.prepared import (
    MediaItem,
    Placeholder,
    PreparedRequest,
    SamplingParams,
    SourceImage,
    TokenPrompt,
)
from mmprep.processors import load_processor
from mmprep.vllm.options import GenerateOptions

DATA = Path(__file__).parents[1] / "data" / "vllm"

# Qwen2-VL's (and Qwen2.5-VL's, Qwen3-VL's) special token ids.
IM_START, IM_END, NEWLINE, USER, ASSISTANT = 151644, 151645, 198, 872, 77091
VISION_START, VISION_END, IMAGE_PAD, VIDEO_PAD = 151652, 151653, 151655, 151656
PADS = {"image": IMAGE_PAD, "video": VIDEO_PAD}
MERGE = 2  # spatial merge of every Qwen-VL family: 4 patches per embedding


def qwen_prompt(media: list, text_ids: tuple[int, ...] = (3838, 374, 419, 30)):
    """A Qwen-VL chat prompt as the renderer expands it: a user turn with each media item
    as <|vision_start|> pads <|vision_end|>, the text, and the assistant's turn opened.
    `media`: MediaItems with processed tensors, in prompt order."""
    ids, placeholders = [IM_START, USER, NEWLINE], []
    for index, item in enumerate(media):
        ids.append(VISION_START)
        placeholders.append(Placeholder(item.kind, index, len(ids), item.processed.num_tokens))
        ids += [PADS[item.kind]] * item.processed.num_tokens
        ids.append(VISION_END)
    ids += [*text_ids, IM_END, NEWLINE, IM_START, ASSISTANT, NEWLINE]
    return TokenPrompt(tuple(ids), tuple(placeholders))


def processed_item(
    kind: str, pixels: np.ndarray, processor, fps: float = 30.0, step: int = 15, param: str | None = None
):
    """A MediaItem as mmprep's preprocessing leaves it with --processor: frames (or an
    image) sampled every `step` source frames of a `fps` video, and their tensors."""
    if kind == "image":
        return MediaItem(
            "image",
            pixels,
            {"width": pixels.shape[1], "height": pixels.shape[0]},
            param or "messages[0].content[0].image_url",
            processed=processor.process_image(pixels),
        )
    indices = np.arange(len(pixels)) * step
    hf_metadata = {
        "total_num_frames": int(indices[-1]) + step,
        "fps": fps,
        "width": pixels.shape[2],
        "height": pixels.shape[1],
        "duration": (int(indices[-1]) + step) / fps,
        "video_backend": "pyav",
        "frames_indices": indices.tolist(),
    }
    return MediaItem(
        "video",
        pixels,
        {},
        param or "messages[0].content[0].video_url",
        timestamps=indices / fps,
        indices=indices,
        hf_metadata=hf_metadata,
        processed=processor.process_video(pixels),
    )


SMALL = {"size": {"shortest_edge": 56 * 56, "longest_edge": 28 * 28 * 30}}  # no resize for these sizes
SMALL3 = {"size": {"shortest_edge": 64 * 64, "longest_edge": 32 * 32 * 60}}

# name: (processor, overrides, media [(kind, shape or an image file's name)], mm_processor_kwargs,
# sampling, stream, extra, defaults)
CaseSpec = tuple[
    str,
    Mapping[str, object],
    list[tuple[str, tuple[int, ...] | str]],
    dict[str, object] | None,
    SamplingParams,
    bool,
    dict[str, object],
    dict[str, object],
]
# vllm serve --max-model-len of the cases: max_tokens defaults to what the prompt leaves of it
MAX_MODEL_LEN = 4096
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        "strict": True,
    },
}
CASES: dict[str, CaseSpec] = {
    "qwen2_vl_video_image": (
        "qwen2_vl",
        SMALL,
        [("video", (4, 56, 84, 3)), ("image", (56, 56, 3))],
        None,
        SamplingParams(max_tokens=5, temperature=0.0, logprobs=True, top_logprobs=2),
        False,
        {},
        {},
    ),
    "qwen2_5_vl_two_videos": (
        "qwen2_5_vl",
        SMALL,
        [("video", (2, 56, 56, 3)), ("image", (84, 84, 3)), ("video", (3, 84, 56, 3))],
        {"videos_kwargs": {"fps": 2}, "images_kwargs": {"max_pixels": 1000000}},
        SamplingParams(top_p=0.9, seed=7, stop=("\n\n",), stop_token_ids=(IM_END,), min_tokens=1, top_k=20),
        True,
        {
            "tools": [WEATHER_TOOL],
            "chat_template_kwargs": {"enable_thinking": False},
            "include_reasoning": False,
        },
        {},
    ),
    "qwen3_vl_image": (
        "qwen3_vl",
        SMALL3,
        [("image", (64, 96, 3))],
        None,
        SamplingParams(max_tokens=16),
        False,
        {"cache_salt": "tenant-7", "presence_penalty": 0.5},
        {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.05},
    ),
    "qwen3_vl_video": ("qwen3_vl", SMALL3, [("video", (3, 64, 64, 3))], None, SamplingParams(), True, {}, {}),
    # Image files, keyed by their bytes as vLLM keys an image it fetched (tests/data/vllm/images)
    "qwen2_vl_image_files": (
        "qwen2_vl",
        SMALL,
        [
            ("image_file", "rgb.png"),
            ("image_file", "rgba.png"),
            ("image_file", "gray.jpg"),
            ("image_file", "palette_trns.png"),
        ],
        None,
        SamplingParams(max_tokens=4),
        False,
        {},
        {},
    ),
}
IMAGES = DATA / "images"


@dataclass(frozen=True)
class Case:
    family: str
    temporal: int
    media: list[MediaItem]
    prepared: PreparedRequest
    options: GenerateOptions
    mm_processor_kwargs: dict | None
    model_id: str


def pattern(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Deterministic pixels from integer arithmetic alone (stable across numpy versions)."""
    index = np.arange(int(np.prod(shape)), dtype=np.uint64)
    return (
        (((index * np.uint64(2654435761) + np.uint64(seed * 977)) >> np.uint64(9)) % np.uint64(256))
        .astype(np.uint8)
        .reshape(shape)
    )


def image_file(name: str, processor, param: str) -> MediaItem:
    """An image file of tests/data/vllm/images as mmprep's preprocessing leaves it: its
    pixels, their tensors and its bytes."""
    data = (IMAGES / name).read_bytes()
    decoded = decode_image(data)
    item = processed_item("image", decoded.pixels, processor, param=param)
    return replace(item, source=SourceImage(data, decoded.converted))


def build_case(name: str) -> Case:
    family, overrides, shapes, kwargs, sampling, stream, extra, defaults = CASES[name]
    processor = load_processor(family, **overrides)
    media = [
        image_file(shape, processor, f"messages[0].content[{seed}].image_url")
        if isinstance(shape, str)
        else processed_item(
            kind, pattern(shape, seed), processor, param=f"messages[0].content[{seed}].{kind}_url"
        )
        for seed, (kind, shape) in enumerate(shapes)
    ]
    model_id = f"Qwen/{family}-test"
    options = GenerateOptions(
        model_id=model_id,
        served_model="test-vlm",
        family=family,
        temporal_patch_size=processor.video_config.temporal_patch_size,
        generation_defaults=defaults,
        max_model_len=MAX_MODEL_LEN,
    )
    prepared = PreparedRequest(
        f"chatcmpl-{name}",
        "test-vlm",
        [],
        media,
        sampling,
        stream=stream,
        mm_processor_kwargs=kwargs,
        extra=extra,
        prompt=qwen_prompt(media),
    )
    return Case(
        family, processor.video_config.temporal_patch_size, media, prepared, options, kwargs, model_id
    )


def digest(text: str) -> str:
    """A kwargs_data string as the goldens store it: its sha256 and length."""
    return f"sha256:{hashlib.sha256(text.encode()).hexdigest()}:{len(text)}"
