"""OpenAIUpstreamEngine: the prepared request forwarded to an OpenAI-compatible server
that speaks vLLM's API, such as vLLM itself.

Each video goes as the frames mmprep sampled, in vLLM's pre-decoded form: a video_url
whose URL is `data:video/jpeg;base64,<frame1>,<frame2>,...`, with the sampling metadata
in the request's `media_io_kwargs.video` (fps, frames_indices, total_num_frames, duration,
do_sample_frames false), so the upstream neither downloads nor decodes the video again.
Images go as data URLs too: only mmprep ever reaches the network. Pictures (images, video
frames) go as JPEG (quality 90, lossy) or, with --upstream-frame-format png, as PNG: vLLM
opens each frame of a data:video/jpeg URL with Pillow whatever its format, so the upstream
sees mmprep's pixels exactly. vLLM processes them again (resize, patches): for the
processor's tensors as they are, and token ids, use --engine vllm-generate (app/mmprep/vllm).

A completion (/v1/completions) goes to the upstream's /v1/completions, its prompt as the
client gave it. The client's choice of streaming is the upstream's; usage and finish reasons are the
upstream's; an upstream error keeps its status and message.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import numpy as np
from PIL import Image

from ..core.config import Settings
from ..core.errors import read_error_body
from ..interface.engine import EngineHTTPError, EngineOutput, FinishReason
from ..interface.prepared import MediaItem, PreparedRequest, SamplingParams
from ..modalities import MODALITIES, modality_of
from .probing import ProbedPool

JPEG_QUALITY = 90
PNG_LEVEL = 1  # zlib's: lossless at any level; on a 720p photograph 1 is 7x faster than 6, 12% larger
log = logging.getLogger("mmprep.engines")


PROBE_INTERVAL = 2.0  # seconds between health probes of the upstream (--worker-probe-interval's default)


class UpstreamClient(ProbedPool):
    """What an engine that forwards requests to a model server keeps: one endpoint, one
    connection pool (made at start, closed at stop), the bearer token and the timeouts.

    Readiness is the upstream's: `GET <root>/health` (vLLM's: 200, or 503 while its engine is
    dead) at start and every `probe_interval` seconds in the background (ProbedPool). A
    server without /health (404) is probed at `GET <url>/models`, the OpenAI API's, instead.
    An upstream down at start is logged, not fatal: it may come up later."""

    def __init__(
        self,
        endpoint: str,
        api_key: str | None,
        connect_timeout: float,
        read_timeout: float,
        base_url: str = "",
        probe_interval: float = PROBE_INTERVAL,
    ):
        super().__init__(probe_interval, connect_timeout)
        self._endpoint = endpoint
        self._base_url = base_url.rstrip("/")  # --upstream-url: the probes' root
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = httpx.Timeout(read_timeout, connect=connect_timeout)
        self._probe_path = "/health"
        self.healthy = False

    async def start(self) -> None:
        await self._start(httpx.AsyncClient(timeout=self._timeout, headers=self._headers))

    def ready(self) -> bool:
        return self._client is not None and self.healthy

    async def reached(self) -> None:
        """Called when a probe finds the upstream up after it was not (at start, or later)."""

    async def probe(self, first: bool = False) -> None:
        was = self.healthy
        reason = await self._probe()
        if reason is None and not was:
            log.info("the upstream model server is reachable", extra={"upstream": self._base_url})
            await self.reached()
        elif reason is not None and first:
            log.warning(
                "the upstream model server is not healthy at start (%s): /ready answers 503 until it is",
                reason,
                extra={"upstream": self._base_url},
            )
        elif reason is not None and was:
            log.warning(
                "the upstream model server is unhealthy: %s", reason, extra={"upstream": self._base_url}
            )

    async def _probe(self) -> str | None:
        """One probe: sets `healthy`; returns None, or why the upstream is not healthy."""
        reason = await self._ask_health()
        if reason == "404" and self._probe_path == "/health":
            self._probe_path = "/models"  # an OpenAI-compatible server without vLLM's /health
            reason = await self._ask_health()
        self.healthy = reason is None
        return None if reason is None else f"GET {self._probe_url()}: {reason}"

    def _probe_url(self) -> str:
        if self._probe_path == "/health":
            return server_root(self._base_url) + "/health"
        return self._base_url + "/models"

    async def _ask_health(self) -> str | None:
        try:
            response = await self._http.get(self._probe_url(), timeout=self._probe_timeout)
        except httpx.HTTPError as error:
            return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        return None if response.status_code == 200 else str(response.status_code)


class OpenAIUpstreamEngine(UpstreamClient):
    # Every field goes on to the upstream, which honours or refuses it; logprobs too.
    accepted_fields = None
    gives_logprobs = None

    def __init__(
        self,
        url: str,
        model: str,
        api_key: str | None = None,
        connect_timeout: float = 2.0,
        read_timeout: float = 300.0,
        probe_interval: float = PROBE_INTERVAL,
        frame_format: str = "jpeg",
    ):
        if frame_format not in PICTURE_ENCODERS:
            raise ValueError(f"frame_format: one of {', '.join(PICTURE_ENCODERS)}, not {frame_format!r}")
        super().__init__(
            url.rstrip("/") + "/chat/completions", api_key, connect_timeout, read_timeout, url, probe_interval
        )
        self._completions = url.rstrip("/") + "/completions"
        self._model = model
        self._frame_format = frame_format  # how pictures go: "jpeg" or "png"

    async def generate(self, request: PreparedRequest) -> AsyncGenerator[EngineOutput, None]:
        if request.completion is not None:
            endpoint, body = self._completions, self.completion_request(request)
        else:  # JPEG or PNG encoding, off the loop
            endpoint, body = self._endpoint, await asyncio.to_thread(self.upstream_request, request)
        with transport_errors():
            if request.stream:
                async for output in self._stream(endpoint, body):
                    yield output
            else:
                yield await self._complete(endpoint, body)

    def completion_request(self, request: PreparedRequest) -> dict[str, Any]:
        """A completion's request as the upstream's /v1/completions gets it: the prompt as the
        client gave it (text, or token ids), the sampling fields, the client's other fields."""
        prompt = request.completion
        body: dict[str, Any] = {
            **request.extra,
            "model": self._model,
            "prompt": list(prompt) if isinstance(prompt, tuple) else prompt,
            "stream": request.stream,
            **_sampling_fields(request.sampling),
        }
        sampling = request.sampling
        tokens = {"top_k": sampling.top_k, "stop_token_ids": list(sampling.stop_token_ids) or None}
        tokens |= {"ignore_eos": sampling.ignore_eos or None, "min_tokens": sampling.min_tokens or None}
        body |= {key: value for key, value in tokens.items() if value is not None}
        if request.stream:
            body["stream_options"] = {"include_usage": True}  # usage comes from the upstream
        return body

    def upstream_request(self, request: PreparedRequest) -> dict[str, Any]:
        """The chat request the upstream gets: media as data URLs, vLLM's video metadata."""
        urls = _data_urls(request.media, self._frame_format)
        body: dict[str, Any] = {
            **request.extra,  # the client's other fields (tools, top_k, ...), as it sent them
            "model": self._model,
            "messages": [_with_urls(message, request.media, urls) for message in request.messages],
            "stream": request.stream,
            **_sampling_fields(request.sampling),
        }
        if request.stream:
            body["stream_options"] = {"include_usage": True}  # usage comes from the upstream
        body.update(_media_io_kwargs(request.media))
        processor_kwargs = request.processor_kwargs()  # the client's over --mm-processor-kwargs
        if processor_kwargs is not None:
            body["mm_processor_kwargs"] = processor_kwargs
        return body

    async def _complete(self, endpoint: str, body: dict) -> EngineOutput:
        response = await self._http.post(endpoint, json=body)
        if response.status_code != 200:
            raise upstream_error(response.status_code, response.content)
        try:
            answer = response.json()
            choice = answer["choices"][0]
            usage = answer.get("usage") or {}
            return EngineOutput(
                text=_text(choice, "message"),
                finish_reason=choice.get("finish_reason") or "stop",
                prompt_tokens=usage.get("prompt_tokens"),
                completion_tokens=usage.get("completion_tokens"),
            )
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as error:
            raise bad_answer(response.text) from error

    async def _stream(self, endpoint: str, body: dict) -> AsyncIterator[EngineOutput]:
        finish: FinishReason | None = None
        usage: dict[str, Any] = {}
        async with self._http.stream("POST", endpoint, json=body) as response:
            async for chunk in sse_chunks(response):
                usage = chunk.get("usage") or usage
                for choice in chunk.get("choices") or []:
                    text = _text(choice, "delta")
                    if text:
                        yield EngineOutput(text=text)
                    finish = choice.get("finish_reason") or finish
        yield EngineOutput(
            finish_reason=finish or "stop",
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
        )


