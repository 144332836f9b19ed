"""An item's mm_hash, as vLLM's MultiModalHasher derives it (vllm 0.33.0:
multimodal/hasher.py, multimodal/processing/inputs.py ProcessorInputs.get_mm_hashes).

vLLM hashes the media before processing, not the processed tensors: for each item,
`hash_kwargs(model_id=<vllm serve's model>, <modality>=<item>, mm_processor_kwargs=...)`,
keys sorted, each value framed (lengths and container tags in front of every chunk) and fed
to blake3 (or sha256 / sha512 with --mm-hasher-algorithm), hex digest, full width. The
hash keys vLLM's encoder cache and the prefix cache's multimodal blocks, so the same media
sent again hits both, and two items share a hash only where their tensors are the same.

The item is what vLLM's frontend would hash for the same media:
- an image: the file's bytes, as vLLM hashes an image it fetched itself (MediaWithBytes:
  `{"io_config": ..., "data": bytes}` when the loader converted it to RGB), whenever
  mmprep's pixels are exactly what vLLM's loader makes of those bytes; so a fleet where
  some requests reach vLLM through its own frontend and some through mmprep shares its
  caches. An image mmprep scaled (--max-pixels) is hashed by its pixels, as vLLM hashes a
  PIL image ({"mode": "RGB", "data": pixels});
- a video: the uint8 (T, H, W, 3) frames mmprep sampled, as vLLM hashes frames decoded
  elsewhere: bare for Qwen2-VL, whose parser drops a video's metadata, and with the
  metadata vLLM's video loaders attach (transformers' VideoMetadata fields,
  do_sample_frames=False) for the families that need it (Qwen2.5-VL, Qwen3-VL). Not by the
  file's bytes: vLLM's own loader samples by frame index from the stream's claimed count,
  so it may pick other frames than mmprep's (a VP9 WebM claims none), and a shared key
  would hand one request the other's tensors;
- an audio: the float32 mono waveform at the feature extractor's rate, as vLLM's parser
  hands it over after resampling (AudioProcessorItems keeps no bytes).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal

import numpy as np

from mmprep import families

from ..interface.prepared import MediaItem
from ..modalities import modality_of

HashAlgorithm = Literal["blake3", "sha256", "sha512"]
# blake3 spreads larger inputs over its thread pool, whose idle threads spin for a while after
# each hash: that halves a 20 MB video's wall time for the same CPU, but doubles the CPU of a
# 200 kB image's (benchmarks/image_stages.py's hash stage). Below this many bytes, one thread.
BLAKE3_THREADS_FROM = 8 << 20
# vLLM's _HF_MODALITY_PROCESSOR_KWARGS: processor options scoped to one modality.
# Every modality's scope of mm_processor_kwargs vLLM knows.
VLLM_SCOPES = ("images_kwargs", "videos_kwargs", "audio_kwargs")

_NONE, _SEQUENCE, _MAPPING, _LEAF = b"\x00", b"\x01", b"\x02", b"\x03"


# What vLLM's image loader records of a conversion to RGB (ImageMediaIO's defaults).
RGB_CONVERSION = {"image_mode": "RGB", "rgba_background_color": (255, 255, 255)}


def mm_hash(
    item: MediaItem,
    model_id: str,
    mm_processor_kwargs: Mapping[str, Any] | None = None,
    algorithm: HashAlgorithm = "blake3",
    family: str | None = None,
) -> str:
    """The hex digest vLLM computes for this image or video of a request to `model_id`
    (a model of `family`, which decides whether a video's metadata counts)."""
    factors: dict[str, Any] = {"model_id": model_id, item.kind: hashed_media(item, family)}
    kwargs = scoped_kwargs(modality_of(item).processor_scope, mm_processor_kwargs or {})
    if kwargs:
        factors["mm_processor_kwargs"] = kwargs
    return hash_kwargs(algorithm, factors)


def run_hash(item_hash: str, run: int, algorithm: HashAlgorithm = "blake3") -> str:
    """The key of one run of an item sent to vLLM's generate endpoint as several items (a
    Qwen3-VL video's temporal blocks as images: request.py): the item's hash and the run's
    index hashed as vLLM hashes kwargs. vLLM's encoder cache and the prefix cache's
    multimodal blocks key on it, so each run needs its own, the same for the same media on
    every request, and apart from every media hash (no model_id among its factors)."""
    return hash_kwargs(algorithm, {"item_mm_hash": item_hash, "run": run})


def hashed_media(item: MediaItem, family: str | None = None) -> Any:
    """What vLLM hashes for this item (see the module docstring)."""
    if modality_of(item).hashed_bare:
        return item.tensor
    if modality_of(item).timed:
        # Kept with the frames where the family's vLLM parser keeps a video's metadata
        # (video_needs_metadata in vllm 0.33.0's qwen2_5_vl.py and qwen3_vl.py); else dropped.
        known = families.find(family)
        if known is not None and known.video_metadata_in_hash:
            return (item.tensor, video_metadata(item))
        return item.tensor
    if item.source is not None:
        return FileBytes(item.source.data, RGB_CONVERSION if item.source.converted else None)
    return PilImage(item.tensor)


def video_metadata(item: MediaItem) -> dict[str, Any]:
    """The metadata dict beside a pre-sampled video, as vLLM's video loaders make it."""
    return {**(item.hf_metadata or {}), "do_sample_frames": False}


def scoped_kwargs(own: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The processor kwargs that count for a modality whose scope is `own`: all but other
    modalities' scopes."""
    return {key: value for key, value in kwargs.items() if key not in VLLM_SCOPES or key == own}


class PilImage:
    """An RGB image hashed as vLLM hashes a PIL.Image.Image of mode RGB (no palette)."""

    def __init__(self, pixels: np.ndarray):
        self.pixels = pixels


class FileBytes:
    """An image file hashed as vLLM hashes the MediaWithBytes its loader makes of it:
    the bytes, with the loader's `io_config` when it converted the image."""

    def __init__(self, data: bytes, io_config: dict[str, Any] | None):
        self.data, self.io_config = data, io_config


def hash_kwargs(algorithm: HashAlgorithm, kwargs: Mapping[str, Any]) -> str:
    """MultiModalHasher.hash_kwargs."""
    chunks = [chunk for key in sorted(kwargs) for chunk in _item(key, kwargs[key])]
    hasher = _hasher(algorithm, sum(_nbytes(chunk) for chunk in chunks))
    for chunk in chunks:
        hasher.update(chunk)
    return hasher.hexdigest()


def _hasher(algorithm: HashAlgorithm, size: int) -> Any:
    if algorithm == "blake3":
        from blake3 import blake3

        # the digest does not depend on the threads
        return blake3(max_threads=blake3.AUTO if size >= BLAKE3_THREADS_FROM else 1)
    factories: dict[str, Callable[[], Any]] = {"sha256": hashlib.sha256, "sha512": hashlib.sha512}
    if algorithm not in factories:
        raise ValueError(f"unknown mm hash algorithm {algorithm!r}: blake3, sha256 or sha512")
    return factories[algorithm]()


def _length(value: int) -> bytes:
    return value.to_bytes(8, "little")


def _nbytes(chunk: bytes | memoryview) -> int:
    return chunk.nbytes if isinstance(chunk, memoryview) else len(chunk)


def _framed(chunk: bytes | memoryview) -> Iterator[bytes | memoryview]:
    yield _length(_nbytes(chunk))
    yield chunk


def _item(key: str, value: Any) -> Iterator[bytes | memoryview]:
    """iter_item_to_bytes: the key, then the value."""
    yield from _framed(key.encode("utf-8"))
    yield from _value(value)


def _value(value: Any) -> Iterator[bytes | memoryview]:
    """iter_value_to_bytes: containers tagged with their kind and length, leaves framed."""
    if value is None:
        yield _NONE
    elif isinstance(value, list | tuple):
        yield _SEQUENCE
        yield _length(len(value))
        for element in value:
            yield from _value(element)
    elif isinstance(value, dict):
        yield _MAPPING
        yield _length(len(value))
        for key, element in value.items():
            yield from _framed(str(key).encode("utf-8"))
            yield from _value(element)
    else:
        yield _LEAF
        yield from _leaf(value)


def _leaf(value: Any) -> Iterator[bytes | memoryview]:
    """serialize_item, for the leaves mmprep's items hold."""
    if isinstance(value, bytes | memoryview):
        yield from _framed(value)
    elif isinstance(value, str):
        yield from _framed(value.encode("utf-8"))
    elif isinstance(value, int | float):  # bool too: np.array(True) is one byte, as vLLM's
        yield from _framed(np.array(value).tobytes())
    elif isinstance(value, PilImage):
        yield from _item("image", {"mode": "RGB", "data": value.pixels})
    elif isinstance(value, FileBytes):
        if value.io_config:
            yield from _item("image", {"io_config": value.io_config, "data": value.data})
        else:
            yield from _item("image", value.data)
    elif isinstance(value, np.ndarray):
        yield from _item(
            "ndarray", {"dtype": value.dtype.str, "shape": value.shape, "data": _array_data(value)}
        )
    else:
        raise TypeError(f"vLLM would pickle a {type(value).__name__} to hash it; mmprep does not")


def _array_data(array: np.ndarray) -> Any:
    if array.ndim == 0:
        return array.item()
    if array.flags.c_contiguous:
        return array.view(np.uint8).data
    return array.tobytes()
