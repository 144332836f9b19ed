"""Decoding on the GPU (NVDEC) through FFmpeg's CUDA hwaccel, and falling back to the CPU.

`device="cuda"` opens containers with a CUDA HWAccel that may fall back to software: the
same FFmpeg decoder runs (so the same frames, skip hints and seeks), with the bitstream
decoded by NVDEC. A frame the picker takes is copied back to memory as NV12 (or P010 for
10 bits), which the converter repacks losslessly to the planar layout the CPU path gives;
the others stay on the GPU (with PyAV 18 and later; before, every frame comes back). Where
that cannot be, the CPU decodes and one log line says why: no CUDA device here (said once
per process), or a codec or frame size NVDEC does not take (AV1 through libdav1d, H.264
over 4096 pixels a side, ...: FFmpeg falls back by itself, and the decoder reports it).
"""

from __future__ import annotations

import logging
from functools import cache

import av
from av.codec.hwaccel import HWAccel
from av.video.frame import VideoFrame

from .errors import InvalidArgumentError

DEVICES = ("cpu", "cuda")
log = logging.getLogger("mmprep.decoders")


def check_device(device: str) -> None:
    if device not in DEVICES:
        raise InvalidArgumentError(f"device must be one of {', '.join(DEVICES)}, got {device!r}")


# PyAV 18 and later say what a frame still on the GPU holds (VideoFrame.sw_format) and
# download it when it is converted, so decoded frames can stay on the GPU and only those
# the picker takes come back: NVDEC decodes every frame up to each wanted one, and copying
# them all back cost more CPU than NVDEC saved with 16 videos in flight.
KEEPS_FRAMES_ON_GPU = hasattr(VideoFrame, "sw_format")


def hwaccel_for(device: str) -> HWAccel | None:
    """What to open a container with for `device`: None for the CPU, or when CUDA cannot be
    used in this process."""
    if device != "cuda" or not cuda_usable():
        return None
    return HWAccel("cuda", allow_software_fallback=True, is_hw_owned=KEEPS_FRAMES_ON_GPU)


@cache
def cuda_usable() -> bool:
    """Whether FFmpeg can make a CUDA device here; said once in the log when it cannot."""
    try:
        HWAccel("cuda").create(av.codec.Codec("h264", "r"))
    except Exception as error:  # no GPU, no driver, no permission: all mean the CPU
        log.warning(
            "CUDA decoding is not available here (%s: %s): videos decode on the CPU",
            type(error).__name__,
            error,
        )
        return False
    return True


# The largest frame NVDEC decodes, per codec (NVIDIA's Video Codec SDK, Ampere and later).
MAX_SIDE = {
    "h264": 4096,
    "hevc": 8192,
    "vp8": 4096,
    "vp9": 8192,
    "av1": 8192,
    "mpeg4": 2032,
    "mpeg2video": 4080,
    "mpeg1video": 4080,
}


def decodes(decoder: str, codec: str, size: tuple[int, int]) -> bool:
    """Whether a stream of `codec` at `size` decodes on the GPU: FFmpeg's `decoder` for it
    has a CUDA hwaccel (libdav1d, PyAV's AV1 decoder, has none) and the frame fits NVDEC."""
    return _has_cuda_hwaccel(decoder) and max(size) <= MAX_SIDE.get(codec, 0)


@cache
def _has_cuda_hwaccel(decoder: str) -> bool:
    try:
        configs = av.codec.Codec(decoder, "r").hardware_configs
    except (av.FFmpegError, ValueError):
        return False
    return any(config.device_type.name == "cuda" for config in configs or ())


def note_software_decode(codec: str, size: tuple[int, int]) -> None:
    """A decode asked for the GPU ran on the CPU after all."""
    if cuda_usable():
        log.info("NVDEC does not decode %s at %dx%d: this video decoded on the CPU", codec, *size)
