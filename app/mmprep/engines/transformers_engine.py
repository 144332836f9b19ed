"""TransformersEngine: a transformers vision-language model of a family mmprep knows and
can feed (mmprep.families, `Family.transformers_engine`: all but InternVL and Llama 4) from a
model folder, token ids in and token ids out; the family names the tensors and says what
else its model takes.

It takes what mmprep prepared with --model: the prompt's token ids with every placeholder
expanded (`request.prompt`) and each item's processed tensors (`media[i].processed`),
and runs the model's own `generate` on a thread of its own, one request at a time (the
Qwen-VL models keep per-generation state, their rope deltas, on the module). Each token
reaches the event loop as it is made, through a streamer.

Sampling is ours, not generate's: one logits processor picks each token (greedy when the
request's temperature is 0 or unset; else temperature, top-k, top-p, from a generator seeded
per request) and hands generate scores in which only that token is possible, so generate's
argmax takes it. That way the model folder's generation_config.json sampling defaults never
apply unasked (as `vllm --generation-config vllm`), a seed is one request's own, and the
logprobs reported are those of the raw logits, before any of it (vLLM's default,
logprobs-mode raw_logprobs). Stop token ids and the model's EOS ids (unless ignore_eos)
end generation; min_tokens holds them off. Closing the generator sets a flag that a
stopping criterion reads after every step.

Made with no arguments (`--engine-class mmprep.engines.transformers_engine:TransformersEngine`)
it reads MMPREP_TRANSFORMERS_MODEL (the folder), MMPREP_TRANSFORMERS_DEVICE (cpu, cuda,
cuda:1, ...; default cuda when there is one, else cpu) and MMPREP_TRANSFORMERS_DTYPE (auto:
the folder's, float32, bfloat16, float16; default auto). torch and transformers are
imported here only: `pip install -e '.[transformers]'`.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
import threading
from collections.abc import AsyncGenerator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from transformers import (
    AutoModelForImageTextToText,
    GenerationConfig,
    LogitsProcessor,
    LogitsProcessorList,
    StoppingCriteria,
    StoppingCriteriaList,
)
from transformers.generation.streamers import BaseStreamer

from mmprep import families
from mmprep.processors import ProcessedMedia

from ..core.config import TRANSFORMERS_ENV_PREFIX
from ..interface.engine import EngineError, EngineHTTPError, EngineOutput, FinishReason, TokenLogprob
from ..interface.prepared import MediaItem, Placeholder, PreparedRequest, SamplingParams, TokenPrompt
from ..modalities import MODALITIES

if TYPE_CHECKING:
    # What AutoModelForImageTextToText.from_pretrained is annotated to give: a
    # PreTrainedModel with GenerationMixin's generate (transformers defines it for type
    # checkers only).
    from transformers.models.auto.modeling_auto import _BaseModelWithGenerate

log = logging.getLogger("mmprep.transformers")

PREFIX = TRANSFORMERS_ENV_PREFIX  # mmprep's own check of MMPREP_* leaves these to this engine
MODEL_VARIABLE = PREFIX + "MODEL"
DEVICE_VARIABLE = PREFIX + "DEVICE"
DTYPE_VARIABLE = PREFIX + "DTYPE"
DTYPES = {"auto": "auto", "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
END = object()  # what the generate thread sends once generate has returned


class TransformersEngine:
    # The request's fields beyond mmprep's own that it honours: those that reach it in
    # PreparedRequest.sampling, and those mmprep applies itself with --model (rendering the
    # template; detokenizing and parsing the answer: app/mmprep/api/common/chat_protocol.py's
    # READ_WITH_MODEL).
    # The frontend leaves those out of its own check; a worker sees them all, so they are
    # named here too. Any other (min_p, repetition_penalty, response_format, ...) it cannot
    # honour, and a request with one is refused with a 400.
    accepted_fields = frozenset(
        {
            "stop_token_ids",
            "ignore_eos",
            "min_tokens",
            "top_k",
            "logprobs",
            "top_logprobs",
            "add_generation_prompt",
            "continue_final_message",
            "chat_template",
            "chat_template_kwargs",
            "reasoning_effort",
            "documents",
            "tools",
            "tool_choice",
            "include_stop_str_in_output",
            "skip_special_tokens",
            "spaces_between_special_tokens",
            "include_reasoning",
        }
    )
    gives_logprobs = True  # the chosen token's raw logprob and the top ones, per output token

    def __init__(
        self, model: str | os.PathLike | None = None, device: str | None = None, dtype: str | None = None
    ):
        _check_variables()
        self.folder = _model_folder(model)
        self.device = _device(device)
        self.dtype = _dtype(dtype)
        self.model: _BaseModelWithGenerate | None = None
        self._executor: ThreadPoolExecutor | None = None

    def __repr__(self) -> str:
        return f"TransformersEngine({str(self.folder)!r}, device={str(self.device)!r}, dtype={self.dtype!r})"

    async def start(self) -> None:
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="transformers-generate")
        await asyncio.get_running_loop().run_in_executor(self._executor, self._load)

    async def stop(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
        self.model = None

    def ready(self) -> bool:
        return self.model is not None

    def _load(self) -> None:
        try:
            model = AutoModelForImageTextToText.from_pretrained(self.folder, dtype=DTYPES[self.dtype])
        except Exception as error:  # transformers raises many kinds for a folder it cannot read
            raise ValueError(f"{MODEL_VARIABLE}: transformers cannot load {self.folder}: {error}") from error
        model.to(self.device).eval()
        config = model.config
        family = families.for_model_type(config.model_type)
        if family is None:
            raise ValueError(
                f"{MODEL_VARIABLE}: {self.folder} is a {config.model_type!r} model, not of a family mmprep "
                f"knows ({', '.join(families.MODEL_TYPES)})"
            )
        if not family.transformers_engine:
            raise ValueError(
                f"{MODEL_VARIABLE}: {self.folder} is of the {family.name} family, which this engine "
                "cannot feed yet (its model takes its tensors in another form); serve it with --engine "
                "vllm-generate or --engine openai"
            )
        self.family = family  # its tensors' names, and what its model takes beside them
        defaults = model.generation_config
        self.eos_ids = _ids(defaults.eos_token_id)
        self.token_ids = {kind: getattr(config, family.sides[kind].token_key, None) for kind in MODALITIES}
        self.temporal_patch_size = getattr(config.vision_config, "temporal_patch_size", 2)
        self.context = config.get_text_config().max_position_embeddings
        self.vocab_size = config.get_text_config().vocab_size
        takes = inspect.signature(model.forward).parameters
        # each token's modality, under the name the model takes it (transformers 5.10 on: the
        # Qwen-VL M-RoPE reads mm_token_type_ids; Gemma 3's image attention, token_type_ids)
        named = [name for name in ("mm_token_type_ids", "token_type_ids") if name in takes]
        self.token_types = named[0] if named else None
        # Our per-request GenerationConfig fills only what we set; generate fills the rest from
        # the model's, so the model's keeps nothing a request did not ask for (its sampling
        # defaults, its EOS ids: ignore_eos must be able to drop those).
        pad = defaults.pad_token_id if defaults.pad_token_id is not None else (self.eos_ids or (0,))[0]
        model.generation_config = GenerationConfig(pad_token_id=pad, bos_token_id=defaults.bos_token_id)
        self.model = model
        log.info(
            "model loaded",
            extra={"model": str(self.folder), "device": str(self.device), "dtype": str(model.dtype)},
        )

    # -- one request ----------------------------------------------------------------------

    async def generate(self, request: PreparedRequest) -> AsyncGenerator[EngineOutput, None]:
        if self.model is None:
            raise EngineHTTPError("the transformers engine is not started", 503, "not_ready")
        job = self._job(request)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        streamer = _TokenStreamer(lambda item: loop.call_soon_threadsafe(queue.put_nowait, item), job.sampler)
        loop.run_in_executor(self._executor, self._run, job, streamer)
        made, last = 0, None
        try:
            while True:
                items = [await queue.get()]
                while not queue.empty():  # a slow reader takes the tokens made meanwhile at once
                    items.append(queue.get_nowait())
                tokens = [item for item in items if isinstance(item, TokenLogprob)]
                if tokens:
                    made, last = made + len(tokens), tokens[-1].token_id
                    logprobs = tuple(tokens) if request.sampling.logprobs else ()
                    yield EngineOutput(token_ids=tuple(t.token_id for t in tokens), logprobs=logprobs)
                ended = [item for item in items if not isinstance(item, TokenLogprob)]
                if ended and isinstance(ended[0], BaseException):
                    raise EngineError(f"generate failed: {type(ended[0]).__name__}: {ended[0]}") from ended[0]
                if ended:
                    break
        finally:
            job.cancelled.set()  # a client that left, a stop string: the model stops within a step
        # A stop token, or max_new_tokens reached.
        finish: FinishReason = "stop" if last in job.stop_ids else "length"
        yield EngineOutput(finish_reason=finish, prompt_tokens=job.prompt_tokens, completion_tokens=made)

    def _run(self, job: _Job, streamer: _TokenStreamer) -> None:
        """generate, on the engine's thread; its end (or its failure) goes to the streamer."""
        try:
            if not job.cancelled.is_set():  # closed while it waited for the thread
                model = self.model
                if model is None:
                    raise EngineError("the transformers engine was stopped")
                config = GenerationConfig(
                    do_sample=False,  # the sampler forces its token: argmax takes it
                    max_new_tokens=job.max_new_tokens,
                    eos_token_id=sorted(job.stop_ids) or None,
                )
                model.generate(
                    **self._model_inputs(job.parts, model.dtype),
                    generation_config=config,
                    logits_processor=LogitsProcessorList([job.sampler]),
                    stopping_criteria=StoppingCriteriaList([_Cancelled(job.cancelled)]),
                    streamer=streamer,
                )
            if job.cancelled.is_set():  # a client gone, a stop string, max_tokens met by mmprep: routine
                log.debug(
                    "generation stopped after %d tokens: its request was closed",
                    len(job.sampler.records),
                    extra={"request_id": job.request_id},
                )
        except BaseException as error:  # the request's generator raises it
            streamer.send(error)
        else:
            streamer.send(END)

    def _job(self, request: PreparedRequest) -> _Job:
        """The model's inputs and the generation's settings, or a 400 saying what is wrong."""
        prompt = request.prompt
        if prompt is None:
            raise EngineHTTPError(
                "the transformers engine takes token ids: run mmprep serve with --model FOLDER (the model's "
                "tokenizer, chat template and processor) so that requests reach it rendered and tokenized",
                400,
                "prompt_required",
            )
        ids = np.asarray(prompt.token_ids, dtype=np.int64)
        if not ids.size or np.min(ids) < 0 or np.max(ids) >= self.vocab_size:
            raise EngineHTTPError(
                f"the prompt must be token ids of this model's vocabulary of {self.vocab_size}",
                400,
                "invalid_prompt",
                "messages",
            )
        sampling = request.sampling
        max_new_tokens = self._max_new_tokens(len(ids), sampling.max_tokens)
        # Each input as the parts it is joined from, joined on the engine's thread (pixels can be large)
        parts: dict[str, list[np.ndarray]] = {
            "input_ids": [ids[None]],
            "attention_mask": [np.ones((1, len(ids)), np.int64)],
        }
        types = np.zeros(len(ids), np.int64)
        for kind, items in _media_in_prompt_order(prompt, request.media).items():
            self._check_placeholders(ids, kind, items)
            types[ids == self.token_ids[kind]] = MODALITIES[kind].token_type_id  # transformers: 0 is text
            if items:
                parts.update(self._media_parts(kind, items))
        if self.token_types is not None:
            parts[self.token_types] = [types[None]]
        stop_ids = set(sampling.stop_token_ids) | (set() if sampling.ignore_eos else set(self.eos_ids))
        return _Job(
            request.request_id,
            parts,
            len(ids),
            max_new_tokens,
            frozenset(stop_ids),
            threading.Event(),
            _Sampler(sampling, stop_ids, len(ids), self.device),
        )

    def _model_inputs(
        self, parts: dict[str, list[np.ndarray]], pixel_dtype: torch.dtype
    ) -> dict[str, torch.Tensor]:
        """The joined inputs on the model's device; pixels in `pixel_dtype` (the model's). A
        part that needs no joining, writable and already right for the CPU, is used as it is
        (from a worker, the very buffer the request came in); a read-only one (the decode
        cache shares it) is copied once, straight to where it goes."""
        pixels = {side.tensor_names[0] for side in self.family.sides.values()}
        inputs = {}
        for key, arrays in parts.items():
            joined = np.concatenate(arrays) if len(arrays) > 1 else np.ascontiguousarray(arrays[0])
            dtype = pixel_dtype if key in pixels else None
            if joined.flags.writeable:
                inputs[key] = torch.from_numpy(joined).to(self.device, dtype=dtype)
            else:
                inputs[key] = torch.tensor(joined, device=self.device, dtype=dtype)
        return inputs

    def _max_new_tokens(self, prompt_length: int, max_tokens: int | None) -> int:
        """max_tokens, or all the context leaves; a prompt that leaves no room is refused, as
        vLLM does."""
        room = self.context - prompt_length
        if room < 1 or (max_tokens is not None and max_tokens > room):
            asked = prompt_length + (max_tokens or 1)
            raise EngineHTTPError(
                f"this model's maximum context length is {self.context} tokens; the prompt has "
                f"{prompt_length} and {max_tokens or 1} more were asked for ({asked} in all)",
                400,
                "context_length_exceeded",
                "max_tokens" if room >= 1 else "messages",
            )
        return room if max_tokens is None else max_tokens

    def _check_placeholders(self, ids: np.ndarray, kind: families.Kind, items: list[MediaItem]) -> None:
        processed = [_processed(item) for item in items]
        expected = sum(one.num_tokens for one in processed)
        token = self.token_ids[kind]
        found = int((ids == token).sum()) if token is not None else 0
        if found != expected or (items and token is None):
            raise EngineHTTPError(
                f"the prompt has {found} {kind} placeholder tokens, but its {len(items)} {kind}s make "
                f"{expected}: the prompt was not rendered for this model's processor",
                400,
                "placeholder_mismatch",
                "messages",
            )

    def _media_parts(self, kind: families.Kind, items: list[MediaItem]) -> dict[str, list[np.ndarray]]:
        """The items' tensors, to be joined as transformers' processor joins a batch's: each
        tensor the processor made (pixels, grids, Gemma 4's patch positions) in prompt order,
        under the family's names; for videos, what else the family's model takes (Qwen2.5-VL's
        second_per_grid_ts)."""
        side = self.family.sides[kind]
        pixels_key = side.tensor_names[0]
        keys = [name for name in side.tensor_names if name is not None]
        keys += [name for name in _processed(items[0]).tensors if name not in keys]
        keys = [name for name in keys if name not in side.unused_input_names]
        try:
            parts = {key: [_processed(item).tensors[key] for item in items] for key in keys}
        except KeyError as missing:
            raise EngineHTTPError(
                f"a processed {kind} lacks its {missing} tensor", 400, "unprocessed_media"
            ) from None
        parts[pixels_key] = side.batch_pixels(parts[pixels_key])
        if MODALITIES[kind].timed:
            videos = [item.sampled_video() for item in items]
            inputs = self.family.transformers_video_inputs(videos, self.temporal_patch_size)
            parts.update({key: [value] for key, value in inputs.items()})
        return parts


