"""VllmGenerateEngine: token ids and processed tensors to vLLM's token-in endpoint
(`POST /inference/v1/generate`, vllm serve --enable-scale-out or --tokens-only), token
ids back.

mmprep renders (chat template, placeholders expanded: --model) and processes (--processor)
each request; the upstream only runs the model. Nothing is re-encoded: the processor's
tensors go as they are (app/mmprep/vllm/serde.py), so this path is lossless, unlike --engine
openai, which sends JPEG frames for vLLM to process again. They are uint8 for an upstream
that normalizes on the device and float32 for one that does not; which one the upstream
is, is asked at start (pixel_form.py) and a mismatch refused. The request is vLLM's
GenerateRequest (app/mmprep/vllm/request.py), streamed (SSE of GenerateResponse chunks) when the
client streams; mmprep detokenizes the token ids and applies stop strings itself.
Upstream errors keep their status and message, as with --engine openai.

The protocol it speaks stays in app/mmprep/vllm (below app/mmprep/engines' engines, above their
interface: docs/ARCHITECTURE.md's rooms); this module only sends it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from functools import partial

import httpx

from ..core.config import Settings
from ..core.lifespan import StartupError
from ..interface.engine import EngineHTTPError, EngineOutput
from ..interface.prepared import PreparedRequest
from ..vllm import TESTED_VLLM_VERSIONS
from ..vllm.options import GenerateOptions, generate_options
from ..vllm.pixel_form import mismatch, upstream_pixel_dtype
from ..vllm.request import generate_request_body
from ..vllm.response import BadAnswer, choice_outputs, finish_reason, usage_counts, whole_answer
from ..vllm.sampling import PENALTY_FIELDS, TOKEN_FIELDS, with_extra_fields
from .upstream import (
    PROBE_INTERVAL,
    UpstreamClient,
    bad_answer,
    server_root,
    sse_chunks,
    transport_errors,
    upstream_error,
)

GENERATE_PATH = "/inference/v1/generate"
# What the renderer reads of a request (app/mmprep/preprocess: the chat template's options).
RENDER_FIELDS = (
    "tools",
    "documents",
    "add_generation_prompt",
    "continue_final_message",
    "chat_template_kwargs",
)
SHAPE = "vLLM's GenerateResponse"
log = logging.getLogger("mmprep.engines")


class VllmGenerateEngine(UpstreamClient):
    # Fields beyond those mmprep reads that this engine honours (PreparedRequest.extra).
    accepted_fields = frozenset({"cache_salt", "priority", *PENALTY_FIELDS, *TOKEN_FIELDS, *RENDER_FIELDS})
    gives_logprobs = True  # vLLM's logprobs.content, per token (app/mmprep/vllm/response.py)

    def __init__(
        self,
        url: str,
        options: GenerateOptions,
        api_key: str | None = None,
        connect_timeout: float = 2.0,
        read_timeout: float = 300.0,
        allow_untested_version: bool = False,
        probe_interval: float = PROBE_INTERVAL,
    ):
        super().__init__(
            root_url(url) + GENERATE_PATH, api_key, connect_timeout, read_timeout, url, probe_interval
        )
        self.options = options
        self.allow_untested_version = allow_untested_version
        self.upstream_version: str | None = None  # what its GET /version said, once read
        # Why requests are refused, found when the upstream is reached: (code, message).
        self._refusal: tuple[str, str] | None = None
        self._pixel_form = PixelFormCheck()
        self._started = False

    async def start(self) -> None:
        """Probes the upstream, reads its version and checks its pixel form; an untested
        version (unless allowed) or the other pixel form stops mmprep. One that cannot be
        reached is checked when it can."""
        await super().start()
        self._started = True  # refusals found from now on are logged where they are found
        if self._refusal is not None:
            await self.stop()
            raise StartupError(self._refusal[1])  # logged where the server stops

    def ready(self) -> bool:
        return super().ready() and self._refusal is None

    async def reached(self) -> None:
        await self._read_version()
        if self._refusal is None:
            await self._check_pixel_form()

    async def _read_version(self) -> None:
        if self.upstream_version is not None:
            return
        try:
            response = await self._http.get(
                server_root(self._base_url) + "/version", timeout=self._probe_timeout
            )
        except httpx.HTTPError as error:
            self.healthy = False  # read again when a probe finds it up
            log.warning("the upstream's GET /version failed: %s", error, extra={"upstream": self._base_url})
            return
        self.upstream_version = _version(response)
        problem = version_problem(self.upstream_version, self._base_url)
        if problem is None:
            log.info("the upstream is vLLM %s", self.upstream_version, extra={"upstream": self._base_url})
        elif self.allow_untested_version:
            log.warning("%s; serving anyway (--upstream-allow-untested-version)", problem)
        else:
            self._refuse(
                "upstream_version_untested",
                problem + ": give --upstream-allow-untested-version to serve anyway",
            )

    async def _check_pixel_form(self) -> None:
        problem = await self._pixel_form.check(self._http, server_root(self._base_url), self.options)
        if problem is not None and self._refusal is None:
            self._refuse("upstream_pixel_form", problem)

    def _refuse(self, code: str, message: str) -> None:
        """Refuse every request from now on (a 502 `code`); after start, say so in the log."""
        self._refusal = (code, message)
        if self._started:
            log.error("%s", message)

    async def generate(self, request: PreparedRequest) -> AsyncGenerator[EngineOutput, None]:
        if request.media and self._refusal is None:  # come up since the last probe: asked now
            await self._check_pixel_form()
        if self._refusal is not None:  # found after start: the upstream came up later
            code, message = self._refusal
            raise EngineHTTPError(message, 502, code)
        # Hashing and base64 of the tensors, off the event loop.
        pieces = await asyncio.to_thread(generate_request_body, request, self.options)
        top = with_extra_fields(request.sampling, request.extra).top_logprobs  # alternatives kept per token
        # The pieces go as they are (no joined copy of the tensors); the length is known.
        headers = {"Content-Type": "application/json", "Content-Length": str(sum(map(len, pieces)))}
        with transport_errors():
            if not request.stream:
                response = await self._http.post(self._endpoint, content=_sent(pieces), headers=headers)
                if response.status_code != 200:
                    raise upstream_error(response.status_code, response.content)
                yield _read(lambda: response.text, lambda: whole_answer(response.json(), top))
                return
            async with self._http.stream(
                "POST", self._endpoint, content=_sent(pieces), headers=headers
            ) as response:
                async for output in _stream(sse_chunks(response), top):
                    yield output


class PixelFormCheck:
    """Whether the upstream wants the pixel form mmprep sends (pixel_form.py), asked once it
    can be reached, once: the answer is kept, a mismatch with it."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._asked = False
        self._problem: str | None = None

    async def check(self, http: httpx.AsyncClient, root: str, options: GenerateOptions) -> str | None:
        """What is wrong with the pixel form, or None when it is right or cannot be told."""
        async with self._lock:  # concurrent first requests ask once
            if not self._asked:
                model = options.served_model or options.model_id
                dtype = await upstream_pixel_dtype(http, root, model)
                if dtype is not None:
                    self._asked = True
                    self._problem = mismatch(options.normalizes_on_device, dtype)
            return self._problem


