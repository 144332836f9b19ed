"""Reading one video with PyAV: the survey (demux only), the decode passes, and the
containers they read from."""

from __future__ import annotations

import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from typing import Self

import av
import numpy as np

from .errors import (
    CorruptMediaError,
    DecodeCancelledError,
    DecodeTimeoutError,
    MediaTooLargeError,
    NoVideoStreamError,
    UnsupportedCodecError,
)
from .frames import FrameConverter, FrameStack, output_memory, scaled_size
from .index import FrameIndex, read_index
from .metadata import VideoMetadata, resolve_duration, stream_fps
from .picker import Clock, FramePicker
from .seeking import Seeker, SeekMissed, rewind, seek_keyframe, split_by_keyframe
from .source import FFMPEG_ERRORS, ReopenableSource

# Codecs whose decoders honour skip_frame=NONREF packet by packet. VP8 and VP9 ignore it;
# libdav1d (AV1) reads it once, when it opens, and would then skip wanted frames too.
SKIPPABLE_CODECS = {"h264", "hevc", "mpeg4", "mpeg2video", "mpeg1video", "h263"}
# Frame threads cost a few tens of microseconds of hand-over per frame: more than decoding
# a frame this small takes. Such videos decode on one thread.
SMALL_FRAME_PIXELS = 320 * 240
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
    coded_size: tuple[int, int]
    decoded_times: np.ndarray | None  # only for streams without timestamps

    @property
    def tick(self) -> Fraction:
        """Seconds per tick of `frame_ticks`: the stream's time base, or a nanosecond for
        streams without timestamps (their times come from the decode pass's clock)."""
        return NANOSECOND if self.decoded_times is not None else self.index.time_base

    def frame_ticks(self) -> np.ndarray:
        """Every frame's presentation time from the first frame, in ticks (int64, sorted)."""
        if self.decoded_times is not None:
            return np.rint(self.decoded_times / float(NANOSECOND)).astype(np.int64)
        return self.index.pts - self.index.pts[0]

    def frame_times(self) -> np.ndarray:
        """The same in seconds, computed as Clock computes a decoded frame's time."""
        if self.decoded_times is not None:
            return self.decoded_times
        return self.frame_ticks() * float(self.index.time_base)

    def start_time(self) -> float:
        return float(self.index.pts[0] * self.index.time_base) if self.index.has_times else 0.0

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
        )


def check_source_size(stream, max_source_pixels: int | None) -> None:
    """Refuse, from the stream header alone, frames too large to decode at all."""
    width, height = stream.codec_context.width, stream.codec_context.height
    if max_source_pixels is not None and width * height > max_source_pixels:
        raise MediaTooLargeError(
            f"the video's frames are {width}x{height}, more than the {max_source_pixels} pixels allowed"
        )


