"""A vLLM-compatible upstream for the tests: an OpenAI chat-completions server that reads
media the way vLLM does, and has no network.

- A video_url `data:video/jpeg;base64,<f1>,<f2>,...` is split on commas and each frame
  decoded as a JPEG, keeping the first `num_frames` of media_io_kwargs.video (32 unless
  told), as vLLM's VideoMediaIO does; frames_indices, total_num_frames and duration are
  checked as vLLM checks them. An image_url data URL is decoded with Pillow.
- Any other URL (http, https, a real video file) is refused: the upstream must never have
  to fetch or decode a video itself.
- A prompt that does not fit its context (prompt tokens + max_tokens > max_model_len) is
  refused with a 400, as vLLM refuses it; an unknown model is a 404.

The answer is a JSON account of what it decoded, streamed or not in OpenAI's shapes; it
also keeps the decoded frames (`received`) so a test can compare them with mmprep's own.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import io
import json
import time
from typing import Any

import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from PIL import Image, UnidentifiedImageError

CHARS_PER_TOKEN = 16
TOKENS_PER_FRAME = 10


class Refused(Exception):
    def __init__(self, status: int, message: str, kind: str = "BadRequestError"):
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind


class VllmLike:
    def __init__(self, model: str = "test-vlm", max_model_len: int = 4096):
        self.model, self.max_model_len = model, max_model_len
        self.received: list[dict[str, Any]] = []  # per request: the body and what was decoded
        self.app = FastAPI()
        self.app.post("/v1/chat/completions")(self.chat)

    async def chat(self, request: Request) -> Response:
        body = await request.json()
        try:
            if body.get("model") != self.model:
                raise Refused(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError")
            media = await asyncio.to_thread(self._decode_media, body)  # JPEG decoding, off the loop
            answer, prompt_tokens = self._answer(body, media)
        except Refused as refused:
            # vLLM's error shape: OpenAI's, with the status as an integer code.
            error = {"message": refused.message, "type": refused.kind, "param": None, "code": refused.status}
            return JSONResponse({"error": error}, status_code=refused.status)
        self.received.append({"body": body, **media})
        max_tokens = body.get("max_tokens")
        pieces = [answer[i : i + CHARS_PER_TOKEN] for i in range(0, len(answer), CHARS_PER_TOKEN)]
        finish = "stop"
        if max_tokens is not None and len(pieces) > max_tokens:
            pieces, finish = pieces[:max_tokens], "length"
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": len(pieces), "total_tokens": prompt_tokens + len(pieces)}
        if body.get("stream"):
            include_usage = (body.get("stream_options") or {}).get("include_usage", False)
            return StreamingResponse(_events(self.model, pieces, finish, usage if include_usage else None), media_type="text/event-stream")
        return JSONResponse(
            {
                "id": "chatcmpl-upstream", "object": "chat.completion", "created": int(time.time()), "model": self.model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "".join(pieces)}, "finish_reason": finish}],
                "usage": usage,
            }
        )

    def _decode_media(self, body: dict) -> dict[str, list]:
        video_kwargs = (body.get("media_io_kwargs") or {}).get("video") or {}
        videos, images = [], []
        for message in body["messages"]:
            content = message.get("content")
            for part in content if isinstance(content, list) else []:
                if part["type"] == "video_url":
                    videos.append(load_video(part["video_url"]["url"], video_kwargs))
                elif part["type"] == "image_url":
                    images.append(load_image(part["image_url"]["url"]))
        return {"videos": videos, "images": images}

    def _answer(self, body: dict, media: dict) -> tuple[str, int]:
        text = _text_of(body["messages"])
        frames = sum(len(frames) for frames, _ in media["videos"]) + len(media["images"])
        prompt_tokens = len(text.split()) + TOKENS_PER_FRAME * frames
        asked = body.get("max_tokens") or 0
        if prompt_tokens + asked > self.max_model_len:
            raise Refused(
                400,
                f"This model's maximum context length is {self.max_model_len} tokens. However, you requested "
                f"{prompt_tokens + asked} tokens ({prompt_tokens} in the messages, {asked} in the completion). "
                "Please reduce the length of the messages or completion.",
            )
        answer = {
            "text": text,
            "videos": [{"shape": list(frames.shape), "metadata": metadata} for frames, metadata in media["videos"]],
            "images": [{"shape": list(image.shape)} for image in media["images"]],
            "params": {key: body.get(key) for key in ("temperature", "top_p", "seed", "stop", "max_tokens")},
        }
        return json.dumps(answer, separators=(",", ":")), prompt_tokens


def _text_of(messages: list[dict]) -> str:
    pieces = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            pieces.append(content)
        else:
            pieces += [part["text"] for part in content or [] if part.get("type") == "text"]
    return "\n".join(pieces)


def load_video(url: str, kwargs: dict) -> tuple[np.ndarray, dict]:
    """As vLLM's VideoMediaIO.load_base64 for video/jpeg, with its checks."""
    media_type, data = _data_url(url)
    if media_type != "video/jpeg":
        raise Refused(400, f"this upstream takes pre-decoded video only (data:video/jpeg), not {media_type}")
    num_frames = kwargs.get("num_frames", 32)
    parts = data.split(",", num_frames)[:num_frames] if num_frames > 0 else data.split(",")
    frames = np.stack([_jpeg(part) for part in parts])
    total = len(frames)
    indices = kwargs.get("frames_indices")
    if indices is not None and (
        not isinstance(indices, list) or not all(isinstance(i, int) for i in indices) or len(indices) != total
    ):
        raise Refused(400, f"frames_indices must be {total} integers, one per frame sent")
    total_num_frames = kwargs.get("total_num_frames", total)
    if not isinstance(total_num_frames, int) or total_num_frames < total:
        raise Refused(400, f"total_num_frames ({total_num_frames}) must be an integer >= the {total} frames sent")
    fps = float(kwargs.get("fps", 1))
    duration = kwargs.get("duration", total_num_frames / fps if fps > 0 else 0.0)
    if not isinstance(duration, int | float) or duration < 0:
        raise Refused(400, "duration must be a non-negative number")
    metadata = {
        "total_num_frames": total_num_frames,
        "fps": fps,
        "duration": duration,
        "video_backend": "jpeg_sequence",
        "frames_indices": indices if indices is not None else list(range(total)),
        "do_sample_frames": kwargs.get("do_sample_frames", False),
    }
    return frames, metadata


