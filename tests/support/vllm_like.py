"""The servers mmprep's upstream engines (`--engine openai`, `--engine vllm-generate`) talk
to: real servers that answer as vLLM does, not mocks.

A vLLM-compatible upstream (`VllmLike`, for `--engine openai`): an OpenAI chat-completions
server that reads media the way vLLM does, and has no network.

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

`VllmGenerateLike`: vLLM's token-in /inference/v1/generate (`--engine vllm-generate`), which
checks each request as vLLM 0.33.0 does and answers token ids.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import io
import json
import time
from itertools import pairwise
from typing import Any

import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from PIL import Image, UnidentifiedImageError

from tests.support.vllm_cases import MERGE

# -- vLLM's OpenAI server (--engine openai) ---------------------------------------------

CHARS_PER_TOKEN = 16
TOKENS_PER_FRAME = 10


class Refused(Exception):
    def __init__(self, status: int, message: str, kind: str = "BadRequestError"):
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind


class Lifecycle:
    """vLLM's GET /version ({"version": ...}) and GET /health (an empty 200; a 503 while its
    engine is dead). Set `version` or `healthy` to change what they answer; `health_probes`
    counts the probes."""

    version = "0.33.0"
    healthy = True
    health_probes = 0

    def serve_lifecycle(self, app: FastAPI) -> None:
        app.get("/version")(self.version_route)
        app.get("/health")(self.health_route)

    async def version_route(self) -> dict:
        return {"version": self.version}

    async def health_route(self) -> Response:
        self.health_probes += 1
        return Response(status_code=200 if self.healthy else 503)


class VllmLike(Lifecycle):
    def __init__(self, model: str = "test-vlm", max_model_len: int = 4096):
        self.model, self.max_model_len = model, max_model_len
        self.received: list[dict[str, Any]] = []  # per request: the body and what was decoded
        self.app = FastAPI()
        self.app.post("/v1/chat/completions")(self.chat)
        self.app.post("/v1/completions")(self.completions)
        self.serve_lifecycle(self.app)

    async def completions(self, request: Request) -> Response:
        """OpenAI's /v1/completions: its answer an account of the prompt and the sampling
        fields, in pieces of CHARS_PER_TOKEN characters, cut at max_tokens, streamed or whole."""
        body = await request.json()
        if body.get("model") != self.model:
            error = {"message": f"The model `{body.get('model')}` does not exist.", "code": 404}
            return JSONResponse({"error": error}, status_code=404)
        self.received.append({"body": body})
        params = {
            key: body.get(key) for key in ("temperature", "top_p", "seed", "stop", "max_tokens", "top_k")
        }
        answer = json.dumps({"prompt": body.get("prompt"), "params": params}, separators=(",", ":"))
        pieces = [answer[i : i + CHARS_PER_TOKEN] for i in range(0, len(answer), CHARS_PER_TOKEN)]
        finish = "stop"
        if body.get("max_tokens") is not None and len(pieces) > body["max_tokens"]:
            pieces, finish = pieces[: body["max_tokens"]], "length"
        prompt = body.get("prompt")
        prompt_tokens = len(prompt) if isinstance(prompt, list) else len(str(prompt).split())
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(pieces),
            "total_tokens": prompt_tokens + len(pieces),
        }
        head = {
            "id": "cmpl-upstream",
            "object": "text_completion",
            "created": int(time.time()),
            "model": self.model,
        }
        if not body.get("stream"):
            choice = {"index": 0, "text": "".join(pieces), "logprobs": None, "finish_reason": finish}
            return JSONResponse({**head, "choices": [choice], "usage": usage})

        async def events():
            for number, piece in enumerate(pieces):
                last = number == len(pieces) - 1
                choice = {
                    "index": 0,
                    "text": piece,
                    "logprobs": None,
                    "finish_reason": finish if last else None,
                }
                yield "data: " + json.dumps({**head, "choices": [choice]}) + "\n\n"
            if (body.get("stream_options") or {}).get("include_usage"):
                yield "data: " + json.dumps({**head, "choices": [], "usage": usage}) + "\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

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
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(pieces),
            "total_tokens": prompt_tokens + len(pieces),
        }
        if body.get("stream"):
            include_usage = (body.get("stream_options") or {}).get("include_usage", False)
            return StreamingResponse(
                _events(self.model, pieces, finish, usage if include_usage else None),
                media_type="text/event-stream",
            )
        return JSONResponse(
            {
                "id": "chatcmpl-upstream",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": self.model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "".join(pieces)},
                        "finish_reason": finish,
                    }
                ],
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
                f"This model's maximum context length is {self.max_model_len} tokens. "
                f"However, you requested {prompt_tokens + asked} tokens ({prompt_tokens} in the messages, "
                f"{asked} in the completion). "
                "Please reduce the length of the messages or completion.",
            )
        answer = {
            "text": text,
            "videos": [
                {"shape": list(frames.shape), "metadata": metadata} for frames, metadata in media["videos"]
            ],
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
        raise Refused(
            400, f"total_num_frames ({total_num_frames}) must be an integer >= the {total} frames sent"
        )
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
        chunk = {
            "id": "chatcmpl-upstream",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
        }
        return "data: " + json.dumps({**chunk, "choices": choices, **extra}) + "\n\n"

    yield event([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
    for piece in pieces:
        yield event([{"index": 0, "delta": {"content": piece}, "finish_reason": None}])
    yield event([{"index": 0, "delta": {}, "finish_reason": finish}])
    if usage is not None:
        yield event([], usage=usage)
    yield "data: [DONE]\n\n"


# -- vLLM's token-in endpoint (POST /inference/v1/generate) -------------------------------

# What the generate-like server answers ("Hello, world!" in Qwen's vocabulary), cut at max_tokens.
ANSWER_IDS = (9707, 11, 1879, 0)


class VllmGenerateLike(Lifecycle):
    """vLLM's /inference/v1/generate for the tests, checking a request as vLLM 0.33.0's
    GenerateRequest, MultiModalFeatures and ServingTokens check it: token ids, the features'
    parallel lists and placeholder bounds, each kwargs_data item decoded (its keys, field
    types, dtypes and shapes) and its embedding count against its placeholder range, stop
    strings without detokenization refused, a prompt that fills the context. It answers ANSWER_IDS, cut
    at max_tokens, streamed as vLLM streams GenerateTokensStreamResponse or whole.

    `received` keeps each request's body and decoded items.

    `pixel_dtype`: what its render route renders an image's pixel_values to, as a vLLM
    started with --mm-device-do-normalize ("uint8", its default for the Qwen-VL families) or
    --no-mm-device-do-normalize ("float32") renders them (only the image's pixels are
    rendered: what mmprep's start-up check reads); None: no render route."""

    def __init__(self, model: str = "test-vlm", max_model_len: int = 4096, pixel_dtype: str | None = None):
        self.model, self.max_model_len = model, max_model_len
        self.pixel_dtype = pixel_dtype
        self.received: list[dict[str, Any]] = []
        self.renders = 0
        self.app = FastAPI()
        self.app.post("/inference/v1/generate")(self.generate)
        self.serve_lifecycle(self.app)
        if pixel_dtype is not None:
            self.app.post("/v1/chat/completions/render")(self.render)

    async def render(self, request: Request) -> Response:
        from mmprep.vllm.items import FieldElem, flat
        from mmprep.vllm.serde import encode_item

        body = await request.json()
        self.renders += 1
        if body.get("model") not in (None, self.model):
            error = {"message": f"The model `{body.get('model')}` does not exist.", "code": 404}
            return JSONResponse({"error": error}, status_code=404)
        pixels = np.zeros((16, 3 * 2 * 14 * 14), self.pixel_dtype)
        item = {"pixel_values": FieldElem(pixels, flat([16]))}
        return JSONResponse({"token_ids": [1], "features": {"kwargs_data": {"image": [encode_item(item)]}}})

    async def generate(self, request: Request) -> Response:
        body = await request.json()
        try:
            if body.get("model") not in (None, self.model):
                raise Refused(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError")
            items = await asyncio.to_thread(self._check, body)
        except Refused as refused:
            error = {"message": refused.message, "type": refused.kind, "param": None, "code": refused.status}
            return JSONResponse({"error": error}, status_code=refused.status)
        self.received.append({"body": body, "items": items})
        params = body["sampling_params"]
        prompt_tokens = len(body["token_ids"])
        max_tokens = params.get("max_tokens", self.max_model_len - prompt_tokens)
        tokens = list(ANSWER_IDS[:max_tokens])
        finish = "length" if len(tokens) < len(ANSWER_IDS) else "stop"
        logprobs = [
            _logprob(token, position, params.get("logprobs")) for position, token in enumerate(tokens)
        ]
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(tokens),
            "total_tokens": prompt_tokens + len(tokens),
        }
        request_id = f"generate-tokens-{body['request_id']}"
        if body.get("stream"):
            include_usage = (body.get("stream_options") or {}).get("include_usage", False)
            return StreamingResponse(
                _token_events(request_id, tokens, logprobs, finish, usage if include_usage else None),
                media_type="text/event-stream",
            )
        choice = {
            "index": 0,
            "finish_reason": finish,
            "stop_reason": None,
            "token_ids": tokens,
            "routed_experts": None,
            "sampling_mask": None,
            "weight_versions": None,
            "logprobs": {"content": logprobs} if params.get("logprobs") is not None else None,
        }
        return JSONResponse(
            {
                "request_id": request_id,
                "model": self.model,
                "created": int(time.time()),
                "usage": usage,
                "output_mode": "tokens",
                "choices": [choice],
            }
        )

    def _check(self, body: dict) -> dict[str, list]:
        from mmprep.vllm.serde import ItemFormatError, decode_item

        ids = body.get("token_ids")
        if not isinstance(ids, list) or not ids or not all(isinstance(t, int) and t >= 0 for t in ids):
            raise Refused(400, "token_ids must be a non-empty list of non-negative integers")
        params = body.get("sampling_params")
        if not isinstance(params, dict):
            raise Refused(400, "sampling_params is required")
        if params.get("stop") and params.get("detokenize", True) is False:
            raise Refused(400, "stop strings are only supported when detokenize is True")
        if len(ids) >= self.max_model_len:  # vLLM's input processor checks the prompt alone
            raise Refused(
                400,
                f"The decoder prompt (length {len(ids)}) is longer than the maximum model length of "
                f"{self.max_model_len}.",
            )
        features = body.get("features")
        if features is None:
            return {}
        hashes, ranges, data = features["mm_hashes"], features["mm_placeholders"], features.get("kwargs_data")
        if set(ranges) != set(hashes) or (data is not None and set(data) != set(hashes)):
            raise Refused(400, "mm_hashes and mm_placeholders must use the same modalities")
        items: dict[str, list] = {}
        spans = []
        for modality, modality_hashes in hashes.items():
            if len(ranges[modality]) != len(modality_hashes) or len(data[modality]) != len(modality_hashes):
                raise Refused(400, f"{modality} mm_hashes and mm_placeholders must have the same length")
            try:
                items[modality] = [decode_item(text) for text in data[modality]]
            except ItemFormatError as error:
                raise Refused(400, str(error)) from error
            for span, item in zip(ranges[modality], items[modality], strict=True):
                offset, length = span["offset"], span["length"]
                if offset + length > len(ids):
                    raise Refused(400, "mm_placeholders must remain within the token_ids sequence")
                # the Qwen-VL families' count; others' are checked on a real engine (tests/vllm_real)
                grid = item[f"{modality}_grid_thw"].data if f"{modality}_grid_thw" in item else None
                if grid is not None and int(np.prod(grid)) // MERGE**2 != length:
                    raise Refused(
                        400,
                        f"{int(np.prod(grid)) // MERGE**2} {modality} embeddings for {length} placeholders",
                    )
                spans.append((offset, offset + length))
        spans.sort()
        if any(start < end for (_, end), (start, _) in pairwise(spans)):
            raise Refused(400, "mm_placeholders must be globally non-overlapping and sorted")
        return items


def _logprob(token: int, position: int, top: int | None) -> dict | None:
    if top is None:
        return None
    sampled = {"token_id": token, "logprob": -0.25 * (position + 1), "rank": 1}
    others = [
        {"token_id": token + k, "logprob": -0.25 * (position + 1) - k, "rank": k + 1}
        for k in range(1, top + 1)
    ]
    # vLLM's order: the sampled token first, then the rest of the top k by rank.
    return {**sampled, "top_logprobs": [sampled, *others[: max(top - 1, 0)]]}


async def _token_events(request_id: str, tokens: list[int], logprobs: list, finish: str, usage: dict | None):
    for position, token in enumerate(tokens):
        last = position == len(tokens) - 1
        choice = {
            "index": 0,
            "finish_reason": finish if last else None,
            "stop_reason": None,
            "token_ids": [token],
            "routed_experts": None,
            "sampling_mask": None,
            "weight_versions": None,
            "logprobs": {"content": [logprobs[position]]} if logprobs[position] is not None else None,
        }
        yield (
            "data: "
            + json.dumps(
                {"request_id": request_id, "usage": None, "output_mode": "tokens", "choices": [choice]}
            )
            + "\n\n"
        )
    if usage is not None:
        yield (
            "data: "
            + json.dumps({"request_id": request_id, "usage": usage, "output_mode": "tokens", "choices": []})
            + "\n\n"
        )
    yield "data: [DONE]\n\n"