@dataclass
class _Job:
    request_id: str
    parts: dict[str, list[np.ndarray]]  # the model's inputs, each as the parts it is joined from
    prompt_tokens: int
    max_new_tokens: int
    stop_ids: frozenset[int]
    cancelled: threading.Event
    sampler: _Sampler


class _Sampler(LogitsProcessor):
    """Chooses each token from the raw logits, records its raw logprob (and the top
    alternatives), and returns scores in which only the chosen token is finite."""

    def __init__(
        self, sampling: SamplingParams, stop_ids: set[int], prompt_length: int, device: torch.device
    ):
        self.sampling = sampling
        self.greedy = not sampling.temperature  # 0 or unset
        self.prompt_length = prompt_length
        self.held_off = torch.tensor(sorted(stop_ids), dtype=torch.long, device=device)  # until min_tokens
        self.generator = torch.Generator(device=device)
        if sampling.seed is not None:
            self.generator.manual_seed(sampling.seed)
        else:
            self.generator.seed()
        self.records: list[TokenLogprob] = []  # one per step, in order; the streamer pairs them with tokens

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        raw = scores[0].float()
        logits = raw
        if input_ids.shape[1] - self.prompt_length < self.sampling.min_tokens and len(self.held_off):
            logits = raw.index_fill(0, self.held_off, float("-inf"))
        token = int(torch.argmax(logits)) if self.greedy else self._sample(logits)
        self.records.append(self._logprob(raw, token))
        forced = torch.full_like(scores, float("-inf"))
        forced[0, token] = 0.0
        return forced

    def _sample(self, logits: torch.Tensor) -> int:
        logits = logits / self.sampling.temperature
        top_k = self.sampling.top_k
        if top_k is not None and 0 < top_k < logits.numel():  # 0 and -1 mean every token, as in vLLM
            kth = torch.topk(logits, top_k).values[-1]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        probs = torch.softmax(logits, dim=-1)
        top_p = self.sampling.top_p
        if top_p is not None and top_p < 1.0:
            # the smallest set of the likeliest tokens holding top_p of the mass (at least one)
            ordered, order = probs.sort(descending=True)
            outside = ordered.cumsum(0) - ordered > top_p
            probs = torch.zeros_like(probs).scatter(0, order, ordered.masked_fill(outside, 0.0))
        return int(torch.multinomial(probs, 1, generator=self.generator))

    def _logprob(self, raw: torch.Tensor, token: int) -> TokenLogprob:
        if not self.sampling.logprobs:
            return TokenLogprob(token, 0.0)
        logprobs = torch.log_softmax(raw, dim=-1)
        top: tuple[tuple[int, float], ...] = ()
        if self.sampling.top_logprobs:
            values, ids = logprobs.topk(self.sampling.top_logprobs)
            top = tuple(zip(ids.tolist(), values.tolist(), strict=True))
        return TokenLogprob(token, float(logprobs[token]), top)


