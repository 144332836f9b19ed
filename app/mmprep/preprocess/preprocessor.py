"""From an OpenAI chat request to a PreparedRequest: for each media part (typed at the edge,
app/mmprep/api/common/content.py) its decode options, then fetch its URL, decode it off the
event loop with its modality's record (then the vision processor, with --processor), and put
the tensors where the parts were.

Identical media in one request (same URL, same sampling) is fetched and decoded once.
Everything runs under one deadline; when it passes or the client goes away, fetches are
cancelled and decodes stop at their next packet.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections import Counter
from dataclasses import dataclass

from mmprep import families
from mmprep.decoders import CorruptMediaError, MediaError
from mmprep.processors import ProcessedMedia, ProcessorError

from ..core.config import Settings
from ..core.errors import ServiceError
from ..core.metrics import Metrics
from ..interface.prepared import MediaItem, PreparedRequest, merge_processor_kwargs
from ..media.data_url import DataURL
from ..media.fetch import MediaFetcher
from ..modalities import MODALITIES, DecodeContext, Loaded, Modality, part_error
from ..model import load_model_folder
from ..render import Renderer
from .cache import DecodeCache, content_key
from .options import request_options, server_options, under_server_options
from .pool import DecodePool
from .request import ChatInput
from .timing import Timing
from .vision import VisionProcessing

# A prompt text longer than this is tokenized in a thread, not on the event loop, which every
# other request and stream would wait out; both tokenizers let go of the GIL meanwhile, so two
# such renders use two cores. Below it the thread hop (0.1-0.2 ms of CPU and a hand-off of the
# GIL) would cost more than it frees. fastokens takes about 2 ms for 512k characters (~130k
# tokens; as long as json_body.py's largest body parsed on the loop), the tokenizers library
# (where fastokens does not read the model's tokenizer.json) 10-90x that: by the encoder.
LONG_PROMPT_CHARS = {True: 1 << 19, False: 8192}  # ModelFolder.fast_encode -> characters


@dataclass(frozen=True)
class _MediaPart:
    modality: Modality[object]  # its record, with the part's decode options (a video's sampling)
    url: str | DataURL
    param: str  # e.g. messages[0].content[1].video_url
    vision: VisionProcessing | None  # the request's vision processing (its processor options)

    @property
    def key(self) -> tuple:
        """Parts with equal keys are fetched and decoded once."""
        return self.modality, self.url


def _as_data_url(url: str | DataURL) -> DataURL | None:
    """The part's URL as a DataURL if it is one (long ones arrive parsed, short ones as text)."""
    if isinstance(url, DataURL):
        return url
    return DataURL.parse(url) if url[:5].lower() == "data:" else None


def _nbytes(loaded: Loaded[object]) -> int:
    return loaded.nbytes