def _text(choice: dict, part: str) -> str:
    """A choice's text: a completion's `text`, else a chat's message (or delta) content."""
    if "text" in choice:
        return choice["text"] or ""
    return (choice[part] if part == "message" else choice.get(part) or {}).get("content") or ""


# -- the request ----------------------------------------------------------------------


def _data_urls(media: list[MediaItem], frame_format: str) -> dict[int, str]:
    """A data URL per distinct tensor (the same video twice is encoded once), each picture
    in `frame_format`."""
    encode = PICTURE_ENCODERS[frame_format]
    urls: dict[int, str] = {}
    for item in media:
        if id(item.tensor) not in urls:
            urls[id(item.tensor)] = modality_of(item).data_url(item, encode, frame_format)
    return urls


def _jpeg_base64(pixels: np.ndarray) -> str:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG", quality=JPEG_QUALITY)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _png_base64(pixels: np.ndarray) -> str:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG", compress_level=PNG_LEVEL)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


# --upstream-frame-format: how a picture (an image, a video frame) goes to the upstream
PICTURE_ENCODERS = {"jpeg": _jpeg_base64, "png": _png_base64}


def _with_urls(message: dict, media: list[MediaItem], urls: dict[int, str]) -> dict:
    """The message with each media placeholder back as an OpenAI image_url / video_url part."""
    content = message.get("content")
    if not isinstance(content, list):
        return message
    parts = []
    for part in content:
        if part["type"] in MODALITIES:
            key = MODALITIES[part["type"]].part_type
            part = {"type": key, key: {"url": urls[id(media[part["media_index"]].tensor)]}}
        parts.append(part)
    return {**message, "content": parts}


