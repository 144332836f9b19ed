"""The Service: everything serving a chat request needs, made once and started and stopped
with the server (the engine, and preprocessing: the decode pool and cache, the fetcher, the
preprocessor), and the admission of requests. What the settings name (the model folder, the
processor, the engine class) is loaded here, when the service is built (load_resources), not
when the settings are read. It knows no web framework: app/mmprep/api serves it
over HTTP. On Ray (app/mmprep/rayserve) the front door's Service has the same shape, with its
preprocessing and its engine in other replicas."""

from __future__ import annotations

import logging
import time
from functools import cached_property

from mmprep.processors import load_processor

from .core.admission import Admission
from .core.config import Settings
from .core.disconnect import Connection, until_disconnect
from .core.errors import ServiceError
from .core.imports import import_by_path
from .core.memory import ReleaseWhenIdle
from .core.metrics import Metrics
from .derender import Derendering, ModelFacts
from .engines import Engine
from .engines.loading import build_engine
from .modalities import MODALITIES
from .model import ModelFolderError, load_model_folder
from .model.context import check_max_model_len, derive_max_model_len
from .model.hub import resolve_model
from .preprocess import LocalPreprocessing, Preparer, Preprocessing
from .preprocess.options import server_options
from .preprocess.vision import processor_for
from .vllm.options import generate_options
from .vllm.sampling import sampling_defaults
from .vllm.wire_cache import WireCache

log = logging.getLogger("mmprep.service")


class Service:
    """`preprocessing`: by default this process's own, fetching and decoding here."""

    def __init__(
        self,
        settings: Settings,
        engine: Engine | None = None,
        preprocessing: Preprocessing | None = None,
        derendering: Derendering | None = None,
    ):
        self.settings = settings = load_resources(settings)
        self.metrics = Metrics()
        self.engine = engine or build_engine(settings)
        # What turns the engine's outputs into the answer's parts (app/mmprep/derender): the
        # model's tokenizer and EOS ids (None until a model folder gives them) and the parsers.
        self.derendering = derendering or Derendering(
            model_facts(settings),
            settings.reasoning_parser,
            settings.tool_call_parser,
            settings.enable_auto_tool_choice,
            stream_partial_tool_calls=settings.stream_partial_tool_calls,
        )
        self.preprocessing = preprocessing or LocalPreprocessing(settings, self.metrics)
        self.started = int(time.time())
        self.memory = ReleaseWhenIdle()  # after a burst, what it held goes back to the system
        self._admission = Admission(
            settings.max_concurrent_requests,
            settings.max_queued_requests,
            settings.max_queue_wait,
            self.metrics,
            on_idle=self.memory.idle,
        )

    @property
    def preprocessor(self) -> Preparer:
        """The preprocessing's, once the service has started (routes are served only then)."""
        preprocessor = self.preprocessing.preprocessor
        if preprocessor is None:
            raise RuntimeError("the service has not started: its preprocessing has no preprocessor yet")
        return preprocessor

    async def start(self) -> None:
        await self.preprocessing.start()
        await self.engine.start()

    async def stop(self) -> None:
        await self.engine.stop()
        await self.preprocessing.stop()

    @cached_property
    def generate_options(self):
        """How this deployment writes vLLM GenerateRequests (the render route's): read once,
        since the model folder's files do not change while it runs."""
        return generate_options(self.settings, self._wire_cache())

    def _wire_cache(self) -> WireCache | None:
        """The render route's kept wire forms and video hashes (--render-cache-bytes)."""
        if not self.settings.render_cache_bytes:
            return None
        metrics = self.metrics
        cache = WireCache(
            self.settings.render_cache_bytes,
            on_lookup=lambda hit: metrics.render_cache.labels("hit" if hit else "miss").inc(),
            on_evict=metrics.render_cache_evictions.inc,
        )
        metrics.render_cache_bytes.set_function(lambda: cache.bytes)
        metrics.render_cache_items.set_function(lambda: len(cache))
        return cache

    def ready(self) -> bool:
        return self.preprocessing.preprocessor is not None and self.engine.ready()

    # -- admission and accounting ----------------------------------------------------

    async def admit(self, http: Connection | None = None) -> Slot:
        """A place among the requests in flight, at once or after a wait in the queue
        (app/mmprep/core/admission.py); a 503 ServiceError naming the bound when there is none.
        A client that leaves while queued (`http` disconnected) raises ClientGone."""
        if not self._admission.try_enter():
            waiting = self._admission.wait()
            await (until_disconnect(http, waiting) if http is not None else waiting)
        self.memory.busy()
        return Slot(self)

    @property
    def in_flight(self) -> int:
        """The requests admitted and not yet answered (vLLM's /load)."""
        return self._admission.in_flight

    def check_request(self, model: str, choices: int) -> None:
        """The model is one served here, and one choice is asked for."""
        served = self.settings.served_model_name
        if model not in served:
            raise ServiceError(
                f"the model {model!r} does not exist here; this server serves {', '.join(served)}",
                "model_not_found",
                "model",
                status=404,
            )
        if choices > 1:
            raise ServiceError("n > 1 is not supported: send one request per choice", "unsupported_n", "n")

    def record(self, status: int | str, code: str | None = None, param: str | None = None) -> None:
        """One answered request in /metrics; a refusal (with its code) in the log too."""
        self.metrics.requests.labels(str(status)).inc()
        if code is not None:
            self.metrics.errors.labels(code).inc()
            log.info("refused", extra={"status": status, "code": code, "param": param})

    def _release(self) -> None:
        self._admission.release()