root_url = server_root  # the name the tests and older code import


def version_problem(version: str, url: str) -> str | None:
    """None for a vLLM release mmprep was tested against (TESTED_VLLM_VERSIONS, any patch or
    build: 0.33.1, 0.32.0+cpu), else the sentence that says it is not."""
    match = re.match(r"(\d+)\.(\d+)(?!\d)", version)
    if match and f"{match[1]}.{match[2]}" in TESTED_VLLM_VERSIONS:
        return None
    tested = ", ".join(f"{release}.x" for release in TESTED_VLLM_VERSIONS)
    return (
        f"the upstream at {url} is vLLM {version}, whose wire mmprep was not tested against "
        f"(tested: vLLM {tested})"
    )


def _version(response: httpx.Response) -> str:
    """vLLM's {"version": "0.33.0"}; what else came, in words, for the message."""
    try:
        version = response.json().get("version") if response.status_code == 200 else None
    except (ValueError, AttributeError):
        version = None
    if isinstance(version, str) and version:
        return version
    return f"of unknown version (GET /version answered {response.status_code}: {response.text[:100]!r})"


async def _sent(pieces: list[bytes]) -> AsyncIterator[bytes]:
    for piece in pieces:
        yield piece


def _read(answer: Callable[[], str], parse: Callable, *args):
    """parse(*args); an answer that is not vLLM's shape is a 502 quoting it (`answer()`)."""
    try:
        return parse(*args)
    except (BadAnswer, ValueError, KeyError, TypeError, AttributeError) as error:
        raise bad_answer(answer(), SHAPE) from error


async def _stream(chunks: AsyncIterator[dict], top: int) -> AsyncIterator[EngineOutput]:
    finish, prompt_tokens, completion_tokens = None, None, None
    async for chunk in chunks:
        if chunk.get("usage"):
            prompt_tokens, completion_tokens = _read(partial(json.dumps, chunk), usage_counts, chunk)
        for choice in chunk.get("choices") or []:
            token_ids, logprobs = _read(partial(json.dumps, chunk), choice_outputs, choice, top)
            if token_ids:
                yield EngineOutput(token_ids=token_ids, logprobs=logprobs)
            finish = finish_reason(choice) or finish
    yield EngineOutput(
        finish_reason=finish or "stop", prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
    )


def from_settings(settings: Settings) -> VllmGenerateEngine:
    """`--engine vllm-generate` (registry.py)."""
    if settings.upstream_url is None:  # Settings refuses this
        raise ValueError("engine 'vllm-generate' needs upstream_url")
    return VllmGenerateEngine(
        settings.upstream_url,
        generate_options(settings),
        api_key=settings.upstream_api_key,
        connect_timeout=settings.engine_connect_timeout,
        read_timeout=settings.engine_read_timeout,
        allow_untested_version=settings.upstream_allow_untested_version,
    )
