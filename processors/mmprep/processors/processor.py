"""`Processor`: a model family's vision processor (resize to its grid, rescale, normalize,
patchify) for videos and images, and its audio feature extractor where the family has one
(audio_features.py), equal to transformers' output, its floating tensors in the processor's
dtype (float32 unless made `in_dtype` another, as vLLM casts them: dtypes.py)."""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np

import mmprep.families as families

from . import tiles
from .audio_features import AudioConfig, log_mel
from .config import ProcessorConfig
from .dtypes import FLOAT_DTYPES, cast
from .errors import ProcessorConfigError, ProcessorInputError
from .patches import PatchWriter, ProcessedMedia
from .streaming import VideoStream


def default_threads() -> int:
    """Every core this process may use, as torch does."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class Processor:
    """One family's image and video processors, each from its own config (`image` may be
    None when a model folder has no image processor config), and its audio feature extractor
    (`audio`: None for a family whose processor has none). `dtype`: the floating tensors'
    (one of dtypes.FLOAT_DTYPES)."""

    def __init__(
        self,
        video: ProcessorConfig,
        image: ProcessorConfig | None,
        audio: AudioConfig | None = None,
        dtype: str = "float32",
    ):
        if dtype not in FLOAT_DTYPES:
            raise ProcessorConfigError(
                f"a processor's dtype is one of {', '.join(FLOAT_DTYPES)}, not {dtype!r}"
            )
        self.video_config = video
        self.image_config = image
        self.audio_config = audio
        self.dtype = dtype
        # each side's config under its modality's name
        self._configs = {config.kind: config for config in (image, video) if config is not None}

    @property
    def family(self) -> str:
        return self.video_config.family

    def config(self, kind: families.Kind) -> ProcessorConfig | None:
        """The config of the processor for `kind`'s items (None: this processor has none)."""
        return self._configs.get(kind)

    def with_raw_pixels(self) -> Processor:
        """This processor with rescale and normalize off on both sides: the patches stay the
        resized uint8 pixels, for a model that normalizes them itself on the device (as
        vLLM's renderer calls transformers' processor with mm_device_do_normalize on)."""

        def raw(config: ProcessorConfig) -> ProcessorConfig:
            return replace(config, do_rescale=False, do_normalize=False)

        image = raw(self.image_config) if self.image_config is not None else None
        return Processor(raw(self.video_config), image, self.audio_config, self.dtype)

    def in_dtype(self, dtype: str) -> Processor:
        """This processor with its floating tensors (normalized pixels, audio features) in
        `dtype`, as vLLM's processor casts transformers' outputs to the model's dtype
        (`BatchFeature.to(dtype)`: bfloat16 rounded to nearest, ties to even). The pixels are
        written so straight away (patches.Normalizer), at no cost; uint8 pixels stay uint8."""
        return Processor(self.video_config, self.image_config, self.audio_config, dtype)

    def as_vllm_renders(self) -> Processor:
        """This processor as vLLM's renderer runs it: where vLLM sends a family's video frames
        through its image processor (Family.vllm_frames_as_images: Gemma 4), the frames are
        rescaled and normalized as the image side does it (Gemma 4's image side multiplies by
        1/255 where its video side divides by 255: the same values to within one bit)."""
        if not self._family().vllm_frames_as_images or self.image_config is None:
            return self
        image = self.image_config
        video = replace(
            self.video_config,
            do_rescale=image.do_rescale,
            rescale_factor=image.rescale_factor,
            do_normalize=image.do_normalize,
            image_mean=image.image_mean,
            image_std=image.image_std,
        )
        return Processor(video, image, self.audio_config, self.dtype)

    def tensor_names(self, kind: families.Kind) -> tuple[str, str | None]:
        """(the pixels' name, the grid's name) of this kind's tensors, as transformers names them."""
        return self._family().sides[kind].tensor_names

    def __repr__(self) -> str:
        return (
            f"Processor(family={self.family!r}, video={self.video_config}, image={self.image_config}, "
            f"audio={self.audio_config}, dtype={self.dtype!r})"
        )

    # -- sizes and token counts, without any pixels: what a decoder can scale straight to --

    def video_size(self, num_frames: int, height: int, width: int) -> tuple[int, int]:
        """(height, width) that frames of this size are resized to in a clip of `num_frames`."""
        config = self.video_config
        self._check_taken(config)
        _check_dimensions(height, width)
        if not config.do_resize:
            return _unresized(config, height, width)
        try:
            return self._family().video_size(config, num_frames, height, width)
        except families.SizeError as error:
            raise ProcessorInputError(str(error)) from None

    def image_size(self, height: int, width: int) -> tuple[int, int]:
        """(height, width) that an image of this size is resized to."""
        config = self._image()
        self._check_taken(config)
        _check_dimensions(height, width)
        if not config.do_resize:
            return _unresized(config, height, width)
        try:
            return self._family().image_size(config, height, width)
        except families.SizeError as error:
            raise ProcessorInputError(str(error)) from None

    def video_grid(self, num_frames: int, height: int, width: int) -> tuple[int, int, int]:
        """The video_grid_thw (temporal blocks, patch rows, patch columns) of a clip of
        `num_frames` frames of height x width."""
        config = self.video_config
        resized_height, resized_width = self.video_size(num_frames, height, width)
        grid_t = -(-num_frames // config.temporal_patch_size)
        return grid_t, resized_height // config.patch_size, resized_width // config.patch_size

    def video_tokens(self, num_frames: int, height: int, width: int) -> int:
        """Placeholder tokens for a clip of `num_frames` frames of height x width."""
        if self._tiled():
            self.video_size(num_frames, height, width)  # its checks
            return self._family().video.tile_tokens(self.video_config, num_frames, height, width)
        grid_t, grid_h, grid_w = self.video_grid(num_frames, height, width)
        return grid_t * grid_h * grid_w // self.video_config.merge_size**2

    def image_tokens(self, height: int, width: int) -> int:
        """Placeholder tokens for one image of height x width."""
        config = self._image()
        resized_height, resized_width = self.image_size(height, width)
        if self._tiled():
            return self._family().image.tile_tokens(config, 1, height, width)
        return (
            (resized_height // config.patch_size)
            * (resized_width // config.patch_size)
            // config.merge_size**2
        )

    # -- the work --

    def process_video(self, frames: np.ndarray, threads: int | None = None) -> ProcessedMedia:
        """`frames`: uint8 (T, H, W, 3) RGB, already sampled. A clip whose length is not a
        multiple of temporal_patch_size is padded with copies of its last frame.
        `threads`: frames processed at once (default: one per core)."""
        _check_pixels(frames, 4, "frames", "(T, H, W, 3)")
        with self.stream_video(threads) as stream:
            return stream.result(frames)

    def stream_video(self, threads: int | None = None) -> VideoStream:
        """process_video's work started as frames are decoded: pass its `add` as
        decode_video's on_frame, then ask it for `result(video.frames)` (streaming.py)."""
        return VideoStream(self, threads or default_threads())

    def process_image(self, image: np.ndarray) -> ProcessedMedia:
        """`image`: uint8 (H, W, 3) RGB; one temporal block of `temporal_patch_size` copies."""
        config = self._image()
        _check_pixels(image, 3, "image", "(H, W, 3)")
        resized_height, resized_width = self.image_size(*image.shape[:2])
        if self._tiled():
            return tiles.process_image(config, image, self.image_tokens(*image.shape[:2]), self.dtype)
        writer = PatchWriter(config, self._family().image, 1, resized_height, resized_width, self.dtype)
        writer.write(image, 0, copies=writer.temporal)
        return writer.processed()

    def process_audio(self, waveform: np.ndarray) -> ProcessedMedia:
        """`waveform`: float32 (N,) mono at `audio_config.sampling_rate`. Its features as
        transformers' processor returns them for one item (input_features (1, frames, mels),
        in the processor's dtype, input_features_mask (1, frames)); num_tokens: the soft
        tokens it stands for."""
        config = self._audio()
        features, mask = log_mel(waveform, config.features)
        tokens = self._family().audio.soft_tokens(int(np.count_nonzero(mask)), config.seq_length)
        features = cast(features[None], self.dtype)
        return ProcessedMedia({"input_features": features, "input_features_mask": mask[None]}, tokens)

    def _audio(self) -> AudioConfig:
        if self.audio_config is None:
            raise ProcessorInputError(f"{self.family} models take no audio")
        return self.audio_config

    def video_writer(self, num_frames: int, height: int, width: int) -> PatchWriter | tiles.TileWriter:
        """The output a clip of `num_frames` frames of height x width is written into, in
        its family's layout (sized as video_size gives)."""
        resized = self.video_size(num_frames, height, width)
        if self._tiled():
            count = self.video_tokens(num_frames, height, width)
            return tiles.TileWriter(
                self.video_config, self._family().video, num_frames, *resized, count, self.dtype
            )
        grid_t, _, _ = self.video_grid(num_frames, height, width)
        return PatchWriter(self.video_config, self._family().video, grid_t, *resized, self.dtype)

    # -- helpers --

    def _check_taken(self, config: ProcessorConfig) -> None:
        """A ProcessorInputError for a side whose modality the family's models do not take
        (Gemma 3's video): every size, count and tensor of that side asks here first."""
        if not config.side().taken:
            raise ProcessorInputError(f"{self.family} models take no {config.kind}")

    def _tiled(self) -> bool:
        return self._family().layout == "tiles"

    def _image(self) -> ProcessorConfig:
        if self.image_config is None:
            raise ProcessorConfigError("this processor was loaded without an image processor config")
        return self.image_config

    def _family(self) -> families.Family:
        """The family whose rules size this processor's frames and name its tensors."""
        return families.get(self.video_config.family)


def _check_dimensions(height: int, width: int) -> None:
    if height < 1 or width < 1:
        raise ProcessorInputError(f"frames must be at least 1x1, got {width}x{height}")


def _unresized(config: ProcessorConfig, height: int, width: int) -> tuple[int, int]:
    if height % config.factor or width % config.factor:
        raise ProcessorInputError(
            f"do_resize is off, so frames must have both sides multiples of {config.factor}, "
            f"got {width}x{height}"
        )
    return height, width


def _check_pixels(array: object, ndim: int, name: str, layout: str) -> None:
    if not isinstance(array, np.ndarray):
        raise ProcessorInputError(
            f"{name} must be a numpy array {layout} of uint8 RGB, got {type(array).__name__}"
        )
    if array.dtype != np.uint8:
        raise ProcessorInputError(f"{name} must be uint8 RGB, got dtype {array.dtype}")
    if array.ndim != ndim or array.shape[-1] != 3 or 0 in array.shape:
        raise ProcessorInputError(f"{name} must be shaped {layout} with 3 channels (RGB), got {array.shape}")