class VideoReader:
    """Reads one video. The container opened to survey it is kept and rewound for the
    decode pass (opening costs FFmpeg a probe that decodes a few frames); a fresh one is
    opened only if rewinding fails."""

    def __init__(self, source: ReopenableSource, threads: int, deadline: float | None, cancel):
        self._source = source
        self._threads = threads
        self._deadline = deadline
        self._cancel = cancel
        self._kept: OpenVideo | None = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        if self._kept is not None:
            self._kept.__exit__(None, None, None)
            self._kept = None

    # -- pass 1 (and 2): what is in the file ------------------------------------------

    def survey(self, max_source_pixels: int | None = None) -> Survey:
        opened = self._open()
        container, stream = opened.__enter__()
        self._kept = opened
        with opened.mapping_errors():
            check_source_size(stream, max_source_pixels)
            index = read_index(container, stream, self._check_deadline)
            duration, source = resolve_duration(stream, container, index)
            codec, fmt = codec_name(stream), container.format.name
            coded_size = (stream.codec_context.width, stream.codec_context.height)
            claimed_fps = stream_fps(stream)
        decoded_times = None
        num_frames = len(index.pts)
        if source == "decoded":
            # No timestamps anywhere: count what decodes, at the claimed rate (or FFmpeg's 25).
            claimed_fps = claimed_fps or 25.0
            decoded_times = self._count_frames(claimed_fps)
            num_frames = len(decoded_times)
            duration = num_frames / claimed_fps
        if num_frames == 0:
            raise CorruptMediaError("the video stream holds no frames")
        fps = claimed_fps or num_frames / duration
        return Survey(index, duration, source, fps, num_frames, codec, fmt, coded_size, decoded_times)

    def _count_frames(self, fps: float) -> np.ndarray:
        """Decode everything once, for streams whose packets carry no timestamps."""
        times: list[float] = []
        with self._open() as (container, stream):
            clock = Clock(None, stream.time_base, fps)
            for frame in self._decode_all(container, stream):
                times.append(clock(frame))
        return np.asarray(times, dtype=np.float64)

    def first_frame_rotation(self, survey: Survey) -> int:
        """PyAV shows the display matrix only on decoded frames, so decode one."""
        with self.rewound(survey) as (_, stream, packets):
            ctx = stream.codec_context
            for packet in packets:
                self._check_deadline()
                for frame in decode_packet(ctx, packet) if packet.size else ():
                    return round(frame.rotation) % 360
            for frame in decode_packet(ctx, None):
                return round(frame.rotation) % 360
        return 0

    @contextmanager
    def rewound(self, survey: Survey, threads: int | None = None):
        """(container, stream, packets from the first keyframe): the surveyed container
        rewound if it can be, else a fresh one. `threads`: FFmpeg threads for its decoder."""
        index = survey.index
        kept, self._kept = self._kept, None  # one user; closed when it is done
        if kept is not None:
            try:
                if index.complete and len(index.keyframes):
                    container, stream = kept.opened
                    if threads is not None:
                        set_threads(stream, threads)  # the decoder is not open yet
                    with kept.mapping_errors():
                        packets = rewind(container, stream, index)
                        if packets is not None:
                            yield container, stream, packets
                            return
            finally:
                kept.__exit__(None, None, None)
        with self._open(threads) as (container, stream):
            yield container, stream, container.demux(stream)

    # -- pass 3: the frames -------------------------------------------------------

    def decode(self, survey: Survey, wanted: np.ndarray, max_pixels: int | None, keyframes_only: bool = False):
        """Decode the frames at positions `wanted` of the survey's frame times.

        Returns (frames, timestamps, rotation).
        """
        index = survey.index
        seekable = index.complete and len(index.keyframes) > 1
        groups = split_by_keyframe(index, wanted, self._budget()) if seekable else [wanted]
        try:
            if len(groups) > 1:
                frames, timestamps, rotation = self._decode_groups(survey, groups, max_pixels, keyframes_only)
            else:
                frames, timestamps, rotation = DecodePass(self, survey, wanted, max_pixels, seekable, keyframes_only).run()
        except SeekMissed:
            frames, timestamps, rotation = DecodePass(self, survey, wanted, max_pixels, False, keyframes_only).run()
        if len(frames) == 0:
            raise CorruptMediaError("no frame of the video could be decoded")
        return frames, timestamps, rotation

    def _decode_groups(self, survey: Survey, groups: list[np.ndarray], max_pixels, keyframes_only):
        """Decode runs of keyframe intervals side by side, one decoder each: intervals are
        independent, so this scales better than one decoder's frame threads. Each writes
        into its own stretch of the one output buffer."""
        size = scaled_size(*survey.coded_size, max_pixels)  # the header's size, for all groups
        frame_bytes = size[0] * size[1] * 3
        output = output_memory(sum(len(group) for group in groups) * frame_bytes)
        threads, start, passes = max(1, self._budget() // len(groups)), 0, []
        for group in groups:
            stack = FrameStack(len(group), output[start * frame_bytes : (start + len(group)) * frame_bytes])
            passes.append(DecodePass(self, survey, group, max_pixels, True, keyframes_only, threads, stack, size))
            start += len(group)
        with ThreadPoolExecutor(len(passes), thread_name_prefix="mmprep-gop") as pool:
            results = list(pool.map(DecodePass.run, passes))
        timestamps = np.concatenate([times for _, times, _ in results])
        if all(p.complete for p in passes):
            frames = output.reshape(len(timestamps), *results[0][0].shape[1:])
        else:  # a damaged stretch returned fewer frames: close the gaps
            frames = np.concatenate([frames for frames, _, _ in results if len(frames)])
        rotation = next((rotation for frames, _, rotation in results if len(frames)), 0)
        return frames, timestamps, rotation

    def _budget(self) -> int:
        return self._threads or os.cpu_count() or 1

    # -- plumbing ---------------------------------------------------------------------

    def _open(self, threads: int | None = None):
        return OpenVideo(self._source, self._threads if threads is None else threads)

    def _decode_all(self, container, stream):
        ctx = stream.codec_context
        for packet in container.demux(stream):
            self._check_deadline()
            if packet.size:
                yield from decode_packet(ctx, packet)
        yield from decode_packet(ctx, None)

    def _check_deadline(self) -> None:
        if self._cancel is not None and self._cancel.is_set():
            raise DecodeCancelledError("the decode was cancelled")
        if self._deadline is not None and time.monotonic() > self._deadline:
            raise DecodeTimeoutError("decoding took longer than the time allowed")


class DecodePass:
    """One pass of the decoder over the file, taking the wanted frames.

    Seeks ahead when a keyframe lies between here and the next wanted frame; before such
    a seek, drains the decoder as soon as the wanted frame's packet is in, instead of
    feeding it the packets after it (frame threads and B-frames hold a few back).
    """

    def __init__(
        self, reader: VideoReader, survey: Survey, wanted, max_pixels, allow_seek, keyframes_only,
        threads: int | None = None, stack: FrameStack | None = None, size: tuple[int, int] | None = None,
    ):
        index = survey.index
        self._reader, self._survey, self._threads = reader, survey, threads
        self._stack = stack if stack is not None else FrameStack(len(wanted))
        self._convert = convert = FrameConverter(max_pixels, reader._threads if threads is None else threads, size)
        stack = self._stack
        # The callback must not hold `self`: that cycle kept the output buffer, the decoder and
        # the container alive until the garbage collector ran, and the next decode's buffer then
        # had to be faulted in on fresh pages (system time) instead of reusing these.
        self._picker = FramePicker(survey.frame_times()[wanted], lambda frame, t: stack.add(convert(frame), t))
        self._wanted_pts = index.pts[wanted] if survey.decoded_times is None else None
        self._seeker = Seeker(index, self._wanted_pts) if allow_seek else None
        exact_times = self._wanted_pts is not None and index.complete
        self._protected = set(self._wanted_pts.tolist()) if exact_times else None
        self._skip_mode = "NONKEY" if keyframes_only else "NONREF"
        self._may_skip = exact_times and (keyframes_only or survey.codec in SKIPPABLE_CODECS)
        self._floor = None  # after a seek, frames shown before the keyframe are leftovers
        self._fed_max = -math.inf

    def run(self):
        picker = self._picker
        with self._reader.rewound(self._survey, self._threads) as (container, stream, packets):
            self._container, self._stream, self._ctx = container, stream, stream.codec_context
            self._clock = Clock(
                int(self._survey.index.pts[0]) if self._survey.index.has_times else None,
                stream.time_base,
                self._survey.fps,
            )
            self._packets = packets
            while not picker.done:
                self._reader._check_deadline()
                if self._seeker is not None:
                    jump = self._seeker.jump(picker.pending, self._fed_max)
                    if jump is not None:
                        self._seek(jump)
                packet = next(self._packets, None)
                if packet is None:
                    break
                if packet.size:
                    self._feed(packet)
            if not picker.done:
                self._offer(decode_packet(self._ctx, None))
                picker.finish()
        frames, timestamps = self._stack.result()
        return frames, timestamps, 90 * (self._convert.turns or 0)

    @property
    def complete(self) -> bool:
        """Every wanted frame got one of its own (none missing, none shared)."""
        return self._stack.full

    def _feed(self, packet) -> None:
        if self._may_skip:
            self._ctx.skip_frame = "DEFAULT" if packet.pts in self._protected else self._skip_mode
        if packet.pts is not None:
            self._fed_max = max(self._fed_max, packet.pts)
        self._offer(decode_packet(self._ctx, packet))
        picker = self._picker
        if self._seeker is not None and not picker.done and packet.pts == self._wanted_pts[picker.pending]:
            self._drain_if_seeking_next()

    def _drain_if_seeking_next(self) -> None:
        """The pending wanted frame's packet is in: if the next wanted frame is reached by a
        seek, drain the decoder now and seek."""
        pending = self._picker.pending
        jump = self._seeker.plan(pending + 1, self._fed_max)
        if jump is None:
            return
        self._offer(decode_packet(self._ctx, None))
        if self._picker.pending != pending + 1:
            raise SeekMissed()  # the frame the index promised did not come out
        if not self._picker.done:
            self._seeker.decided(pending + 1)
            self._seek(jump)

    def _seek(self, jump: tuple[int, int]) -> None:
        self._packets = seek_keyframe(self._container, self._stream, *jump)  # flushes the decoder
        self._picker.after_seek()
        self._floor, self._fed_max = jump[0], -math.inf

    def _offer(self, frames) -> None:
        for frame in frames:
            if self._floor is None or frame.pts is None or frame.pts >= self._floor:
                self._picker.offer(frame, self._clock(frame))


class OpenVideo:
    """Context manager: the container and its video stream, set up for decoding.

    Maps FFmpeg's exceptions to MediaError on the way out.
    """

    def __init__(self, source: ReopenableSource, threads: int):
        self._source, self._threads = source, threads

    def __enter__(self):
        self._opened = self._source.open()
        container = self._opened.__enter__()
        try:
            stream = select_video_stream(container)
            set_threads(stream, self._threads)
        except BaseException:
            self._opened.__exit__(None, None, None)
            raise
        self.opened = container, stream
        return self.opened

    def __exit__(self, kind, error, traceback):
        self._opened.__exit__(None, None, None)
        if isinstance(error, FFMPEG_ERRORS):
            raise _damaged(error) from error
        return False

    @contextmanager
    def mapping_errors(self):
        """FFmpeg's exceptions as CorruptMediaError, for work done outside `with`."""
        try:
            yield
        except FFMPEG_ERRORS as error:
            raise _damaged(error) from error


def _damaged(error: Exception) -> CorruptMediaError:
    return CorruptMediaError(f"the video is damaged or truncated: {error}")


def set_threads(stream, threads: int) -> None:
    ctx = stream.codec_context
    ctx.thread_type = "AUTO"  # frame and slice threads
    ctx.thread_count = 1 if ctx.width * ctx.height <= SMALL_FRAME_PIXELS else threads


def select_video_stream(container):
    """FFmpeg's best video stream (av_find_best_stream, as ffprobe, torchcodec and decord
    choose): the default one, then the one with the most frames probed, then the highest
    bit rate. Not the first: a file may carry a small preview stream before the real one."""
    candidates = [
        s for s in container.streams.video
        if not (s.disposition & av.stream.Disposition.attached_pic)
    ]
    if not candidates:
        kinds = sorted({s.type for s in container.streams}) or ["nothing"]
        raise NoVideoStreamError(f"the input has no video stream (it holds: {', '.join(kinds)})")
    if container.format.name.endswith("_pipe") or container.format.name == "image2":
        raise NoVideoStreamError(
            f"the input is a still image ({container.format.name.removesuffix('_pipe')}), not a video"
        )
    best = container.streams.best("video")
    # FFmpeg passes over streams for the hearing or visually impaired, and may rank cover art.
    stream = best if best in candidates else candidates[0]
    if stream.codec_context is None:
        raise UnsupportedCodecError("the video's codec is not one FFmpeg can decode")
    if not stream.codec_context.width or not stream.codec_context.height:
        raise CorruptMediaError("the video stream does not say its frame size")
    return stream


def codec_name(stream) -> str:
    """The codec's own name ("av1"), not the decoder's ("libdav1d")."""
    return stream.codec_context.codec.canonical_name


def decode_packet(ctx, packet):
    """Decode one packet; a packet the decoder rejects is skipped like a lost packet,
    as players do (the frames after it may still decode)."""
    try:
        return ctx.decode(packet)
    except av.InvalidDataError:
        return ()
