"""The MultiModalKwargsItem vLLM's renderer makes of each processed image or video.

vLLM runs the HF processor over all of a prompt's items of one modality, then splits its
batched output into one item per image or video by each key's field (the model's
`_get_mm_fields_config`). The keys and what they hold are the model family's
(mmprep.families: its side's tensor_names and batch_pixels for the items' modality,
vllm_pixels_field, vllm_video_fields). For
LLaVA-OneVision (llava_onevision.py) every key is batched: `pixel_values` (tiles, 3, H, W),
its tiles padded to the most of the prompt's images, `image_sizes` (2,) on the CPU,
`pixel_values_videos` (frames, 3, H, W); for Mistral 3 `pixel_values` (3, H, W), each
image at its own size (Side.vllm_unpadded), and no `image_sizes` (Side.vllm_left_out); for
Gemma 4's audio `input_features_padded` (frames, 128) and `input_features_mask` (frames,),
each item's unmasked frames alone (Side.vllm_tensors), both batched. For
the Qwen2-VL, Qwen2.5-VL and Qwen3-VL models (vllm 0.33.0, model_executor/models/qwen2_vl.py,
qwen2_5_vl.py, qwen3_vl.py):

- `pixel_values` / `pixel_values_videos`: a flat field (`flat_from_sizes` by the grid's
  patch count), so an item holds its own rows; the field keeps the slices of every item of
  the batch, each a 1-tuple of slices (dim 0).
- `image_grid_thw` / `video_grid_thw`: batched, kept on the CPU (M-RoPE reads it); an item
  holds its own (3,) int64 row.
- Qwen2.5-VL videos: `second_per_grid_ts`, batched on the CPU: a 0-d tensor,
  temporal_patch_size / the sampled fps, as transformers' Qwen2_5_VLProcessor computes it,
  in the model's dtype (`dtype`: vllm serve's --dtype, bfloat16 by default), as vLLM's
  processor casts it: its engine reads the value (`.item()`) into the video's M-RoPE time
  positions, int(t * second_per_grid_ts * tokens_per_second), so float32's 1.85602 where
  vLLM's own path has bfloat16's 1.859375 moves grids 7, 9, 11-15 of a 16-grid clip by a
  position (issue 45; tests/vllm_real/test_real_vllm_seconds_per_grid.py).
- Qwen3-VL videos: `timestamps`, batched on the CPU: a list of Python floats, one per
  temporal block (the mean time of its frames), as vLLM's `_calculate_timestamps`.

A family's items may also share keys (Side.vllm_shared_fields, from the model's token ids):
a shared field kept on the CPU, every item the same 0-d int64.

Every floating tensor goes in the model's dtype (`dtype`: vllm serve's --dtype, bfloat16 by
default), as vLLM's processor casts transformers' outputs (context.py _postprocess_output,
"as transformers.BatchFeature"): normalized pixels, Gemma 4's audio features, Qwen2.5-VL's
second_per_grid_ts. A processor made for vLLM's wire (Processor.in_dtype) writes the pixels
so already; what is not in it yet is cast here.

Keys go in the order of the model's field config (vLLM's own order comes from a set, so
it varies between its processes; its decoder reads a mapping, so order carries nothing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Literal

import numpy as np

from mmprep import families
from mmprep.processors import ProcessedMedia, cast, is_float

from ..interface.prepared import MediaItem
from ..modalities import MODALITIES

FieldKind = Literal["batched", "flat", "shared"]


@dataclass(frozen=True)
class Field:
    """vLLM's BaseMultiModalField as its encoder writes it: the MultiModalFieldConfig
    factory's name and the field's dataclass values, in dataclass order (`keep_on_cpu`
    first, then `slices` and `dim` for a flat field, `batch_size` for a shared one)."""

    kind: FieldKind
    keywords: dict[str, Any]


@dataclass(frozen=True)
class FieldElem:
    """One key of an item: its data (an array, a 0-d array, or a list of floats) and field."""

    data: np.ndarray | list[float] | list[int]
    field: Field


Item = dict[str, FieldElem]  # vLLM's MultiModalKwargsItem: key -> element


def batched(keep_on_cpu: bool = False) -> Field:
    return Field("batched", {"keep_on_cpu": keep_on_cpu})


def flat(sizes: Sequence[int], keep_on_cpu: bool = False) -> Field:
    """As MultiModalFieldConfig.flat_from_sizes(..., dim=0): one (slice(start, stop),)
    per item of the batch. A slice is (start, stop, step), as vLLM's encoder writes it."""
    bounds = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).tolist()
    slices = [((start, stop, None),) for start, stop in pairwise(bounds)]
    return Field("flat", {"keep_on_cpu": keep_on_cpu, "slices": slices, "dim": 0})