def _sampling_fields(sampling: SamplingParams) -> dict[str, Any]:
    fields = {
        "max_tokens": sampling.max_tokens,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "seed": sampling.seed,
        "stop": list(sampling.stop) or None,
    }
    return {key: value for key, value in fields.items() if value is not None}


def _media_io_kwargs(media: list[MediaItem]) -> dict:
    """`media_io_kwargs` for the request's videos (vLLM's VideoMediaIO reads it by the
    modality's name), or nothing where it has none. vLLM takes one set per request, so
    videos sampled differently cannot share one request."""
    chosen, first, name = None, None, None
    for item in media:
        if not modality_of(item).timed:
            continue
        name = item.kind
        kwargs = _vllm_video_metadata(item)
        if chosen is None:
            chosen, first = kwargs, item.param
        elif kwargs != chosen:
            raise EngineHTTPError(
                f"{item.param} and {first} were sampled differently, but a vLLM upstream takes one set of "
                "video metadata per request (media_io_kwargs.video): send these videos in separate requests",
                400,
                "conflicting_video_metadata",
                item.param,
            )
    return {} if chosen is None else {"media_io_kwargs": {name: chosen}}


def _vllm_video_metadata(item: MediaItem) -> dict:
    """What vLLM's VideoMediaIO reads for a data:video/jpeg URL. num_frames is the frame
    count sent: vLLM keeps only the first num_frames frames (32 unless told), and then
    refuses frames_indices of another length."""
    meta = item.hf_metadata
    if meta is None:
        raise ValueError(f"{item.param}: a video item comes with transformers' VideoMetadata fields")
    return {
        "num_frames": len(item.tensor),
        "fps": meta["fps"],
        "frames_indices": list(meta["frames_indices"]),
        "total_num_frames": meta["total_num_frames"],
        "duration": meta["duration"],
        "do_sample_frames": False,
    }


def server_root(url: str) -> str:
    """The server's root: --upstream-url may be given with the OpenAI /v1 suffix."""
    return url.rstrip("/").removesuffix("/v1")


# -- the answer (shared with the other engines that forward to a server: vllm_generate.py) --


@contextmanager
def transport_errors() -> Iterator[None]:
    """httpx's failures to reach or hear from the upstream, as the errors a client sees."""
    try:
        yield
    except httpx.TimeoutException as error:
        raise EngineHTTPError(
            f"the upstream model server timed out: {error}", 504, "upstream_timeout"
        ) from error
    except httpx.TransportError as error:
        raise EngineHTTPError(
            f"the upstream model server cannot be reached: {type(error).__name__}: {error}",
            502,
            "upstream_unreachable",
        ) from error


async def sse_chunks(response: httpx.Response) -> AsyncIterator[dict]:
    """The JSON chunks of a streamed answer up to `data: [DONE]`; an error status or an
    error event raises the upstream's error."""
    if response.status_code != 200:
        raise upstream_error(response.status_code, await response.aread())
    async for line in response.aiter_lines():
        data = line.removeprefix("data:").strip()
        if not line.startswith("data:") or not data:
            continue  # SSE comments, keep-alives, blank separators
        if data == "[DONE]":
            return
        yield _chunk(data)


def _chunk(data: str) -> dict:
    """One streamed chunk; an error event (vLLM sends one when it fails mid-stream) raises."""
    try:
        chunk = json.loads(data)
    except json.JSONDecodeError as error:
        raise bad_answer(data) from error
    if not isinstance(chunk, dict):
        raise bad_answer(data)
    if "error" in chunk:
        raise upstream_error(502, data.encode())
    return chunk


def upstream_error(status: int, payload: bytes) -> EngineHTTPError:
    """The upstream's error with its status and message."""
    message, code, param = read_error_body(payload)
    status = status if 400 <= status <= 599 else 502
    return EngineHTTPError(
        f"the upstream model server answered {status}: {message or f'HTTP {status}'}",
        status,
        code or "upstream_error",
        param,
    )


def bad_answer(text: str, shape: str = "OpenAI's") -> EngineHTTPError:
    return EngineHTTPError(
        f"the upstream model server sent an answer that is not {shape} shape: {text[:200]!r}",
        502,
        "upstream_bad_answer",
    )


def from_settings(settings: Settings) -> OpenAIUpstreamEngine:
    """`--engine openai` (registry.py)."""
    if settings.upstream_url is None or settings.upstream_model is None:  # Settings refuses this
        raise ValueError("engine 'openai' needs upstream_url and upstream_model")
    return OpenAIUpstreamEngine(
        settings.upstream_url,
        settings.upstream_model,
        api_key=settings.upstream_api_key,
        connect_timeout=settings.engine_connect_timeout,
        read_timeout=settings.engine_read_timeout,
        frame_format=settings.upstream_frame_format,
    )