class _TokenStreamer(BaseStreamer):
    """generate's streamer: each new token, with its sampler's record, to `send`."""

    def __init__(self, send, sampler: _Sampler):
        self.send = send
        self._sampler = sampler
        self._prompt_seen = False
        self._made = 0

    def put(self, value: torch.Tensor) -> None:
        if not self._prompt_seen:  # generate puts the prompt first
            self._prompt_seen = True
            return
        for _ in value.reshape(-1).tolist():  # the sampler's token: it forced it
            self.send(self._sampler.records[self._made])
            self._made += 1

    def end(self) -> None:
        pass  # _run sends the end once generate has returned


class _Cancelled(StoppingCriteria):
    def __init__(self, flag: threading.Event):
        self.flag = flag

    def __call__(self, input_ids: torch.LongTensor, scores, **kwargs) -> torch.BoolTensor:
        return torch.full(
            (input_ids.shape[0],), self.flag.is_set(), dtype=torch.bool, device=input_ids.device
        )


def _processed(item: MediaItem) -> ProcessedMedia:
    if item.processed is None:
        raise EngineHTTPError(
            f"{item.param} reached the transformers engine without its processed tensors: run mmprep "
            "serve with --model FOLDER (or --processor) so the model's vision processor makes them",
            400,
            "unprocessed_media",
            item.param,
        )
    return item.processed


