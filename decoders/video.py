"""decode_video and probe_video: the frames a model should see, exactly, and no more work
than that takes.

One call makes up to three passes over the input:
1. demux only: the frame index (every frame's time, every keyframe), from which the
   duration, frame count and the exact frames to return are worked out;
2. (only for streams without timestamps) decode everything once to count frames;
3. decode: seek to the keyframe before each wanted frame when a keyframe lies between
   here and there, let the decoder drop non-reference frames nobody asked for, and
   convert to RGB only the frames returned.
The wanted frames are then checked against what the decoder really emits (the frame on
screen at each wanted time), so a lying index costs speed, never correctness.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
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
from .frames import FrameConverter, FrameStack, scaled_size
from .index import FrameIndex, read_index
from .metadata import VideoMetadata, resolve_duration, stream_fps
from .sampling import ON_SCREEN_TOLERANCE, check_sampling, pick_frames, pick_nearest, target_times
from .source import FFMPEG_ERRORS, ReopenableSource, Source

# Codecs whose decoders honour skip_frame=NONREF packet by packet. VP8 and VP9 ignore it;
# libdav1d (AV1) reads it once, when it opens, and would then skip wanted frames too.
SKIPPABLE_CODECS = {"h264", "hevc", "mpeg4", "mpeg2video", "mpeg1video", "h263"}
# Seeking flushes the decoder's pipeline; below this many frames, decoding through is cheaper.
MIN_FRAMES_TO_SEEK = 3
# Frame threads cost a few tens of microseconds of hand-over per frame: more than decoding
# a frame this small takes. Such videos decode on one thread.
SMALL_FRAME_PIXELS = 320 * 240
# Decoding keyframe intervals side by side pays for its second container only past this
# many frames of work.
MIN_FRAMES_TO_SPLIT = 48


@dataclass(frozen=True)
class DecodedVideo:
    frames: np.ndarray  # uint8 (T, H, W, 3), RGB, C-contiguous
    timestamps: np.ndarray  # float64 (T,), seconds from the first frame
    indices: np.ndarray  # int64 (T,), round(timestamp * metadata.fps)
    metadata: VideoMetadata

    def to_hf_metadata(self) -> dict:
        """Fields of transformers' VideoMetadata, for a HF video processor as is."""
        meta = self.metadata
        return {
            "total_num_frames": meta.num_frames,
            "fps": meta.fps,
            "width": meta.width,
            "height": meta.height,
            "duration": meta.duration,
            "video_backend": "pyav",
            "frames_indices": self.indices.tolist(),
            "do_sample_frames": False,
        }


def decode_video(
    source: Source,
    fps: float | None = None,
    num_frames: int | None = None,
    max_frames: int | None = None,
    max_pixels: int | None = None,
    *,
    threads: int = 0,
    timeout: float | None = None,
    max_bytes: int | None = None,
    max_source_pixels: int | None = None,
    seek_mode: str = "exact",
    cancel: threading.Event | None = None,
) -> DecodedVideo:
    """Decode the frames a model should see from `source` (bytes, a path or a binary file).

    fps: frames per second of video to sample; num_frames: that many frames evenly
    spread; neither: every frame. max_frames caps the count, max_pixels the frame size.
    threads: FFmpeg threads, 0 for one per core. timeout: seconds before DecodeTimeoutError.
    max_bytes: refuse (MediaTooLargeError) before decoding if the frames would need more.
    max_source_pixels: refuse a video whose stored frames are larger, before decoding any.
    seek_mode: "exact" (the frame on screen at each time) or "keyframe" (the keyframe
    nearest each time: much faster on long GOPs; timestamps are the keyframes' own).
    cancel: set it from another thread to stop the decode (DecodeCancelledError).
    Raises a MediaError subclass, with a stable `.code`, for anything wrong with the input.
    """
    check_sampling(fps, num_frames, max_frames, max_pixels, seek_mode)
    deadline = None if timeout is None else time.monotonic() + timeout
    with _VideoReader(ReopenableSource(source), threads, deadline, cancel) as reader:
        survey = reader.survey(max_source_pixels)
        times = survey.frame_times()
        targets = target_times(survey.duration, survey.fps, times, fps, num_frames, max_frames)
        keyframes_only = seek_mode == "keyframe" and survey.decoded_times is None and survey.index.complete
        if keyframes_only:
            key_positions = np.searchsorted(survey.index.pts, survey.index.keyframes)
            wanted = key_positions[pick_nearest(times[key_positions], targets)]
        else:
            wanted = pick_frames(times, targets)
        _check_output_size(len(wanted), survey.coded_size, max_pixels, max_bytes)
        frames, timestamps, rotation = reader.decode(survey, wanted, max_pixels, keyframes_only)
    metadata = survey.metadata(rotation)
    indices = np.rint(timestamps * metadata.fps).astype(np.int64)
    return DecodedVideo(np.ascontiguousarray(frames), timestamps, indices, metadata)