class Slot:
    """One admitted request's place among the in-flight ones, given back exactly once."""

    def __init__(self, service: Service):
        self._service, self._held, self.handed_over = service, True, False

    def release(self) -> bool:
        """Give the place back; True if this call did it."""
        if not self._held:
            return False
        self._held = False
        self._service._release()
        return True


class SettingsError(ValueError):
    """A setting whose resource does not load; `setting` names it as the command's error
    lines name a setting (`settings` for one that depends on several)."""

    def __init__(self, setting: str, message: str):
        super().__init__(message)
        self.setting = setting


def load_resources(settings: Settings) -> Settings:
    """What the settings name, loaded (each once per process: the loads are cached, so the
    parts built next take the same): the engine class (imported), the processor, the model
    folder; and the settings with what the folder decides filled in, as vllm serve takes it
    (the served model name, the context length). A SettingsError names what does not load.
    Loading settings again changes nothing."""
    _check_media_options(settings)
    if settings.engine_class is not None:
        try:
            import_by_path(settings.engine_class)
        except ValueError as error:
            raise SettingsError("engine_class", str(error)) from None
    if settings.processor is not None:
        try:
            load_processor(settings.processor)
        except ValueError as error:  # a ProcessorConfigError says what is wrong
            raise SettingsError("processor", str(error)) from None
    if settings.model is None:
        _check_processor_options(settings)
        return settings
    update: dict = {}
    try:  # a Hub id (vllm serve Qwen/Qwen3-VL-8B-Instruct): its snapshot in the local cache
        path = resolve_model(str(settings.model), settings.revision)
    except ModelFolderError as error:
        raise SettingsError("model", str(error)) from None
    if path != settings.model:
        # vLLM serves and keys its hashes by the id as given, not by the snapshot's path
        hub_id = str(settings.model)
        update |= {"model": path, "revision": None}
        if "served_model_name" not in settings.model_fields_set:
            update["served_model_name"] = [hub_id]
        if settings.upstream_model_id is None and settings.upstream_model is None:
            update["upstream_model_id"] = hub_id
    try:
        folder = load_model_folder(str(path), settings.processor)
        if "served_model_name" not in settings.model_fields_set and "served_model_name" not in update:
            update["served_model_name"] = [folder.name]
        if settings.max_model_len is None:
            update["max_model_len"] = derive_max_model_len(folder.config)[0]
        else:
            check_max_model_len(settings.max_model_len, folder.config)  # vLLM's refusal, a ValueError
    except ModelFolderError as error:
        raise SettingsError("settings", f"--model {settings.model}: {error}") from None
    except ValueError as error:
        raise SettingsError("settings", str(error)) from None
    settings = settings.model_copy(update=update)
    _check_processor_options(settings)
    return settings


def _check_processor_options(settings: Settings) -> None:
    """--mm-processor-kwargs' processing keys make a processor (with --processor or --model)."""
    if settings.mm_processor_kwargs and (settings.processor is not None or settings.model is not None):
        try:
            processor_for(settings)
        except ServiceError as error:
            raise SettingsError("mm_processor_kwargs", error.message) from None


def _check_media_options(settings: Settings) -> None:
    """vllm serve's per-modality flags name modalities mmprep serves, and --media-io-kwargs'
    video keys are sampling keys (as a request's media_io_kwargs.video)."""
    for setting in ("limit_mm_per_prompt", "media_io_kwargs"):
        unknown = sorted(set(getattr(settings, setting)) - set(MODALITIES))
        if unknown:
            raise SettingsError(
                setting, f"no modality {', '.join(unknown)}: mmprep serves {', '.join(MODALITIES)}"
            )
    try:
        server_options(settings.media_io_kwargs)
    except ServiceError as error:
        raise SettingsError("media_io_kwargs", error.message) from None


def model_facts(settings: Settings) -> ModelFacts | None:
    """With --model: what derendering needs of the folder. The EOS ids in vLLM's order: the
    tokenizer's own EOS token first (a stop on it has stop_reason None), then the others
    generation_config.json lists."""
    if settings.model is None:
        return None
    folder = load_model_folder(str(settings.model), settings.processor)
    own = folder.template_tokens.get("eos_token")
    own_id = folder.tokenizer.token_to_id(own) if own else None
    eos = folder.eos_token_ids
    if own_id is not None:
        eos = (own_id, *(token_id for token_id in eos if token_id != own_id))
    defaults = sampling_defaults(settings.generation_config, folder.path, settings.override_generation_config)
    return ModelFacts(folder.tokenizer, eos, defaults.get("skip_special_tokens", True))
