"""What is in the file, from demuxing (and, for streams without timestamps, one counting
decode): the frame index, the duration, the frame rate and count, the coded size."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from .errors import CorruptMediaError, MediaTooLargeError
from .guard import DecodeGuard
from .index import FrameIndex, read_index
from .metadata import VideoMetadata, end_seek_frames, header_frame_count, resolve_duration, stream_fps
from .picker import Clock
from .source import VideoSource, decode_all, decode_packet

if TYPE_CHECKING:
    from av.video.stream import VideoStream

NANOSECOND = Fraction(1, 10**9)


@dataclass(frozen=True)
class Survey:
    """What demuxing found: the index and everything derived from it."""

    index: FrameIndex
    duration: float
    duration_source: str
    fps: float
    num_frames: int
    codec: str
    container: str
    coded_size: tuple[int, int]  # (width, height) as the stream header gives it, before rotation
    decoded_times: np.ndarray | None  # only for streams without timestamps
    decoder: str = ""  # FFmpeg's decoder for it ("libdav1d" for "av1")
    header_frames: int = 0  # the count the header claims (VideoMetadata.header_frames)
    end_seek_frames: int = 0  # OpenCV's position after its seek to the end (VideoMetadata's)
    # The decoder may hand frames out in an order their timestamps do not give: it reorders
    # (B-frames) while the timestamps do not show it, in an AVI (which stores none: packed
    # B-frames) or where they were written in decode order. A frame's place in the decoder's
    # output is then not its place by time (DecodePlan.in_output_order).
    order_apart_from_times: bool = False

    @property
    def tick(self) -> Fraction:
        """Seconds per tick of `frame_ticks`: the stream's time base, or a nanosecond for
        streams without timestamps (their times come from the decode pass's clock)."""
        return NANOSECOND if self.decoded_times is not None else self.index.time_base

    def frame_ticks(self) -> np.ndarray:
        """Every frame's presentation time from the first frame, in ticks (int64, sorted)."""
        if self.decoded_times is not None:
            return np.rint(self.decoded_times / float(NANOSECOND)).astype(np.int64)
        return self.index.pts - int(self.index.pts[0])

    def frame_times(self) -> np.ndarray:
        """The same in seconds, computed as Clock computes a decoded frame's time."""
        if self.decoded_times is not None:
            return self.decoded_times
        return self.frame_ticks() * float(self.index.time_base)

    def start_time(self) -> float:
        return float(self.index.pts[0] * self.index.time_base) if self.index.has_times else 0.0

    def clock(self, stream: VideoStream) -> Clock:
        """The clock that times this stream's decoded frames as `frame_times` does."""
        return Clock(int(self.index.pts[0]) if self.index.has_times else None, stream.time_base, self.fps)

    def metadata(self, rotation: int) -> VideoMetadata:
        width, height = self.coded_size
        if rotation % 180 == 90:
            width, height = height, width
        return VideoMetadata(
            width=width,
            height=height,
            fps=self.fps,
            duration=self.duration,
            num_frames=self.num_frames,
            codec=self.codec,
            container=self.container,
            rotation=rotation,
            duration_source=self.duration_source,
            start_time=self.start_time(),
            header_frames=self.header_frames,
            end_seek_frames=self.end_seek_frames,
        )


def read_survey(source: VideoSource, guard: DecodeGuard, max_source_pixels: int | None = None) -> Survey:
    """Demux the video stream once; its container is kept open for the decode pass."""
    with source.kept_open(guard.threads) as (container, stream):
        check_source_size(stream, max_source_pixels)
        index = read_index(container, stream, guard.check)
        duration, duration_source = resolve_duration(stream, container, index)
        codec, fmt, decoder = codec_name(stream), container.format.name, stream.codec_context.codec.name
        coded_size = (stream.codec_context.width, stream.codec_context.height)
        claimed_fps = stream_fps(stream)
        header_frames = header_frame_count(stream, container, claimed_fps)
        start = stream.start_time if stream.start_time is not None else 0
        by_decode_time = fmt.startswith("mov,")
        end_seek = end_seek_frames(index, start, claimed_fps or 0.0, header_frames, by_decode_time)
        reorders = bool(stream.codec_context.has_b_frames)
        order_apart = reorders and (fmt == "avi" or index.times_in_read_order)
    decoded_times = None
    num_frames = len(index.pts)
    if duration_source == "decoded":
        # No timestamps anywhere: count what decodes, at the claimed rate (or FFmpeg's 25).
        claimed_fps = claimed_fps or 25.0
        decoded_times = _count_frames(source, guard, claimed_fps)
        num_frames = len(decoded_times)
        duration = num_frames / claimed_fps
    if num_frames == 0:
        raise CorruptMediaError("the video stream holds no frames")
    assert duration is not None  # resolve_duration gives None only with "decoded", handled above
    fps = claimed_fps or num_frames / duration
    return Survey(
        index,
        duration,
        duration_source,
        fps,
        num_frames,
        codec,
        fmt,
        coded_size,
        decoded_times,
        decoder,
        header_frames,
        end_seek,
        order_apart,
    )


def _count_frames(source: VideoSource, guard: DecodeGuard, fps: float) -> np.ndarray:
    """Decode everything once, for streams whose packets carry no timestamps."""
    with source.open(guard.threads) as (container, stream):
        clock = Clock(None, stream.time_base, fps)
        times = [clock(frame) for frame in decode_all(container, stream, guard.check)]
    return np.asarray(times, dtype=np.float64)


def first_frame_rotation(source: VideoSource, survey: Survey, guard: DecodeGuard) -> int:
    """PyAV shows the display matrix only on decoded frames, so decode one."""
    with source.rewound(survey.index, guard.threads) as (_, stream, packets):
        ctx = stream.codec_context
        for packet in packets:
            guard.check()
            for frame in decode_packet(ctx, packet) if packet.size else ():
                return round(frame.rotation) % 360
        for frame in decode_packet(ctx, None):
            return round(frame.rotation) % 360
    return 0


def check_source_size(stream: VideoStream, max_source_pixels: int | None) -> None:
    """Refuse, from the stream header alone, frames too large to decode at all."""
    width, height = stream.codec_context.width, stream.codec_context.height
    if max_source_pixels is not None and width * height > max_source_pixels:
        raise MediaTooLargeError(
            f"the video's frames are {width}x{height}, more than the {max_source_pixels} pixels allowed"
        )


def codec_name(stream: VideoStream) -> str:
    """The codec's own name ("av1"), not the decoder's ("libdav1d")."""
    return stream.codec_context.codec.canonical_name