def _media_in_prompt_order(
    prompt: TokenPrompt, media: list[MediaItem]
) -> dict[families.Kind, list[MediaItem]]:
    """Each kind's items in the order their placeholders come in the prompt, as
    transformers' processor lays out a batch's pixels."""
    placeholders = sorted(prompt.placeholders, key=lambda p: p.offset) or [
        Placeholder(item.kind, index, 0, 0) for index, item in enumerate(media)
    ]
    ordered: dict[families.Kind, list[MediaItem]] = {kind: [] for kind in MODALITIES}
    for placeholder in placeholders:
        if not 0 <= placeholder.media_index < len(media):
            raise EngineHTTPError(
                f"a placeholder names media item {placeholder.media_index}, which the request lacks",
                400,
                "placeholder_mismatch",
                "messages",
            )
        ordered[placeholder.modality].append(media[placeholder.media_index])
    return ordered


def _ids(value) -> tuple[int, ...]:
    if value is None:
        return ()
    return (int(value),) if isinstance(value, int) else tuple(int(v) for v in value)


# -- options ------------------------------------------------------------------------------


def _check_variables() -> None:
    """A MMPREP_TRANSFORMERS_ variable we do not read is a typo (mmprep's own check leaves them to us)."""
    known = (MODEL_VARIABLE, DEVICE_VARIABLE, DTYPE_VARIABLE)
    unknown = sorted(key for key in os.environ if key.upper().startswith(PREFIX) and key.upper() not in known)
    if unknown:
        raise ValueError(
            f"unknown setting(s) in the environment: {', '.join(unknown)}; the transformers engine "
            f"reads {', '.join(known)}"
        )


