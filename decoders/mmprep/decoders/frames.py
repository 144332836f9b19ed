"""Turn decoded frames into the upright RGB tensor the workers get."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import av
import av.filter
import numpy as np
from av.video.reformatter import Interpolation, VideoReformatter

from .memory import output_memory


def scaled_size(width: int, height: int, max_pixels: int | None) -> tuple[int, int]:
    """The largest size of the same aspect ratio with at most `max_pixels` pixels."""
    if max_pixels is None or width * height <= max_pixels:
        return width, height
    scale = math.sqrt(max_pixels / (width * height))
    return max(1, math.floor(width * scale)), max(1, math.floor(height * scale))


def quarter_turns(rotation: float) -> int:
    """Counter-clockwise quarter turns for a display rotation in degrees.

    Like the ffmpeg command line, only angles within a degree of a quarter turn are
    applied; anything else is left as stored.
    """
    turns = round(rotation / 90)
    return turns % 4 if abs(rotation - 90 * turns) < 1 else 0


# Frames NVDEC hands back interleave their chroma; swscale turns those into RGB a little
# differently (up to 2 levels) from the planar layout the CPU decoder gives, and repacking
# them to it first is exact.
HW_LAYOUTS = {"nv12": "yuv420p", "p010le": "yuv420p10le", "p016le": "yuv420p16le"}


class RGBResizer:
    """RGB frames scaled to one size by swscale (FFmpeg's scale filter), bicubic with
    torchvision's kernel (a = -0.5: swscale's param0=0, param1=0.5), which the vision
    processors' resize uses. swscale's default kernel (0.6) lands up to 5 uint8 levels from
    transformers' output on camera footage; this one at most 2, as close as processors/'s
    own resize (docs/deployment.md, "Which resize"). PyAV's reformat takes no kernel parameters, hence
    a filter graph, made for the first frame's size."""

    def __init__(self, size: tuple[int, int], threads: int):
        self._size, self._threads = size, threads
        self._graph: av.filter.Graph | None = None

    def __call__(self, rgb: av.VideoFrame) -> av.VideoFrame:
        if self._graph is None:
            self._graph = self._build(rgb.width, rgb.height)
        self._graph.push(rgb)
        return self._graph.vpull()

    def _build(self, width: int, height: int) -> av.filter.Graph:
        graph = av.filter.Graph()
        if hasattr(graph, "threads"):  # PyAV 18 and later; 17 lets FFmpeg choose
            graph.threads = self._threads
        source = graph.add_buffer(width=width, height=height, format="rgb24", time_base=Fraction(1, 1))
        to_width, to_height = self._size
        scale = graph.add("scale", f"w={to_width}:h={to_height}:flags=bicubic:param0=0:param1=0.5")
        sink = graph.add("buffersink")
        source.link_to(scale)
        scale.link_to(sink)
        graph.configure()
        return graph


class FrameConverter:
    """Converts frames to RGB of one fixed size (`rgb_size`, whatever size each frame is
    decoded at) in one swscale call each, with the scaler reused, then turns them upright
    as the first frame's display matrix says. `size`, if it differs, is reached by a second
    swscale pass, RGB to RGB (`RGBResizer`), before the turn.

    Colour follows each frame's own matrix and range: swscale reads them from the frame.
    """

    def __init__(self, rgb_size: tuple[int, int], threads: int = 0, size: tuple[int, int] | None = None):
        self._rgb_size = rgb_size
        self._threads = threads
        self._scaler = VideoReformatter()
        self._resize = RGBResizer(size, threads) if size not in (None, rgb_size) else None
        self._repacker = VideoReformatter()
        self.turns: int | None = None

    def __call__(self, frame: av.VideoFrame) -> np.ndarray:
        if self.turns is None:
            self.turns = quarter_turns(frame.rotation)
        layout = frame.format.name
        if layout == "cuda":  # still on the GPU (gpu.py): the repack below downloads it
            in_memory = frame.sw_format
            assert in_memory is not None  # a frame on the GPU always says its layout there
            layout = in_memory.name
        planar = HW_LAYOUTS.get(layout)
        if planar is not None:  # from NVDEC: repacked losslessly, so the colours are the CPU path's
            frame = self._repacker.reformat(frame, format=planar)
        width, height = self._rgb_size
        rgb = self._scaler.reformat(
            frame, width, height, "rgb24", interpolation=Interpolation.BICUBIC, threads=self._threads
        )
        if self._resize is not None:
            rgb = self._resize(rgb)
        pixels = rgb.to_ndarray()
        return np.rot90(pixels, self.turns) if self.turns else pixels


# (slot, frame): told of each frame as it lands in a FrameStack.
Announce = Callable[[int, np.ndarray], None]


class FrameStack:
    """Collects the chosen frames straight into one preallocated (T, H, W, 3) array,
    so peak memory is the returned frames, not twice them.

    `buffer`: flat uint8 memory to fill instead (a slice of a larger output), sized for
    `capacity` frames. The shape is the first frame's: the plan's size, turned upright.
    `announce`: called with each frame's slot and its row of the array once it is in.
    """

    def __init__(self, capacity: int, buffer: np.ndarray | None = None, announce: Announce | None = None):
        self._capacity = capacity
        self._buffer = buffer
        self._announce = announce
        self._frames: np.ndarray | None = None
        self._times: list[float] = []

    def __len__(self) -> int:
        return len(self._times)

    @property
    def full(self) -> bool:
        return len(self._times) == self._capacity

    def add(self, rgb: np.ndarray, time: float) -> None:
        if self._frames is None:
            shape = (self._capacity, *rgb.shape)
            if self._buffer is not None:
                self._frames = self._buffer.reshape(shape)
            else:
                self._frames = output_memory(math.prod(shape)).reshape(shape)
        slot = len(self._times)
        self._frames[slot] = rgb
        self._times.append(time)
        if self._announce is not None:
            self._announce(slot, self._frames[slot])

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        count = len(self._times)
        frames = self._frames[:count] if self._frames is not None else np.zeros((0, 0, 0, 3), np.uint8)
        return frames, np.asarray(self._times, dtype=np.float64)
