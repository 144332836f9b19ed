"""Bicubic resizing that matches torchvision's antialiased uint8 resize, which is what
transformers' Qwen processors run.

torchvision resizes horizontally first, then vertically, rounding to uint8 in between.
One Pillow `resize` call does the vertical pass first when one side shrinks and the other
grows, which lands up to 8 levels away; two explicit Pillow passes in torchvision's order
use the same kernel (a = -0.5, widened when shrinking) and the same rounding.
"""

from __future__ import annotations

import numpy as np
from PIL import Image


def resize_bicubic(frame: np.ndarray, height: int, width: int) -> np.ndarray:
    """`frame` (H, W, 3) uint8 resized to (height, width, 3); the frame itself if the size
    already matches."""
    old_height, old_width = frame.shape[:2]
    if (old_height, old_width) == (height, width):
        return frame
    image = Image.fromarray(frame)
    if width != old_width:
        image = image.resize((width, old_height), Image.Resampling.BICUBIC)
    if height != old_height:
        image = image.resize((width, height), Image.Resampling.BICUBIC)
    return np.asarray(image)
