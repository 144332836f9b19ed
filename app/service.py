"""The Service: everything serving a chat request needs, made once and started and stopped
with the server (the engine, and preprocessing: the decode pool and cache, the fetcher, the
preprocessor), and the admission of requests. It knows no web framework: app/api serves it
over HTTP. On Ray (app/rayserve) the front door's Service has the same shape, with its
preprocessing and its engine in other replicas."""

from __future__ import annotations

import logging
import time
from functools import cached_property

from .core.config import Settings
from .core.errors import ServiceError
from .core.memory import ReleaseWhenIdle
from .core.metrics import Metrics
from .derender import Derendering, ModelFacts
from .engines import EchoEngine, Engine
from .engines.loading import make_engine
from .model import load_model_folder
from .preprocess import Preprocessing
from .preprocess.vision import normalizes_on_device

log = logging.getLogger("mmprep.service")


class Service:
    """`preprocessing`: anything with `start`, `stop` and, once started, a `preprocessor`
    whose `prepare` the chat handler awaits (by default: this process's own, fetching and
    decoding here)."""

    def __init__(
        self,
        settings: Settings,
        engine: Engine | None = None,
        preprocessing=None,
        derendering: Derendering | None = None,
    ):
        self.settings = settings
        self.metrics = Metrics()
        self.engine = engine or build_engine(settings)
        # What turns the engine's outputs into the answer's parts (app/derender): the
        # model's tokenizer and EOS ids (None until a model folder gives them) and the parsers.
        self.derendering = derendering or Derendering(
            model_facts(settings),
            settings.reasoning_parser,
            settings.tool_call_parser,
            settings.enable_auto_tool_choice,
        )
        self.preprocessing = preprocessing or Preprocessing(settings, self.metrics)
        self.started = int(time.time())
        self._in_flight = 0
        self._memory = ReleaseWhenIdle()  # after a burst, what it held goes back to the system

    @property
    def preprocessor(self):
        return self.preprocessing.preprocessor

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
        return vllm_options(self.settings)

    def ready(self) -> bool:
        return self.preprocessor is not None and self.engine.ready()

    # -- admission and accounting ----------------------------------------------------

    def admit(self) -> Slot:
        """A place among the requests in flight; a 503 ServiceError when there is none."""
        limit = self.settings.max_concurrent_requests
        if self._in_flight >= limit:
            raise Overloaded(f"the server is at its limit of {limit} requests in flight; retry shortly")
        self._in_flight += 1
        self.metrics.in_flight.set(self._in_flight)
        self._memory.busy()
        return Slot(self)

    @property
    def in_flight(self) -> int:
        """The requests admitted and not yet answered (vLLM's /load)."""
        return self._in_flight

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
        self._in_flight -= 1
        self.metrics.in_flight.set(self._in_flight)
        if self._in_flight == 0:
            self._memory.idle()


class Overloaded(ServiceError):
    status = 503
    code = "overloaded"
    headers: dict[str, str] | None = {"Retry-After": "1"}


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


def build_engine(settings: Settings) -> Engine:
    """The engine the settings name (the names are checked when settings load)."""
    if settings.engine_class is not None:
        return make_engine(settings.engine_class)
    if settings.engine == "echo":
        return EchoEngine(settings.echo_chars_per_token)
    if settings.engine == "workers":
        from .workers.remote import RemoteWorkersEngine

        return RemoteWorkersEngine(
            settings.worker_url,
            connect_timeout=settings.engine_connect_timeout,
            read_timeout=settings.engine_read_timeout,
            probe_interval=settings.worker_probe_interval,
        )
    if settings.engine == "openai":
        from .engines.upstream import OpenAIUpstreamEngine

        if settings.upstream_url is None or settings.upstream_model is None:  # Settings refuses this
            raise ValueError("engine 'openai' needs upstream_url and upstream_model")
        return OpenAIUpstreamEngine(
            settings.upstream_url,
            settings.upstream_model,
            api_key=settings.upstream_api_key,
            connect_timeout=settings.engine_connect_timeout,
            read_timeout=settings.engine_read_timeout,
        )
    if settings.engine == "vllm-generate":
        from .vllm.engine import VllmGenerateEngine

        if settings.upstream_url is None:  # Settings refuses this
            raise ValueError("engine 'vllm-generate' needs upstream_url")
        return VllmGenerateEngine(
            settings.upstream_url,
            vllm_options(settings),
            api_key=settings.upstream_api_key,
            connect_timeout=settings.engine_connect_timeout,
            read_timeout=settings.engine_read_timeout,
            allow_untested_version=settings.upstream_allow_untested_version,
        )
    raise ValueError(f"unknown engine {settings.engine!r}")


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
    return ModelFacts(folder.tokenizer, eos)


def vllm_options(settings: Settings):
    """How GenerateRequests are written for this deployment (the engine's and the render route's):
    the model folder's processor and sampling defaults, the upstream's model and hasher."""
    from .vllm.request import GenerateOptions
    from .vllm.sampling import generation_defaults

    folder = load_model_folder(str(settings.model), settings.processor)
    return GenerateOptions(
        # vLLM keys its hashes by the model `vllm serve` (or `vllm launch render`) was given:
        # with no upstream named, the folder as mmprep was given it, as vLLM's render takes it.
        model_id=settings.upstream_model_id or settings.upstream_model or str(settings.model),
        served_model=settings.upstream_model or settings.served_model_name[0],
        family=folder.family,
        temporal_patch_size=folder.processor.video_config.temporal_patch_size,
        hash_algorithm=settings.upstream_mm_hasher,
        normalizes_on_device=normalizes_on_device(settings, folder.family),
        generation_defaults=generation_defaults(folder.path),
        max_model_len=settings.max_model_len,
    )
