"""Video: a `video_url` part, its sampling keys (the part's own, over the request's, over the
server's defaults), decoded with PyAV to sampled frames, each frame's timestamp and index kept.

What a request may say of a video's sampling, and how vLLM's spellings read, is here
(`sampling_keys`); where the request as a whole says it is preprocess/options.py's.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass, fields
from numbers import Real
from typing import Any, Self

import numpy as np

from mmprep.decoders import DecodedVideo, InvalidSamplingError, VideoSampling, decode_video

from ..core.config import MediaSettings
from ..core.errors import ServiceError
from ..interface.prepared import MediaItem
from .base import DecodeContext, Loaded, Modality, part_error

# What a request may say of a video's sampling: VideoSampling's fields but the server's max_pixels.
SAMPLING_KEYS = tuple(field.name for field in fields(VideoSampling) if field.name != "max_pixels")
# vLLM's video loader keys, by what mmprep does with them.
FRAME_RECOVERY = "frame_recovery"  # true: what mmprep always does (a frame FFmpeg cannot produce is
#                                    replaced by the frame on screen at its time); false: refused
REFUSED_KEYS = {
    "max_duration": "mmprep samples the whole video; cut it shorter, or bound the frames with max_frames",
}


@dataclass(frozen=True, kw_only=True)
class LoadedVideo(Loaded[DecodedVideo]):
    # Where the model's own rule picked the frames (preprocess/loader_picks.py): its
    # transformers metadata as vLLM's loader writes it, and how its frames were picked
    hf_metadata: dict[str, Any] | None = None
    picks: dict[str, Any] | None = None

    @property
    def tensor(self) -> np.ndarray:
        return self.decoded.frames

    def item(self, param: str) -> MediaItem:
        video = self.decoded
        return MediaItem(
            kind=VIDEO.name,
            tensor=video.frames,
            metadata=video.metadata.to_dict() | (self.picks or {}),
            param=param,
            timestamps=video.timestamps,
            indices=video.indices,
            hf_metadata=self.hf_metadata or video.to_hf_metadata(),
            processed=self.processed,
        )


@dataclass(frozen=True)
class Video(Modality[DecodedVideo]):
    """The video record, with the sampling a part's decode takes (for_part binds a part's;
    the table's record samples as VideoSampling's defaults)."""

    name = "video"
    part_type = "video_url"
    timed = True
    token_type_id = 2
    processor_scope = "videos_kwargs"

    sampling: VideoSampling = VideoSampling()

    def part_options(self, value: dict[str, Any], param: str) -> dict[str, Any]:
        """The sampling keys a video_url part carries itself (its other key is `url`)."""
        return sampling_keys({key: item for key, item in value.items() if key != "url"}, param)

    def for_part(
        self,
        requested: dict[str, Any],
        own: dict[str, Any],
        settings: MediaSettings,
        param: str,
        model_picks: bool = False,
    ) -> Self:
        merged = dict(requested)
        if "fps" in own or "num_frames" in own:
            merged.pop("fps", None)
            merged.pop("num_frames", None)
        merged.update(own)
        fps, num_frames = merged.get("fps"), merged.get("num_frames")
        if num_frames is None and fps is None and not model_picks:
            fps = settings.default_fps  # where vLLM's loader picks, it has defaults of its own
        # An explicit count is honoured up to the hard limit; only fps and the default are
        # capped. Where the model's rule picks, it counts (up to --max-frames, or a 400).
        cap = settings.max_frames if num_frames is not None or model_picks else settings.default_max_frames
        max_frames = merged.get("max_frames", None if model_picks else cap)
        if isinstance(max_frames, int) and not isinstance(max_frames, bool):
            max_frames = min(max_frames, settings.max_frames)
        try:
            sampling = VideoSampling(
                fps, num_frames, max_frames, settings.max_pixels, merged.get("seek_mode", settings.seek_mode)
            )
        except InvalidSamplingError as error:
            raise part_error(error, param) from error
        return dataclasses.replace(self, sampling=sampling)

    def decode(self, data: bytes, context: DecodeContext) -> LoadedVideo:
        settings, vision, sampling = context.settings, context.vision, self.sampling
        decode = functools.partial(
            decode_video,
            data,
            max_bytes=settings.max_decoded_bytes,
            max_source_pixels=settings.max_source_pixels,
            cancel=context.cancel,
            timeout=settings.decode_timeout,
            device=settings.decode_device,
        )
        if vision is None:
            return LoadedVideo(decoded=decode(sampling=sampling, threads=context.threads))
        # The processor sizes the frames by the model's rule: --max-pixels would shrink them first
        sampling = dataclasses.replace(sampling, max_pixels=None)
        picks = vision.loader_picks(sampling, settings.default_fps, settings.max_frames)
        # The processor works on each frame as it is decoded (on_frame), on threads of its own.
        with vision.processor.stream_video(context.threads) as stream:
            video = decode(
                sampling=sampling,
                threads=vision.decoder_threads(context.threads),
                frame_size=vision.frame_rule,
                frame_picks=picks,
                on_frame=stream.add,
            )
            processed = context.timed(self.name, lambda: stream.result(video.frames))
        if picks is None:
            return LoadedVideo(decoded=video, processed=processed)
        return LoadedVideo(
            decoded=video,
            processed=processed,
            hf_metadata=picks.hf_metadata(video),
            picks=picks.account(video),
        )

    def account(self, item: MediaItem) -> dict[str, Any]:
        if item.timestamps is None or item.indices is None:
            raise ValueError(f"{item.param}: a video item comes with its frames' timestamps and indices")
        return {
            "timestamps": [round(float(t), 6) for t in item.timestamps],
            "indices": item.indices.tolist(),
        }

    def data_url(self, item: MediaItem, encode: Callable[[np.ndarray], str], picture_type: str) -> str:
        """vLLM reads `data:video/jpeg;base64,` and comma-separated frames as the frames
        themselves, each opened by Pillow whatever its format: PNG frames go under the same
        type (vLLM has no other for frames)."""
        return "data:video/jpeg;base64," + ",".join(encode(frame) for frame in item.tensor)


def sampling_keys(options: dict[str, Any], where: str) -> dict[str, Any]:
    """The sampling keys of `options`, vLLM's spellings read; ServiceError for any other key."""
    known = {}
    for key, value in options.items():
        if key in REFUSED_KEYS:
            raise ServiceError(
                f"{where}.{key}: mmprep does not do {key}: {REFUSED_KEYS[key]}", "invalid_sampling", where
            )
        if key == FRAME_RECOVERY:
            if value is not True:
                raise ServiceError(
                    f"{where}.{key}: mmprep always recovers frames (a frame FFmpeg cannot produce is "
                    "replaced by the frame on screen at its time); frame_recovery can only be true",
                    "invalid_sampling",
                    where,
                )
            continue
        if key not in SAMPLING_KEYS:
            raise ServiceError(
                f"{where} has unknown key {key!r}: the sampling keys are {', '.join(SAMPLING_KEYS)}",
                "invalid_sampling",
                where,
            )
        if value is None or (key == "fps" and not_set(value)):
            continue  # vLLM: fps <= 0 means "not set"
        known[key] = value
    return known


def not_set(fps: Any) -> bool:
    return isinstance(fps, Real) and not isinstance(fps, bool) and fps <= 0


VIDEO = Video()
