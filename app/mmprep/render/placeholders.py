"""The tokens each image or video stands for in the prompt: its model family's side for
the item's modality (mmprep.families: Side.item_tokens), as transformers' processor writes
them (replace_image_token / replace_video_token), from the item's grid as that side reads it
(Side.item_grid: its grid tensor's row, or LLaVA-OneVision's image size and frame count).
For the Qwen-VL families:

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

from mmprep import families
from mmprep.processors import Processor

from ..interface.prepared import MediaItem
from ..modalities import modality_of
from ..model import ModelFolder


def item_tokens(folder: ModelFolder, item: MediaItem, processor: Processor | None = None) -> list[int]:
    """The item's tokens, from its grid as `processor` (default: the folder's) made it."""
    if item.processed is None:
        raise ValueError(f"{item.param}: the item was not processed, so its token count is unknown")
    family = families.get(folder.family)
    try:
        return modality_of(item).item_tokens(
            family, item, processor or folder.processor, folder.vision_token_ids, folder.encode
        )
    except ValueError as error:
        message = str(error)
        raise ValueError(message if message.startswith(item.param) else f"{item.param}: {message}") from None
