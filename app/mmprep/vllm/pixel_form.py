"""Whether a vLLM server wants uint8 pixels (it normalizes them on the device) or
normalized float32 ones, asked of the server itself: its render route renders one tiny
image, and the dtype of the pixel_values it made says which.

A vLLM started with --mm-device-do-normalize (0.32/0.33's default for the Qwen-VL families)
runs its processor with do_rescale=do_normalize=False and lets the model's first layer
rescale and normalize whatever arrives, with no check: normalized float32 patches get
normalized twice, and the model silently sees nearly flat pictures. Its caches are keyed
by mm_hash alone, so a request in the wrong form also leaves the wrong tensors cached for
that media. So mmprep checks the form before it sends anything.
"""

from __future__ import annotations

import base64
import io
import logging
from typing import Any

import httpx
import numpy as np
from PIL import Image

from mmprep.processors import torch_name

from .serde import ItemFormatError, decode_item

log = logging.getLogger("mmprep.vllm")

RENDER_PATH = "/v1/chat/completions/render"


def _probe_image() -> str:
    """A 64x64 PNG data URL: above every Qwen-VL processor's minimum, a few patches in all."""
    pixels = (np.arange(64 * 64 * 3, dtype=np.uint32) * 37 % 251).astype(np.uint8).reshape(64, 64, 3)
    png = io.BytesIO()
    Image.fromarray(pixels).save(png, format="PNG")
    return "data:image/png;base64," + base64.b64encode(png.getvalue()).decode("ascii")


def probe_body(model: str) -> dict[str, Any]:
    """The render request of the probe: one image, no text to speak of."""
    part = {"type": "image_url", "image_url": {"url": _probe_image()}}
    return {"model": model, "messages": [{"role": "user", "content": [part]}]}


def rendered_dtype(answer: Any) -> str | None:
    """The dtype of the image's pixel_values in a render answer (a GenerateRequest), or
    None if the answer holds none."""
    try:
        encoded = answer["features"]["kwargs_data"]["image"][0]
        pixels = decode_item(encoded)["pixel_values"].data
    except (KeyError, IndexError, TypeError, ItemFormatError):
        return None
    return torch_name(pixels) if isinstance(pixels, np.ndarray) else None  # "bfloat16" by name


UNKNOWN = "unknown"  # the server answered, but not in a way that tells


async def upstream_pixel_dtype(http: httpx.AsyncClient, root: str, model: str) -> str | None:
    """What dtype the vLLM server at `root` renders an image's pixels to ("uint8": it
    normalizes on the device; "float32": it does not); UNKNOWN if its answer cannot tell
    (no render route, an answer of another shape), None if it cannot be reached now. Why
    is logged."""
    try:
        response = await http.post(root + RENDER_PATH, json=probe_body(model))
    except httpx.HTTPError as error:
        log.warning(
            "could not ask %s how it wants pixels (%s); asked again at the first request", root, error
        )
        return None
    if response.status_code != 200:
        log.warning(
            "%s%s answered %d to a one-image render, so mmprep cannot check that it sends the pixel form "
            "the server wants (--mm-device-do-normalize must match vllm serve's): %s",
            root,
            RENDER_PATH,
            response.status_code,
            response.text[:300],
        )
        return UNKNOWN
    try:
        dtype = rendered_dtype(response.json())
    except ValueError:
        dtype = None
    if dtype is None:
        log.warning("%s%s rendered an image without pixel_values mmprep can read", root, RENDER_PATH)
        return UNKNOWN
    return dtype


def mismatch(normalizes_on_device: bool, dtype: str) -> str | None:
    """What is wrong when mmprep's form (`normalizes_on_device`: uint8 sent) is not the
    upstream's (`dtype` of its own render), or None when they agree."""
    upstream_raw = dtype == "uint8"
    if dtype == UNKNOWN or upstream_raw == normalizes_on_device:
        return None
    if upstream_raw:
        return (
            "the vLLM upstream normalizes pixels on the device (it renders images to uint8), but mmprep "
            "sends them normalized, so the model would see them normalized twice: start mmprep with "
            "--mm-device-do-normalize, or vllm serve with --no-mm-device-do-normalize"
        )
    return (
        f"the vLLM upstream takes normalized pixels (it renders images to {dtype}), but mmprep sends them "
        "as uint8 for normalizing on the device, which it does not do: start mmprep with "
        "--no-mm-device-do-normalize, or vllm serve with --mm-device-do-normalize"
    )