def _option(value, variable: str, argument: str) -> tuple[str | None, str]:
    """The argument if given, else the environment variable; and how to name it in an error."""
    if value is not None:
        return str(value), f"the {argument} argument"
    return os.environ.get(variable), variable


def _model_folder(model) -> Path:
    value, name = _option(model, MODEL_VARIABLE, "model")
    if not value:
        raise ValueError(f"{name} must name the model folder (its config.json and weights)")
    folder = Path(value)
    config = folder / "config.json"
    if not config.is_file():
        raise ValueError(f"{name}={value}: no such model folder (it has no config.json)")
    try:
        json.loads(config.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{name}={value}: config.json is not JSON: {error}") from error
    if not any(folder.glob("*.safetensors")) and not any(folder.glob("pytorch_model*.bin")):
        raise ValueError(f"{name}={value}: the folder has no weights (*.safetensors or pytorch_model*.bin)")
    return folder


def _device(device) -> torch.device:
    value, name = _option(device, DEVICE_VARIABLE, "device")
    if not value:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        parsed = torch.device(value)
    except (RuntimeError, ValueError) as error:
        raise ValueError(f"{name}={value}: not a torch device (cpu, cuda, cuda:1, ...): {error}") from error
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{name}={value}: this machine has no CUDA device torch can use")
    if parsed.type == "cuda" and parsed.index is not None and parsed.index >= torch.cuda.device_count():
        raise ValueError(f"{name}={value}: this machine has {torch.cuda.device_count()} CUDA devices")
    return parsed


def _dtype(dtype) -> str:
    value, name = _option(dtype, DTYPE_VARIABLE, "dtype")
    if not value:
        return "auto"
    if value not in DTYPES:
        raise ValueError(f"{name}={value}: choose one of {', '.join(DTYPES)}")
    return value
