"""The tokens each image or video stands for in the prompt, as transformers' Qwen-VL
processors write them (replace_image_token / replace_video_token):

- images, and Qwen2-VL / Qwen2.5-VL videos: `grid_t * grid_h * grid_w // merge_size**2` pads.
  (Qwen2.5-VL's second_per_grid_ts goes to the model with the tensors; it does not change
  the prompt.)
- Qwen3-VL videos: per temporal block, the block's time as text, `<{t:.1f} seconds>`, then
  `<|vision_start|>`, the block's `grid_h * grid_w // merge_size**2` pads, `<|vision_end|>`.
  A block's time is the mean of its first and last frame's time (frame index / the source's
  fps; the indices padded with the last one to whole blocks, as the frames are); 24 fps
  where the video's rate is unknown, as transformers assumes.

The placeholder of a Qwen3-VL video covers all of that (timestamps and per-frame wrappers
included): it is what replaced the template's one pad. transformers 5 replaces the pad only,
so the template's own `<|vision_start|>` before it and `<|vision_end|>` after it stay
outside the span. A token-in engine that embeds only the pads finds them by id inside it.
"""

from __future__ import annotations

from functools import lru_cache

from ..engines.prepared import MediaItem
from ..model import ModelFolder

DEFAULT_FPS = 24.0  # transformers' Qwen3VLProcessor, when the metadata has no fps


def item_tokens(folder: ModelFolder, item: MediaItem) -> list[int]:
    if item.processed is None:
        raise ValueError(f"{item.param}: the item was not processed, so its token count is unknown")
    processor = folder.processor
    if item.kind == "image":
        if processor.image_config is None:
            raise ValueError(f"{item.param}: the model folder has no image processor config")
        grid = item.processed.tensors["image_grid_thw"][0]
        merge = processor.image_config.merge_size
        return [folder.image_token_id] * (int(grid.prod()) // merge**2)
    grid = item.processed.tensors["video_grid_thw"][0]
    config = processor.video_config
    if folder.family != "qwen3_vl":
        return [folder.video_token_id] * (int(grid.prod()) // config.merge_size**2)
    per_block = int(grid[1]) * int(grid[2]) // config.merge_size**2
    frame = (
        [folder.vision_start_token_id] + [folder.video_token_id] * per_block + [folder.vision_end_token_id]
    )
    metadata = item.hf_metadata or {}
    indices = metadata.get("frames_indices")
    if indices is None:
        indices = item.indices.tolist() if item.indices is not None else list(range(len(item.tensor)))
    times = block_times(indices, metadata.get("fps") or DEFAULT_FPS, config.temporal_patch_size)
    if len(times) != int(grid[0]):
        raise ValueError(f"{item.param}: {len(times)} frame times for {int(grid[0])} temporal blocks")
    tokens: list[int] = []
    for time in times:
        tokens += _time_tokens(folder, f"<{time:.1f} seconds>")
        tokens += frame
    return tokens


def block_times(indices, fps: float, temporal_patch_size: int) -> list[float]:
    """transformers' Qwen3VLProcessor._calculate_timestamps."""
    indices = list(indices)
    if len(indices) % temporal_patch_size:
        indices += [indices[-1]] * (temporal_patch_size - len(indices) % temporal_patch_size)
    seconds = [index / fps for index in indices]
    return [
        (seconds[i] + seconds[i + temporal_patch_size - 1]) / 2
        for i in range(0, len(seconds), temporal_patch_size)
    ]


def _time_tokens(folder: ModelFolder, text: str) -> list[int]:
    # Between two special tokens the text is tokenized on its own, so alone is the same.
    return list(_encode(folder.encode, text))


@lru_cache(maxsize=4096)
def _encode(encode, text: str) -> tuple[int, ...]:
    return tuple(encode(text))
