"""Image: an `image_url` part (its keys: `url`, `detail`), decoded with Pillow, upright,
scaled to --max-pixels; the file kept when its pixels are exactly what vLLM's own loader
makes of it, since vLLM keys such an image by its bytes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from mmprep.decoders import DecodedImage, decode_image

from ..core.errors import ServiceError
from ..interface.prepared import MediaItem, SourceImage
from .base import DecodeContext, Loaded, Modality
from .video import SAMPLING_KEYS

PART_KEYS = ("url", "detail")


@dataclass(frozen=True, kw_only=True)
class LoadedImage(Loaded[DecodedImage]):
    source: SourceImage | None = None  # its file, when its pixels are vLLM's (MediaItem)

    @property
    def tensor(self) -> np.ndarray:
        return self.decoded.pixels

    @property
    def nbytes(self) -> int:
        return super().nbytes + (len(self.source.data) if self.source is not None else 0)

    def item(self, param: str) -> MediaItem:
        image = self.decoded
        return MediaItem(
            kind=IMAGE.name,
            tensor=image.pixels,
            metadata=image.metadata.to_dict(),
            param=param,
            processed=self.processed,
            source=self.source,
        )


@dataclass(frozen=True)
class Image(Modality[DecodedImage]):
    name = "image"
    part_type = "image_url"
    timed = False
    token_type_id = 1
    processor_scope = "images_kwargs"

    def part_options(self, value: dict[str, Any], param: str) -> dict[str, Any]:
        unknown = sorted(set(value) - set(PART_KEYS))
        if any(key in SAMPLING_KEYS for key in unknown):
            raise ServiceError(
                f"{param} takes no sampling keys; only video_url parts do", "invalid_sampling", param
            )
        if unknown:
            raise ServiceError(
                f"{param} has unknown key(s) {', '.join(map(repr, unknown))}: "
                f"an image_url takes {', '.join(PART_KEYS)}",
                "invalid_content_part",
                param,
            )
        return {}

    def decode(self, data: bytes, context: DecodeContext) -> LoadedImage:
        settings, vision = context.settings, context.vision
        # With a processor the model's rule sizes the image: --max-pixels would shrink it first
        max_pixels = settings.max_pixels if vision is None else None
        image = decode_image(data, max_pixels=max_pixels, max_source_pixels=settings.max_source_pixels)
        unscaled = image.pixels.shape[:2] == (image.metadata.height, image.metadata.width)
        source = SourceImage(data, image.converted) if unscaled else None
        if vision is None:
            return LoadedImage(decoded=image, source=source)
        processed = context.timed(self.name, lambda: vision.process_image(image))
        return LoadedImage(decoded=image, processed=processed, source=source)

    def data_url(self, item: MediaItem, encode: Callable[[np.ndarray], str], picture_type: str) -> str:
        return f"data:image/{picture_type};base64," + encode(item.tensor)


IMAGE = Image()