def probe_video(
    source: Source, *, timeout: float | None = None, max_source_pixels: int | None = None
) -> VideoMetadata:
    """The video's metadata, from demuxing (and one decoded frame, for its rotation)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    with _VideoReader(ReopenableSource(source), threads=1, deadline=deadline, cancel=None) as reader:
        survey = reader.survey(max_source_pixels)
        return survey.metadata(reader.first_frame_rotation(survey))


@dataclass(frozen=True)
class _Survey:
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

    def frame_times(self) -> np.ndarray:
        if self.decoded_times is not None:
            return self.decoded_times
        return (self.index.pts - self.index.pts[0]) * float(self.index.time_base)

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


class _SeekMissed(Exception):
    """A seek landed somewhere the index did not promise: decode from the start instead."""


def _check_output_size(count: int, coded_size, max_pixels: int | None, max_bytes: int | None) -> None:
    """Refuse before decoding when the frames asked for cannot fit in max_bytes."""
    if max_bytes is None:
        return
    width, height = scaled_size(*coded_size, max_pixels)
    needed = count * width * height * 3
    if needed > max_bytes:
        raise MediaTooLargeError(
            f"{count} frames of {width}x{height} need {needed} bytes, more than the {max_bytes} allowed; "
            "ask for fewer frames or smaller ones"
        )


def _check_source_size(stream, max_source_pixels: int | None) -> None:
    """Refuse, from the stream header alone, frames too large to decode at all."""
    width, height = stream.codec_context.width, stream.codec_context.height
    if max_source_pixels is not None and width * height > max_source_pixels:
        raise MediaTooLargeError(
            f"the video's frames are {width}x{height}, more than the {max_source_pixels} pixels allowed"
        )


class _VideoReader:
    """Reads one video. The container opened to survey it is kept and rewound for the
    decode pass (opening costs FFmpeg a probe that decodes a few frames); a fresh one is
    opened only if rewinding fails."""

    def __init__(self, source: ReopenableSource, threads: int, deadline: float | None, cancel):
        self._source = source
        self._threads = threads
        self._deadline = deadline
        self._cancel = cancel
        self._kept: _OpenVideo | None = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        if self._kept is not None:
            self._kept.__exit__(None, None, None)
            self._kept = None

    # -- pass 1 (and 2): what is in the file ------------------------------------------

    def survey(self, max_source_pixels: int | None = None) -> _Survey:
        opened = self._open()
        container, stream = opened.__enter__()
        self._kept = opened
        with opened.mapping_errors():
            _check_source_size(stream, max_source_pixels)
            index = read_index(container, stream, self._check_deadline)
            duration, source = resolve_duration(stream, container, index)
            codec, fmt = _codec_name(stream), container.format.name
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
        return _Survey(index, duration, source, fps, num_frames, codec, fmt, coded_size, decoded_times)

    def _count_frames(self, fps: float) -> np.ndarray:
        """Decode everything once, for streams whose packets carry no timestamps."""
        times: list[float] = []
        with self._open() as (container, stream):
            clock = _Clock(None, stream.time_base, fps)
            for frame in self._decode_all(container, stream):
                times.append(clock(frame))
        return np.asarray(times, dtype=np.float64)

    def first_frame_rotation(self, survey: _Survey) -> int:
        """PyAV shows the display matrix only on decoded frames, so decode one."""
        with self.rewound(survey) as (_, stream, packets):
            ctx = stream.codec_context
            for packet in packets:
                self._check_deadline()
                for frame in _decode(ctx, packet) if packet.size else ():
                    return round(frame.rotation) % 360
            for frame in _decode(ctx, None):
                return round(frame.rotation) % 360
        return 0

    @contextmanager
    def rewound(self, survey: _Survey, threads: int | None = None):
        """(container, stream, packets from the first keyframe): the surveyed container
        rewound if it can be, else a fresh one. `threads`: FFmpeg threads for its decoder."""
        index = survey.index
        kept, self._kept = self._kept, None  # one user; closed when it is done
        if kept is not None:
            try:
                if index.complete and len(index.keyframes):
                    container, stream = kept.opened
                    if threads is not None:
                        _set_threads(stream, threads)  # the decoder is not open yet
                    with kept.mapping_errors():
                        packets = _rewind(container, stream, index)
                        if packets is not None:
                            yield container, stream, packets
                            return
            finally:
                kept.__exit__(None, None, None)
        with self._open(threads) as (container, stream):
            yield container, stream, container.demux(stream)

    # -- pass 3: the frames -------------------------------------------------------

    def decode(self, survey: _Survey, wanted: np.ndarray, max_pixels: int | None, keyframes_only: bool = False):
        """Decode the frames at positions `wanted` of the survey's frame times.

        Returns (frames, timestamps, rotation).
        """
        index = survey.index
        seekable = index.complete and len(index.keyframes) > 1
        groups = _split_by_keyframe(index, wanted, self._budget()) if seekable else [wanted]
        try:
            if len(groups) > 1:
                frames, timestamps, rotation = self._decode_groups(survey, groups, max_pixels, keyframes_only)
            else:
                frames, timestamps, rotation = _DecodePass(self, survey, wanted, max_pixels, seekable, keyframes_only).run()
        except _SeekMissed:
            frames, timestamps, rotation = _DecodePass(self, survey, wanted, max_pixels, False, keyframes_only).run()
        if len(frames) == 0:
            raise CorruptMediaError("no frame of the video could be decoded")
        return frames, timestamps, rotation

    def _decode_groups(self, survey: _Survey, groups: list[np.ndarray], max_pixels, keyframes_only):
        """Decode runs of keyframe intervals side by side, one decoder each: intervals are
        independent, so this scales better than one decoder's frame threads. Each writes
        into its own stretch of the one output buffer."""
        size = scaled_size(*survey.coded_size, max_pixels)  # the header's size, for all groups
        frame_bytes = size[0] * size[1] * 3
        output = np.empty(sum(len(group) for group in groups) * frame_bytes, dtype=np.uint8)
        threads, start, passes = max(1, self._budget() // len(groups)), 0, []
        for group in groups:
            stack = FrameStack(len(group), output[start * frame_bytes : (start + len(group)) * frame_bytes])
            passes.append(_DecodePass(self, survey, group, max_pixels, True, keyframes_only, threads, stack, size))
            start += len(group)
        with ThreadPoolExecutor(len(passes), thread_name_prefix="mmprep-gop") as pool:
            results = list(pool.map(_DecodePass.run, passes))
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
        return _OpenVideo(self._source, self._threads if threads is None else threads)

    def _decode_all(self, container, stream):
        ctx = stream.codec_context
        for packet in container.demux(stream):
            self._check_deadline()
            if packet.size:
                yield from _decode(ctx, packet)
        yield from _decode(ctx, None)

    def _check_deadline(self) -> None:
        if self._cancel is not None and self._cancel.is_set():
            raise DecodeCancelledError("the decode was cancelled")
        if self._deadline is not None and time.monotonic() > self._deadline:
            raise DecodeTimeoutError("decoding took longer than the time allowed")


class _DecodePass:
    """One pass of the decoder over the file, taking the wanted frames.

    Seeks ahead when a keyframe lies between here and the next wanted frame; before such
    a seek, drains the decoder as soon as the wanted frame's packet is in, instead of
    feeding it the packets after it (frame threads and B-frames hold a few back).
    """

    def __init__(
        self, reader: _VideoReader, survey: _Survey, wanted, max_pixels, allow_seek, keyframes_only,
        threads: int | None = None, stack: FrameStack | None = None, size: tuple[int, int] | None = None,
    ):
        index = survey.index
        self._reader, self._survey, self._threads = reader, survey, threads
        self._stack = stack if stack is not None else FrameStack(len(wanted))
        self._convert = FrameConverter(max_pixels, reader._threads if threads is None else threads, size)
        self._picker = _FramePicker(
            survey.frame_times()[wanted], lambda frame, t: self._stack.add(self._convert(frame), t)
        )
        self._wanted_pts = index.pts[wanted] if survey.decoded_times is None else None
        self._seeker = _Seeker(index, self._wanted_pts) if allow_seek else None
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
            self._clock = _Clock(
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
                self._offer(_decode(self._ctx, None))
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
        self._offer(_decode(self._ctx, packet))
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
        self._offer(_decode(self._ctx, None))
        if self._picker.pending != pending + 1:
            raise _SeekMissed()  # the frame the index promised did not come out
        if not self._picker.done:
            self._seeker.decided(pending + 1)
            self._seek(jump)

    def _seek(self, jump: tuple[int, int]) -> None:
        self._packets = _seek(self._container, self._stream, *jump)  # flushes the decoder
        self._picker.after_seek()
        self._floor, self._fed_max = jump[0], -math.inf

    def _offer(self, frames) -> None:
        for frame in frames:
            if self._floor is None or frame.pts is None or frame.pts >= self._floor:
                self._picker.offer(frame, self._clock(frame))


class _OpenVideo:
    """Context manager: the container and its video stream, set up for decoding.

    Maps FFmpeg's exceptions to MediaError on the way out.
    """

    def __init__(self, source: ReopenableSource, threads: int):
        self._source, self._threads = source, threads

    def __enter__(self):
        self._opened = self._source.open()
        container = self._opened.__enter__()
        try:
            stream = _select_video_stream(container)
            _set_threads(stream, self._threads)
        except BaseException:
            self._opened.__exit__(None, None, None)
            raise
        self.opened = container, stream
        return self.opened

    def __exit__(self, kind, error, traceback):
        self._opened.__exit__(None, None, None)
        if isinstance(error, FFMPEG_ERRORS):
            raise CorruptMediaError(f"the video is damaged or truncated: {error}") from error
        return False

    @contextmanager
    def mapping_errors(self):
        """FFmpeg's exceptions as CorruptMediaError, for work done outside `with`."""
        try:
            yield
        except FFMPEG_ERRORS as error:
            raise CorruptMediaError(f"the video is damaged or truncated: {error}") from error


