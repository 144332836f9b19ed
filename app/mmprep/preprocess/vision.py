"""The model's vision processor (`mmprep serve --processor`): each video (frame by frame,
as it is decoded) or image becomes the tensors the model takes, and its placeholder tokens
are counted against `--max-vision-tokens`.

A video's token count is known from its planned frame count and size, before any frame is
decoded (processors count without pixels): the decoder calls `frame_rule`'s rule once it
has planned, so a video that alone exceeds the limit is refused before it is decoded. The
request's total is checked once everything is loaded, before any engine work.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from mmprep import families
from mmprep.decoders import DecodedImage, VideoSampling
from mmprep.processors import ProcessedMedia, Processor, ProcessorConfigError, load_processor

from ..core.config import Settings
from ..core.errors import ServiceError
from ..model import load_model_folder
from ..model.dtype import model_dtype
from .loader_picks import LoaderPicks
from .options import processing_layers

# Processors made for requests' own processing keys, kept for the next request that sends
# the same (a processor is two small configs; making one reads the folder's configs again).
REQUEST_PROCESSORS = 32


def normalizes_on_device(settings: Settings, family: str) -> bool:
    """--mm-device-do-normalize as given, else vLLM's default for the model where mmprep
    speaks vLLM's wire (with --model: the render route, --engine vllm-generate). With
    --processor alone, and for engines that run the model on these tensors themselves
    (workers, --engine-class: transformers' models take normalized pixels), transformers'
    normalized form unless the raw one is asked for. vLLM's default is its model's
    supports_mm_device_do_normalize (the family's `device_normalizes`): for those models its
    renderer sends uint8 patches and the model's first layer rescales and normalizes them.
    Asked for a model without it, vLLM turns it off (ModelConfig, with a warning): so does
    mmprep where it speaks vLLM's wire."""
    known = families.find(family)  # a family mmprep does not know: transformers' form
    vllm_wire = speaks_vllm(settings)
    if settings.mm_device_do_normalize is not None:
        if (
            settings.mm_device_do_normalize
            and vllm_wire
            and known is not None
            and not known.device_normalizes
        ):
            return False
        return settings.mm_device_do_normalize
    return vllm_wire and known is not None and known.device_normalizes


def speaks_vllm(settings: Settings) -> bool:
    """Whether mmprep stands in for vLLM's renderer: a --model folder, and an engine that
    takes vLLM's wire (the render route, --engine vllm-generate, an upstream), not workers
    or an --engine-class that runs transformers' model on the tensors. There a video gets
    the frames vLLM's loader takes for the model (VisionProcessing.loader_picks)."""
    return settings.model is not None and settings.engine_class is None and settings.engine != "workers"


class VisionProcessing:
    def __init__(
        self,
        processor: Processor,
        resize: str,
        max_tokens: int | None,
        normalizes_on_device: bool = False,
        vllm_frames: bool = False,
        source: str | None = None,
        layers: dict[str, dict[str, Any]] | None = None,
        context_len: int | None = None,
    ):
        self.processor = processor
        self.normalizes_on_device = normalizes_on_device  # the processor leaves the pixels uint8 for it
        self.vllm_frames = vllm_frames  # videos sampled as vLLM's loader for the model samples them
        self._ffmpeg_resize = resize == "ffmpeg"
        self._max_tokens = max_tokens
        # with --model: the model's context; an item past it alone is refused before it is decoded
        self._context_len = context_len
        # What the processor was made from: the folder, family or preset it loads, and the
        # processor options laid over its configs per modality (processing_layers)
        self._source, self._layers = source, layers or {}
        self._for_requests: OrderedDict[str, VisionProcessing] = OrderedDict()

    @classmethod
    def from_settings(cls, settings: Settings) -> VisionProcessing | None:
        """--processor's processor, else the --model folder's (its own, or --processor's), with
        --mm-processor-kwargs' processing keys over its configs (processor_for)."""
        made = processor_for(settings)
        if made is None:
            return None
        processor, source, layers, on_device = made
        return cls(
            processor,
            settings.processor_resize,
            settings.max_vision_tokens,
            on_device,
            speaks_vllm(settings),
            source,
            layers,
            settings.max_model_len,
        )

    def for_request(self, mm_processor_kwargs: dict[str, Any] | None) -> VisionProcessing:
        """This processing with a request's processor options: the processing keys of
        `mm_processor_kwargs` (the request's over the server's, merged) over the configs, as
        vLLM's processor runs with them; itself where they are the server's. A ServiceError
        (400) names a key that cannot be."""
        layers = processing_layers(mm_processor_kwargs, self.processor.family, self.normalizes_on_device)
        if layers == self._layers or self._source is None:
            return self
        key = json.dumps(layers, sort_keys=True, default=repr)
        made = self._for_requests.get(key)
        if made is None:
            processor = _made(
                self._source,
                layers,
                self.vllm_frames,
                self.normalizes_on_device,
                "mm_processor_kwargs",
                self.processor.dtype,
            )
            made = VisionProcessing(
                processor,
                "ffmpeg" if self._ffmpeg_resize else "exact",
                self._max_tokens,
                self.normalizes_on_device,
                self.vllm_frames,
                self._source,
                layers,
                self._context_len,
            )
            self._for_requests[key] = made
            while len(self._for_requests) > REQUEST_PROCESSORS:
                self._for_requests.popitem(last=False)
        else:
            self._for_requests.move_to_end(key)
        return made

    @property
    def cache_key(self) -> tuple:
        """All of this processing that changes its tensors, hashable: the family, its
        configs (the pixel form is their do_rescale and do_normalize; the audio's feature
        extractor), the floats' dtype, the resize, and whether videos get vLLM's frames
        (loader_picks)."""
        processor = self.processor
        return (
            processor.family,
            processor.video_config,
            processor.image_config,
            processor.audio_config,
            processor.dtype,
            self._ffmpeg_resize,
            self.vllm_frames,
        )

    def frame_rule(self, num_frames: int, height: int, width: int) -> tuple[int, int]:
        """decode_video's frame_size rule: refuse a video whose tokens alone are too many;
        with --processor-resize ffmpeg, the size the processor resizes to (FFmpeg's scaler
        gets there while decoding), else the size unchanged (the processor resizes)."""
        self._check_video_tokens(self.processor.video_tokens(num_frames, height, width))
        if self._ffmpeg_resize:
            return self.processor.video_size(num_frames, height, width)
        return height, width

    def loader_picks(self, sampling: VideoSampling, default_fps: float, limit: int) -> LoaderPicks | None:
        """decode_video's frame_picks rule where vLLM's loader rule applies (mmprep speaks
        vLLM's wire: loader_picks.py): the frames vLLM's loader for the model takes for the
        request's fps and num_frames (a Qwen-VL loader: the fps, else `default_fps`); at most
        the request's own max_frames, and `limit` (--max-frames) or a 400. None elsewhere:
        the sampling contract (docs/sampling.md, "The model's own rule")."""
        if not self.picks_frames:
            return None
        asked = families.FramesAsked(sampling.fps, sampling.num_frames, sampling.max_frames, default_fps)
        return LoaderPicks(families.get(self.processor.family), asked, limit)

    @property
    def picks_frames(self) -> bool:
        """Whether videos get the frames vLLM's loader for the model takes (loader_picks)."""
        return self.vllm_frames and families.find(self.processor.family) is not None

    def decoder_threads(self, threads: int) -> int:
        """FFmpeg threads for a video whose frames the processor takes as they come, out of
        the decode's share of the cores. With the processor's resize, half of it: the
        processor (with the whole share) does most of the work, about twice the decode's, on
        the cores the decoder leaves, and the decoder's own extra threads cost more CPU than
        they save then (on 2 cores, 32 frames of 720p for qwen2_vl: 508 CPU-ms and 281 ms
        with one, 554 and 293 with two). With FFmpeg's, all of it: the resize is the decoder's."""
        return threads if self._ffmpeg_resize else max(1, threads // 2)

    def process_image(self, image: DecodedImage) -> ProcessedMedia:
        """The model's tensors for one image (a ProcessorError if it cannot be). Videos are
        processed as they are decoded: the processor's stream_video, fed by decode_video."""
        self.check_tokens(self.processor.image_tokens(*image.pixels.shape[:2]), "this image")
        return self.processor.process_image(image.pixels)

    def _check_video_tokens(self, tokens: int) -> None:
        """check_tokens for a video, before it is decoded; and a 400 if it alone is past the
        model's context. vLLM refuses such a prompt too (with the whole prompt's count), but
        only once it has decoded it all: a 2-minute 1080p clip at 2 fps is 30 CPU-s and 320k
        tokens for Qwen2.5-VL. An image is cheap to decode: it gets vLLM's own refusal."""
        if self._context_len is not None and tokens > self._context_len:
            raise ServiceError(
                f"this video alone comes to {tokens} tokens, more than the model's maximum context "
                f"length ({self._context_len}); ask for fewer or smaller frames",
                "context_length_exceeded",
            )
        self.check_tokens(tokens, "this video")

    def check_tokens(self, tokens: int, what: str, param: str | None = None) -> None:
        """A 400 if `tokens` (of `what`: an item, or the request) exceed --max-vision-tokens."""
        if self._max_tokens is not None and tokens > self._max_tokens:
            raise ServiceError(
                f"{what} comes to {tokens} vision tokens, more than the {self._max_tokens} allowed "
                "(--max-vision-tokens); ask for fewer or smaller frames",
                "too_many_vision_tokens",
                param,
            )


def processor_for(settings: Settings) -> tuple[Processor, str, dict[str, dict[str, Any]], bool] | None:
    """The processor the settings name (--processor's, else the --model folder's) with
    --mm-processor-kwargs' processing keys over its configs, as vLLM makes its processor with
    them; with what it was made from (its source, those keys per modality) and whether the
    model normalizes its pixels on the device. Where mmprep speaks vLLM's wire, its floating
    tensors are in the model's dtype (--dtype, resolved as vLLM resolves it), as vLLM's
    processor casts them; else float32, transformers' own. None without one; a ServiceError
    names a key that cannot be."""
    dtype = "float32"
    if settings.model is not None:
        folder = load_model_folder(str(settings.model), settings.processor)
        family = folder.family
        source = settings.processor if settings.processor is not None else str(settings.model)
        if speaks_vllm(settings):
            dtype = model_dtype(settings.dtype, folder.config)
    elif settings.processor is not None:
        family = load_processor(settings.processor).family
        source = settings.processor
    else:
        return None
    on_device = normalizes_on_device(settings, family)
    layers = processing_layers(settings.mm_processor_kwargs, family, on_device)
    processor = _made(source, layers, speaks_vllm(settings), on_device, "--mm-processor-kwargs", dtype)
    return processor, source, layers, on_device


def _made(
    source: str,
    layers: dict[str, dict[str, Any]],
    vllm_renders: bool,
    on_device: bool,
    where: str,
    dtype: str = "float32",
) -> Processor:
    """The processor `source` loads, `layers` over its configs, as vLLM's renderer runs it
    (as_vllm_renders), with raw pixels where the model normalizes them itself, its floats in
    `dtype`."""
    try:
        processor = load_processor(source, layers)
    except ProcessorConfigError as error:
        message = f"{where}: {str(error).removeprefix('mm_processor_kwargs: ')}"
        raise ServiceError(message, "invalid_processor_option", where.lstrip("-").replace("-", "_")) from None
    if vllm_renders:
        processor = processor.as_vllm_renders()
    if on_device:
        processor = processor.with_raw_pixels()
    return processor.in_dtype(dtype)
