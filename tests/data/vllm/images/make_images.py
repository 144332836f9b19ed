"""The image files of tests/data/vllm: one per way vLLM's image loader treats a file
(kept as it is, or converted to RGB: another mode, an alpha channel, a PNG's tRNS), for the
hash goldens, which key an image by its file's bytes. Committed, since an encoder's bytes
may change between Pillow and zlib releases; this script says how they were made.

    python tests/data/vllm/images/make_images.py
"""

from pathlib import Path

import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent


def gradient(channels: int) -> np.ndarray:
    y, x = np.mgrid[0:64, 0:64]
    planes = [(x * 4) % 256, (y * 4) % 256, ((x + y) * 2) % 256, (x * y) % 256]
    return np.stack(planes[:channels], axis=-1).astype(np.uint8)


def main() -> None:
    Image.fromarray(gradient(3), "RGB").save(HERE / "rgb.png")
    Image.fromarray(gradient(4), "RGBA").save(HERE / "rgba.png")  # semi-transparent: pasted on white
    Image.fromarray(gradient(1)[..., 0], "L").save(HERE / "gray.jpg", quality=90)
    palette = Image.fromarray(gradient(3), "RGB").quantize(16)
    palette.save(HERE / "palette_trns.png", transparency=0)  # a tRNS chunk: one transparent index


if __name__ == "__main__":
    main()