def _set_threads(stream, threads: int) -> None:
    ctx = stream.codec_context
    ctx.thread_type = "AUTO"  # frame and slice threads
    ctx.thread_count = 1 if ctx.width * ctx.height <= SMALL_FRAME_PIXELS else threads


def _split_by_keyframe(index: FrameIndex, wanted: np.ndarray, budget: int) -> list[np.ndarray]:
    """Split the wanted frames into up to `budget` runs of whole keyframe intervals, of
    about equal decoding work (frames from each interval's keyframe to its last wanted
    frame). One run when there is too little work to share."""
    wanted_pts = index.pts[wanted]
    intervals = np.searchsorted(index.keyframes, wanted_pts, side="right") - 1
    starts = np.searchsorted(index.pts, index.keyframes[np.clip(intervals, 0, None)])
    ends = np.asarray(wanted)
    boundaries = np.flatnonzero(np.diff(intervals)) + 1  # where a new interval begins
    firsts, lasts = np.r_[0, boundaries], np.r_[boundaries, len(wanted)] - 1
    work = ends[lasts] - starts[firsts] + 1  # frames to decode per interval
    groups = min(budget, len(firsts))
    if groups < 2 or work.sum() < MIN_FRAMES_TO_SPLIT:
        return [wanted]
    cuts, done, share = [], 0, work.sum() / groups
    for i, frames in enumerate(work[:-1]):
        done += frames
        if done >= share * (len(cuts) + 1) and len(cuts) < groups - 1:
            cuts.append(lasts[i] + 1)
    return np.split(wanted, cuts)