def load_image(url: str) -> np.ndarray:
    media_type, data = _data_url(url)
    if not media_type.startswith("image/"):
        raise Refused(400, f"an image_url must hold an image, not {media_type}")
    return _jpeg(data)


def _data_url(url: str) -> tuple[str, str]:
    if not url.startswith("data:") or ";base64," not in url:
        raise Refused(400, f"this upstream has no network: it takes data URLs only, not {url[:40]!r}")
    media_type, _, data = url.removeprefix("data:").partition(";base64,")
    return media_type.lower(), data


def _jpeg(data: str) -> np.ndarray:
    try:
        return np.asarray(Image.open(io.BytesIO(base64.b64decode(data, validate=True))).convert("RGB"))
    except (binascii.Error, UnidentifiedImageError, OSError) as error:
        raise Refused(400, f"a frame is not a base64 image: {error}") from error


async def _events(model: str, pieces: list[str], finish: str, usage: dict | None):
    def event(choices: list, **extra) -> str:
        chunk = {"id": "chatcmpl-upstream", "object": "chat.completion.chunk", "created": int(time.time()), "model": model}
        return "data: " + json.dumps({**chunk, "choices": choices, **extra}) + "\n\n"

    yield event([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
    for piece in pieces:
        yield event([{"index": 0, "delta": {"content": piece}, "finish_reason": None}])
    yield event([{"index": 0, "delta": {}, "finish_reason": finish}])
    if usage is not None:
        yield event([], usage=usage)
    yield "data: [DONE]\n\n"
