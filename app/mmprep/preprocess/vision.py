"""The model's vision processor (`mmprep serve --processor`): each video (frame by frame,
as it is decoded) or image becomes the tensors the model takes, and its placeholder tokens
are counted against `--max-vision-tokens`.

A video's token count is known from its planned frame count and size, before any frame is
decoded (processors count without pixels): the decoder calls `frame_rule`'s rule once it
has planned, so a video that alone exceeds the limit is refused before it is decoded. The
request's total is checked once everything is loaded, before any engine work.
"""

from __future__ import annotations

import copy

from mmprep import families
from mmprep.decoders import DecodedImage, VideoSampling
from mmprep.processors import ProcessedMedia, Processor, load_processor

from ..core.config import Settings
from ..core.errors import ServiceError
from ..model import load_model_folder
from .loader_picks import LoaderPicks


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
    the frames vLLM's loader takes for the model (VisionProcessing.frame_picks)."""
    return settings.model is not None and settings.engine_class is None and settings.engine != "workers"


class VisionProcessing:
    def __init__(
        self,
        processor: Processor,
        resize: str,
        max_tokens: int | None,
        normalizes_on_device: bool = False,
        vllm_frames: bool = False,
    ):
        self.processor = processor
        self.normalizes_on_device = normalizes_on_device  # the processor leaves the pixels uint8 for it
        self.vllm_frames = vllm_frames  # videos sampled as vLLM's loader for the model samples them
        self._ffmpeg_resize = resize == "ffmpeg"
        self._max_tokens = max_tokens

    @classmethod
    def from_settings(cls, settings: Settings) -> VisionProcessing | None:
        """--processor's processor, else the --model folder's (its own, or --processor's)."""
        if settings.model is not None:
            processor = load_model_folder(str(settings.model), settings.processor).processor
        elif settings.processor is not None:
            processor = load_processor(settings.processor)
        else:
            return None
        if speaks_vllm(settings):
            processor = processor.as_vllm_renders()
        on_device = normalizes_on_device(settings, processor.family)
        if on_device:
            processor = processor.with_raw_pixels()
        processor.preload()  # torch's import (2 CPU-s here) at start, not in the first image request
        return cls(
            processor, settings.processor_resize, settings.max_vision_tokens, on_device, speaks_vllm(settings)
        )

    @property
    def cache_key(self) -> tuple:
        """All of this processing that changes its tensors, hashable: the family, both
        configs (the pixel form is their do_rescale and do_normalize), the resize, and
        whether videos get vLLM's frames (frame_picks)."""
        processor = self.processor
        return (
            processor.family,
            processor.video_config,
            processor.image_config,
            self._ffmpeg_resize,
            self.vllm_frames,
        )

    def with_options(self, kind: families.Kind, options: tuple) -> VisionProcessing:
        """This processing with a request's per-call processor options for `kind`'s items
        set ((key, value) pairs of Side.request_keys: Gemma 3's pan-and-scan); a
        ProcessorConfigError names a value of the wrong type."""
        if not options:
            return self
        changed = copy.copy(self)
        changed.processor = self.processor.with_options(kind, dict(options))
        return changed

    def frame_rule(self, num_frames: int, height: int, width: int) -> tuple[int, int]:
        """decode_video's frame_size rule: refuse a video whose tokens alone are too many;
        with --processor-resize ffmpeg, the size the processor resizes to (FFmpeg's scaler
        gets there while decoding), else the size unchanged (the processor resizes)."""
        self.check_tokens(self.processor.video_tokens(num_frames, height, width), "this video")
        if self._ffmpeg_resize:
            return self.processor.video_size(num_frames, height, width)
        return height, width

    def loader_picks(self, sampling: VideoSampling, default_fps: float, limit: int) -> LoaderPicks | None:
        """decode_video's frame_picks rule where the model's own rule applies (mmprep speaks
        vLLM's wire, and vLLM has a loader of the model's own: loader_picks.py): the frames
        it takes, sampled at the request's fps, else `default_fps`, whatever num_frames says;
        at most the request's own max_frames, and `limit` (--max-frames) or a 400. None
        elsewhere: the sampling contract (docs/sampling.md, "The model's own rule")."""
        if not self.picks_frames:
            return None
        fps = sampling.fps if sampling.fps is not None else default_fps
        return LoaderPicks(families.get(self.processor.family), fps, sampling.max_frames, limit)

    @property
    def picks_frames(self) -> bool:
        """Whether videos get the frames vLLM's own loader for the model takes (loader_picks)."""
        family = families.find(self.processor.family)
        return self.vllm_frames and family is not None and family.vllm_video_loader != "opencv"

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

    def check_tokens(self, tokens: int, what: str, param: str | None = None) -> None:
        """A 400 if `tokens` (of `what`: an item, or the request) exceed --max-vision-tokens."""
        if self._max_tokens is not None and tokens > self._max_tokens:
            raise ServiceError(
                f"{what} comes to {tokens} vision tokens, more than the {self._max_tokens} allowed "
                "(--max-vision-tokens); ask for fewer or smaller frames",
                "too_many_vision_tokens",
                param,
            )