def _select_video_stream(container):
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
    stream = candidates[0]
    if stream.codec_context is None:
        raise UnsupportedCodecError("the video's codec is not one FFmpeg can decode")
    if not stream.codec_context.width or not stream.codec_context.height:
        raise CorruptMediaError("the video stream does not say its frame size")
    return stream


def _codec_name(stream) -> str:
    """The codec's own name ("av1"), not the decoder's ("libdav1d")."""
    return stream.codec_context.codec.canonical_name


def _decode(ctx, packet):
    """Decode one packet; a packet the decoder rejects is skipped like a lost packet,
    as players do (the frames after it may still decode)."""
    try:
        return ctx.decode(packet)
    except av.InvalidDataError:
        return ()


def _rewind(container, stream, index: FrameIndex):
    """Packets from the first keyframe again, or None if the container cannot seek there."""
    try:
        return _seek(container, stream, int(index.keyframes[0]), int(index.keyframe_dts[0]))
    except _SeekMissed:
        return None


def _seek(container, stream, key_pts: int, fallback_ts: int):
    """Packets from the keyframe shown at key_pts (or an earlier keyframe, when the
    container's index is coarser). Seeking by the keyframe's presentation time lands
    exactly in MP4, MOV, Matroska, WebM and AVI; MPEG-TS seeks by decode time, so a
    landing past the keyframe is retried once by its decode time before giving up."""
    for ts in (key_pts, fallback_ts):
        container.seek(ts, stream=stream, backward=True)
        packets = container.demux(stream)
        first = next((p for p in packets if p.size), None)
        if first is not None and first.is_keyframe and first.pts is not None and first.pts <= key_pts:
            return itertools.chain([first], packets)
    raise _SeekMissed()


