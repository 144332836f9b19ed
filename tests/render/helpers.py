"""What the render tests share: test model folders (built once per session, the tokenizer
converted once per machine) and media items as the preprocessor makes them, with the grids
our processors compute for the golden cases' frame sizes."""

from __future__ import annotations

import numpy as np

from mmprep.interface.prepared import MediaItem
from mmprep.model import ModelFolder
from mmprep.processors import ProcessedMedia


def media_item(folder: ModelFolder, spec: dict, index: int) -> MediaItem:
    """A processed MediaItem like the preprocessor's for a golden's media spec (no pixels:
    the prompt depends on the grid and the video's metadata only)."""
    processor = folder.processor
    if spec["kind"] == "image":
        height, width = spec["shape"]
        resized = processor.image_size(height, width)
        assert processor.image_config is not None  # image_size raised otherwise
        patch = processor.image_config.patch_size
        grid = (1, resized[0] // patch, resized[1] // patch)
        processed = ProcessedMedia(
            {"image_grid_thw": np.array([grid], np.int64)}, processor.image_tokens(height, width)
        )
        return MediaItem("image", np.zeros((1, 1, 3), np.uint8), {}, f"media[{index}]", processed=processed)
    frames, height, width = spec["shape"]
    grid = processor.video_grid(frames, height, width)
    processed = ProcessedMedia(
        {"video_grid_thw": np.array([grid], np.int64)}, processor.video_tokens(frames, height, width)
    )
    indices = np.array(spec["frames_indices"], np.int64)
    return MediaItem(
        "video",
        np.zeros((frames, 1, 1, 3), np.uint8),
        {},
        f"media[{index}]",
        timestamps=indices / spec["fps"],
        indices=indices,
        hf_metadata={"fps": spec["fps"], "frames_indices": spec["frames_indices"]},
        processed=processed,
    )