class Preprocessor:
    def __init__(
        self,
        settings: Settings,
        fetcher: MediaFetcher,
        pool: DecodePool,
        metrics: Metrics,
        cache: DecodeCache | None = None,
    ):
        self._settings, self._fetcher, self._pool, self._metrics = settings, fetcher, pool, metrics
        self._cache = cache
        self._vision = VisionProcessing.from_settings(settings)
        self._server_sampling = server_options(settings.media_io_kwargs)  # checked at start (service.py)
        # With --model: the prompt rendered to token ids (the folder loaded once per process).
        self._renderer = (
            Renderer(
                load_model_folder(str(settings.model), settings.processor),
                settings.max_model_len,
                trust_request_chat_template=settings.trust_request_chat_template,
                chat_template=settings.chat_template,
                content_format=settings.chat_template_content_format,
            )
            if settings.model
            else None
        )

    async def prepare(
        self, request: ChatInput, request_id: str, cancel: threading.Event
    ) -> tuple[PreparedRequest, Timing]:
        """`request` typed at the edge. Raises ServiceError naming the part."""
        started = time.perf_counter()
        timing = Timing()
        # The processor's options: --mm-processor-kwargs under the request's own, as vLLM merges them
        processor_kwargs = merge_processor_kwargs(
            self._settings.mm_processor_kwargs, request.mm_processor_kwargs
        )
        vision = self._vision.for_request(processor_kwargs) if self._vision is not None else None
        messages, parts = request.messages, self._media_parts(request, processor_kwargs, vision)
        # The template first: a request it refuses costs no fetch.
        rendering = time.perf_counter()
        renderer = self._renderer
        text = renderer.render_text(messages, request.template) if renderer is not None else None
        rendered = time.perf_counter()
        loaded = await self._load_all(parts, timing, cancel)
        media = [loaded[part.key].item(part.param) for part in parts]
        self._check_total_size(media)
        if vision is not None:  # before any engine work
            tokens = 0
            for item in media:
                assert item.processed is not None  # with a vision processor, every decode is processed
                tokens += item.processed.num_tokens
            vision.check_tokens(tokens, "the request's media", "messages")
        # The counts come from the processed grids and the videos' metadata.
        prompt = None
        if renderer is not None and text is not None:  # text is rendered exactly when there is a renderer
            tokenizing = time.perf_counter()
            processor = vision.processor if vision is not None else None
            if len(text) > LONG_PROMPT_CHARS[renderer.folder.fast_encode]:
                prompt = await asyncio.to_thread(renderer.tokens, text, media, processor)
            else:
                prompt = renderer.tokens(text, media, processor)
            timing.render = rendered - rendering + time.perf_counter() - tokenizing
        timing.preprocess = time.perf_counter() - started
        prepared = PreparedRequest(
            request_id=request_id,
            model=request.model,
            messages=messages,
            media=media,
            sampling=request.sampling,
            stream=request.stream,
            mm_processor_kwargs=request.mm_processor_kwargs,
            mm_processor_defaults=self._settings.mm_processor_kwargs,
            extra=dict(request.extra),
            prompt=prompt,
        )
        return prepared, timing

    # -- finding the parts -------------------------------------------------------------

    def _media_parts(
        self, request: ChatInput, processor_kwargs: dict | None, vision: VisionProcessing | None
    ) -> list[_MediaPart]:
        """The request's media parts (typed at the edge), each with its decode options."""
        requested = under_server_options(
            self._server_sampling, request_options(request.video_options, processor_kwargs)
        )
        family = self._vision.processor.family if self._vision is not None else None
        if len(request.media) > self._settings.max_media_parts:
            raise ServiceError(
                f"the request has {len(request.media)} media parts, "
                f"more than the {self._settings.max_media_parts} allowed",
                "too_many_media_parts",
                "messages",
            )
        counts = Counter(part.kind for part in request.media)
        for kind, count in counts.items():
            limit = self._settings.mm_limit(kind)
            if limit is not None and count > limit:  # vllm serve's --limit-mm-per-prompt
                raise ServiceError(
                    f"At most {limit} {kind}(s) may be provided in one prompt: the request has {count} "
                    f"(--limit-mm-per-prompt {kind}: {limit})",
                    "too_many_media_parts",
                    "messages",
                )
        model_picks = vision is not None and vision.picks_frames
        parts = []
        for part in request.media:
            modality = MODALITIES[part.kind]
            known = families.find(family)
            if known is not None and not known.takes(part.kind):
                raise ServiceError(
                    f"{part.param}: the model's family, {family}, takes no {part.kind} input "
                    f"({' or '.join(modality.part_types)} parts)",
                    "unsupported_content_type",
                    part.param,
                )
            self._check_model_takes(known, part.kind, part.param)
            bound = modality.for_part(requested, part.options, self._settings, part.param, model_picks)
            parts.append(_MediaPart(bound, part.url, part.param, vision))
        return parts

    def _check_model_takes(self, family: families.Family | None, kind: families.Kind, param: str) -> None:
        """A 400 with vLLM's message where the --model folder's own model takes no items of
        this modality though its family's may (a Gemma 4 without an audio tower)."""
        if family is None or self._renderer is None:
            return
        refusal = family.sides[kind].refusal(
            self._renderer.folder.config, self._settings.served_model_name[0]
        )
        if refusal is not None:
            raise ServiceError(refusal, "unsupported_content_type", param)

    # -- fetching and decoding ---------------------------------------------------------

    async def _load_all(
        self, parts: list[_MediaPart], timing: Timing, cancel: threading.Event
    ) -> dict[tuple, Loaded[object]]:
        if not parts:  # a text-only request: no deadline to set and take down again
            return {}
        unique = {part.key: part for part in parts}
        tasks = {key: asyncio.ensure_future(self._load(part, timing, cancel)) for key, part in unique.items()}
        try:
            async with asyncio.timeout(self._settings.decode_timeout):
                await asyncio.gather(*tasks.values())
            return {key: task.result() for key, task in tasks.items()}
        except BaseException as error:
            cancel.set()  # decodes in threads stop at their next packet
            unfinished = _cancel_unfinished(tasks)
            if isinstance(error, TimeoutError):
                raise ServiceError(
                    "fetching and decoding the media took longer than the "
                    f"{self._settings.decode_timeout:g} s allowed",
                    "decode_timeout",
                    unique[unfinished[0]].param if unfinished else "messages",
                ) from error
            raise
        finally:
            # A failed task holds the error, whose traceback holds this frame, which would hold
            # the tasks: a cycle only the garbage collector frees, and with it the media (a data
            # URL can be hundreds of MiB). Without the tasks here, the error frees them all.
            del tasks

    async def _load(self, part: _MediaPart, timing: Timing, cancel: threading.Event) -> Loaded[object]:
        try:
            data_url = _as_data_url(part.url)
            too_big = data_url is not None and data_url.size_bound() > self._fetcher.limits.max_bytes
            if self._cache is None or data_url is None or too_big:  # too big: the fetcher refuses it unread
                return await self._fetch_and_decode(part, timing, cancel, reuse=True)
            # A data URL's text keys its item as well as its bytes would, and costs no base64
            # decode: a chat that resends its images each turn decodes none of them again
            # (4 of the 17 ms of CPU a cached render of four 720p JPEGs took).
            made_with = (
                "data URL",
                data_url.media_type,
                data_url.is_base64,
                part.modality,
                self._made_with(part),
            )
            key = await content_key(part.modality.name, data_url.payload, made_with)
            return await self._cache.get_or_decode(
                key, lambda: self._fetch_and_decode(part, timing, cancel, reuse=False), _nbytes
            )
        except (MediaError, ProcessorError, ServiceError) as error:  # the decoders', processor's or fetcher's
            raise part_error(error, part.param) from error

    async def _fetch_and_decode(
        self, part: _MediaPart, timing: Timing, cancel: threading.Event, reuse: bool
    ) -> Loaded[object]:
        """`reuse`: the cache looked up by the fetched bytes first."""
        metrics = self._metrics
        started = time.perf_counter()
        fetched = await self._fetcher.fetch(part.url)
        fetched_at = time.perf_counter()
        metrics.fetch_seconds.labels(fetched.scheme).observe(fetched_at - started)
        metrics.fetched_bytes.labels(fetched.scheme).inc(len(fetched.data))
        timing.add("fetch", started, fetched_at)
        try:
            if reuse and self._cache is not None:
                key = await content_key(
                    part.modality.name, fetched.data, (part.modality, self._made_with(part))
                )
                decode = functools.partial(self._decode, part, fetched.data, cancel)
                result = await self._cache.get_or_decode(key, decode, _nbytes)
            else:
                result = await self._decode(part, fetched.data, cancel)
        except CorruptMediaError as error:
            raise _with_declared_type(error, fetched.content_type) from error
        timing.add("decode", fetched_at, time.perf_counter())
        return result

    async def _decode(self, part: _MediaPart, data: bytes, cancel: threading.Event) -> Loaded[object]:
        """Decoded in the pool, its tensors made read-only."""
        started = time.perf_counter()
        modality = part.modality

        def decode(threads: int) -> Loaded[object]:
            context = DecodeContext(self._settings, part.vision, cancel, threads, self._timed_processing)
            return modality.decode(data, context)

        result = await self._pool.run_with_threads(decode)
        result.tensor.flags.writeable = False  # shared: by parts, by requests through the cache
        for processed in result.processed.tensors.values() if result.processed is not None else ():
            processed.flags.writeable = False
        self._metrics.decode_seconds.labels(modality.name).observe(time.perf_counter() - started)
        self._metrics.frames_decoded.labels(modality.name).inc(modality.units(result.tensor))
        return result

    def _made_with(self, part: _MediaPart) -> tuple:
        """What decides an item's tensors besides its bytes and sampling (the cache's key): the
        server's image scale, and the request's vision processing as it is made (family, both
        configs with their pixel form and the request's processor options, the resize).
        default_fps: vLLM's frames for a num_frames request are sampled at it (frame_picks)."""
        return (
            self._settings.max_pixels,
            self._settings.default_fps,
            part.vision.cache_key if part.vision is not None else None,
        )

    def _timed_processing(self, kind: str, work) -> ProcessedMedia:
        """work(), timed for mmprep_process_seconds: for a video, what is left of the
        processing once the last frame is decoded."""
        started = time.perf_counter()
        processed = work()
        self._metrics.process_seconds.labels(kind).observe(time.perf_counter() - started)
        return processed

    def _check_total_size(self, media: list[MediaItem]) -> None:
        total, seen = 0, set()
        for item in media:
            if id(item.tensor) in seen:
                continue  # the same decode, shared by two parts: counted once
            seen.add(id(item.tensor))
            total += item.tensor.nbytes
            if total > self._settings.max_decoded_bytes:
                raise ServiceError(
                    f"{item.param}: the request's decoded media reaches {total} bytes, more than the "
                    f"{self._settings.max_decoded_bytes} allowed; ask for fewer or smaller frames",
                    "media_too_large",
                    item.param,
                )


def _with_declared_type(error: CorruptMediaError, content_type: str | None) -> CorruptMediaError:
    """The decoder's reason, and what the server (or data URL) said the bytes were."""
    if not content_type:
        return error
    return CorruptMediaError(f"{error}; it was sent as {content_type.split(';')[0].strip()}")


def _cancel_unfinished(tasks: dict) -> list:
    """Cancel the tasks still running; the keys of those that never finished (a timeout
    may have cancelled them already)."""
    unfinished = [key for key, task in tasks.items() if task.cancelled() or not task.done()]
    for key in unfinished:
        tasks[key].cancel()
    return unfinished