class _Clock:
    """Seconds from the first frame for each decoded frame; frames with no timestamp
    (raw elementary streams) are spaced at the average frame rate."""

    def __init__(self, origin: int | None, time_base, fps: float):
        self._origin = origin
        self._tb = float(time_base) if time_base else 0.0
        self._step = 1.0 / fps if fps else 0.04
        self._last: float | None = None

    def __call__(self, frame) -> float:
        ts = frame.pts if frame.pts is not None else frame.dts
        if ts is None or self._tb == 0.0:
            t = 0.0 if self._last is None else self._last + self._step
        else:
            if self._origin is None:
                self._origin = ts
            t = (ts - self._origin) * self._tb
        self._last = t
        return t


class _Seeker:
    """Decides when to seek: when the keyframe before the next wanted frame lies ahead
    of everything fed to the decoder by more than a few frames."""

    def __init__(self, index: FrameIndex, wanted_pts: np.ndarray):
        self._index, self._wanted_pts = index, wanted_pts
        self._decided_for = -1

    def jump(self, pending: int, fed_max: float) -> tuple[int, int] | None:
        """`plan`, once per wanted frame (the loop asks before every packet)."""
        if pending == self._decided_for:
            return None
        self.decided(pending)
        return self.plan(pending, fed_max)

    def decided(self, pending: int) -> None:
        self._decided_for = pending

    def plan(self, pending: int, fed_max: float) -> tuple[int, int] | None:
        """(keyframe pts, keyframe dts) to seek to for wanted frame `pending`, or None."""
        if pending >= len(self._wanted_pts):
            return None
        k = self._index.keyframe_at_or_before(int(self._wanted_pts[pending]))
        if k is None:
            return None
        key_pts = int(self._index.keyframes[k])
        if key_pts <= fed_max or self._index.frames_between(fed_max, key_pts) < MIN_FRAMES_TO_SEEK:
            return None
        return key_pts, int(self._index.keyframe_dts[k])


class _FramePicker:
    """The on-screen rule, applied to frames as the decoder emits them (in presentation
    order): for each wanted time, the last frame shown at or before it.

    Wanted times are normally exact frame times from the index, so the frame arriving
    at a wanted time is taken at once, which lets the decoder seek away right after.
    """

    def __init__(self, wanted: np.ndarray, take):
        self._wanted = wanted
        self._take = take
        self.pending = 0
        self._previous = None  # (frame, time) of the last frame offered since a seek
        self._taken_time: float | None = None
        self._seeked = False

    @property
    def done(self) -> bool:
        return self.pending >= len(self._wanted)

    def after_seek(self) -> None:
        self._previous, self._seeked = None, True

    def offer(self, frame, t: float) -> None:
        wanted, tolerance = self._wanted, ON_SCREEN_TOLERANCE
        while self.pending < len(wanted) and t > wanted[self.pending] + tolerance:
            if self._previous is None:
                if self._seeked:
                    raise _SeekMissed()  # the wanted frame never came out after the seek
                self._choose(frame, t)  # the very first frame stands in for earlier times
            else:
                self._choose(*self._previous)
            self.pending += 1
        if self.pending < len(wanted) and t >= wanted[self.pending] - tolerance:
            self._choose(frame, t)
            while self.pending < len(wanted) and wanted[self.pending] <= t + tolerance:
                self.pending += 1
        self._previous = (frame, t)

    def finish(self) -> None:
        """End of stream: the last frame is on screen for every later time."""
        if self._previous is not None:
            while not self.done:
                self._choose(*self._previous)
                self.pending += 1

    def _choose(self, frame, t: float) -> None:
        if self._taken_time is not None and t <= self._taken_time:
            return  # already returned (a frame wanted twice) or earlier than one returned
        self._take(frame, t)
        self._taken_time = t