def kwargs_items(
    media: Sequence[MediaItem],
    family: str,
    temporal_patch_size: int,
    token_ids: Mapping[str, int] | None = None,
    dtype: str = "float32",
) -> list[Item]:
    """The items of one modality's media, in prompt order (all images, or all videos),
    each processed (`MediaItem.processed`) by the `family`'s processor: its pixels and grid
    under the family's tensor names, for a video the keys the family adds, and the keys the
    family's items share (from the model's vision `token_ids`); every floating tensor in the
    model's `dtype`, as vLLM casts them."""
    if not media:
        return []
    kinds = {item.kind for item in media}
    if len(kinds) != 1:
        raise ValueError(f"items of one modality expected, got {sorted(kinds)}")
    rules = families.get(family)
    kind = media[0].kind
    side = rules.sides[kind]
    pixels_key, grid_key = side.tensor_names
    if side.vllm_pixels_field == "batched":
        items = _batched_items(media, side)
    elif grid_key is None:
        raise ValueError(f"{family}: a flat {kind} field needs a grid to size its items")
    else:
        items = _items(media, side, pixels_key, grid_key)
    items = [{side.vllm_names.get(key, key): element for key, element in item.items()} for item in items]
    if MODALITIES[kind].timed:
        for kwargs, entry in zip(items, media, strict=True):
            video, tokens = entry.sampled_video(), _processed(entry).num_tokens
            for key, data in rules.vllm_video_fields(video, temporal_patch_size, tokens).items():
                kwargs[key] = FieldElem(data, batched(keep_on_cpu=True))
    for key, value in side.vllm_shared_fields(token_ids or {}).items():
        shared = Field("shared", {"keep_on_cpu": True, "batch_size": len(items)})
        for kwargs in items:
            kwargs[key] = FieldElem(np.array(value, np.int64), shared)
    return [{key: _in_model_dtype(element, dtype) for key, element in item.items()} for item in items]


def _in_model_dtype(element: FieldElem, dtype: str) -> FieldElem:
    """The element with a floating tensor in the model's dtype (cast: one already in it
    stays as it is); a list (Qwen3-VL's timestamps) is no tensor to vLLM and stays too.
    The engine reads some of these as values (Qwen2.5-VL's seconds into its M-RoPE
    positions), so a value of another precision would place the video otherwise."""
    data = element.data
    if isinstance(data, np.ndarray) and is_float(data):
        return FieldElem(cast(data, dtype), element.field)
    return element


def _items(media: Sequence[MediaItem], side: families.Side, pixels_key: str, grid_key: str) -> list[Item]:
    """The pixels, and any other tensor with a row per pixel row (Gemma 4's positions),
    flat, each key one field object for the batch, as vLLM's; the grid batched on the CPU,
    as vLLM's model holds it (Side.vllm_grid: Gemma 3's num_patches)."""
    tensors = [_processed(item).tensors for item in media]
    sizes = [len(named[pixels_key]) for named in tensors]
    rows_keys = [key for key in tensors[0] if key != grid_key]
    rows_fields = {key: flat(sizes) for key in rows_keys}
    grid_field = batched(keep_on_cpu=True)
    return [
        {
            **{key: FieldElem(np.ascontiguousarray(named[key]), rows_fields[key]) for key in rows_keys},
            # the item's row of the batch: a (t, h, w) grid, or a 0-d count of tiles or frames
            grid_key: FieldElem(
                side.vllm_grid(np.array(np.ascontiguousarray(named[grid_key], dtype=np.int64)[0])), grid_field
            ),
            # what vLLM's model file adds (Llama 4's patches_per_image), batched on the CPU
            **{key: FieldElem(value, grid_field) for key, value in side.vllm_batched_fields(named).items()},
        }
        for named in tensors
    ]


def _batched_items(media: Sequence[MediaItem], side: families.Side) -> list[Item]:
    """Every key batched, each item its own array (the batch's leading axis of one taken
    off), the pixels as the HF processor batches them (Side.batch_pixels); the grid, where
    the side has one (LLaVA's image_sizes), kept on the CPU."""
    tensors = [side.vllm_tensors(_processed(item).tensors) for item in media]
    pixels_key, grid_key = side.tensor_names
    pixels = [named[pixels_key] for named in tensors]
    if not side.vllm_unpadded:  # Mistral 3's: padded, then cut back
        pixels = side.batch_pixels(pixels)
    keys = [key for key in tensors[0] if key not in side.vllm_left_out]
    fields = {key: batched(keep_on_cpu=key == grid_key) for key in keys}
    return [
        {
            key: FieldElem(np.ascontiguousarray(rows if key == pixels_key else named[key])[0], fields[key])
            for key in keys
        }
        for named, rows in zip(tensors, pixels, strict=True)
    ]


def _processed(item: MediaItem) -> ProcessedMedia:
    if item.processed is None:
        raise ValueError(f"{item.param} was not processed: vLLM's token-in protocol needs --processor")
    return item.processed
