"""The decode pass: the planned frames out of the decoder, seeking past what nobody asked
for, and runs of keyframe intervals decoded side by side when the thread budget allows."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Literal

import numpy as np

from .errors import CorruptMediaError
from .frames import Announce, FrameConverter, FrameStack
from .guard import DecodeGuard
from .memory import output_memory
from .picker import FramePicker
from .plan import DecodePlan
from .seeking import Seeker, SeekMissed, seek_keyframe, split_by_keyframe
from .source import VideoSource, decode_all, decode_packet, incomplete_mp4
from .survey import Survey

if TYPE_CHECKING:
    from av.packet import Packet
    from av.video.frame import VideoFrame
    from av.video.stream import VideoStream

# Codecs whose decoders honour skip_frame=NONREF packet by packet. VP8 and VP9 ignore it;
# libdav1d (AV1) reads it once, when it opens, and would then skip wanted frames too.
SKIPPABLE_CODECS = {"h264", "hevc", "mpeg4", "mpeg2video", "mpeg1video", "h263"}


# (position, count, frame): frame `position` of the `count` planned, as soon as it is
# converted; see decode_video's on_frame.
OnFrame = Callable[[int, int, np.ndarray], None]
# (frames, timestamps, rotation): what a decode returns.
Decoded = tuple[np.ndarray, np.ndarray, int]


def decode_frames(
    source: VideoSource, survey: Survey, plan: DecodePlan, guard: DecodeGuard, on_frame: OnFrame | None = None
) -> Decoded:
    """Decode the planned frames. Returns (frames, timestamps, rotation)."""
    if plan.in_output_order:
        frames, timestamps, rotation = _decode_in_output_order(source, survey, plan, guard, on_frame)
        if len(frames) == 0:
            raise CorruptMediaError("no frame of the video could be decoded")
        return frames, timestamps, rotation
    index = survey.index
    seekable = index.complete and len(index.keyframes) > 1
    groups = split_by_keyframe(index, plan.wanted, guard.budget) if seekable else [plan.wanted]

    def whole() -> FrameStack:  # a fresh one for each pass over the whole plan
        return FrameStack(len(plan.wanted), announce=_announcer(on_frame, 0, len(plan.wanted)))

    try:
        if len(groups) > 1:
            frames, timestamps, rotation = _decode_side_by_side(source, survey, plan, guard, groups, on_frame)
        else:
            frames, timestamps, rotation = DecodePass(source, survey, plan, guard, seekable, whole()).run()
    except SeekMissed:  # announced frames are announced again, each in its place
        frames, timestamps, rotation = DecodePass(source, survey, plan, guard, False, whole()).run()
    if len(frames) == 0:
        cut = source.cut_short()  # a file cut off before its first frame's data, most often
        raise CorruptMediaError(incomplete_mp4(cut) if cut else "no frame of the video could be decoded")
    return frames, timestamps, rotation


def _announcer(on_frame: OnFrame | None, start: int, count: int) -> Announce | None:
    """A FrameStack's announce for the stretch of the plan from `start`: its slots are
    positions in the whole plan from there."""
    if on_frame is None:
        return None
    return lambda slot, frame: on_frame(start + slot, count, frame)


def _decode_side_by_side(
    source: VideoSource,
    survey: Survey,
    plan: DecodePlan,
    guard: DecodeGuard,
    groups: list[np.ndarray],
    on_frame: OnFrame | None,
) -> Decoded:
    """Decode runs of keyframe intervals side by side, one decoder each: intervals are
    independent, so this scales better than one decoder's frame threads. Each writes
    into its own stretch of the one output buffer."""
    count = len(plan.wanted)
    output = output_memory(count * plan.frame_bytes)
    share, start = guard.share(len(groups)), 0
    passes: list[DecodePass] = []
    for group in groups:
        stretch = output[start * plan.frame_bytes : (start + len(group)) * plan.frame_bytes]
        stack = FrameStack(len(group), stretch, _announcer(on_frame, start, count))
        passes.append(DecodePass(source, survey, plan.only(group), share, True, stack))
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


def _decode_in_output_order(
    source: VideoSource, survey: Survey, plan: DecodePlan, guard: DecodeGuard, on_frame: OnFrame | None
) -> Decoded:
    """The wanted frames by their place in what the decoder hands out from the start, as
    OpenCV's grab loop counts: every frame decoded, none skipped, no seek, the timestamps
    ignored (they may disagree with the order the decoder shows the frames in)."""
    wanted = set(plan.wanted.tolist())
    last = int(plan.wanted[-1])
    stack = FrameStack(len(plan.wanted), announce=_announcer(on_frame, 0, len(plan.wanted)))
    convert = FrameConverter(plan.rgb_size, guard.threads, plan.size)
    with source.open(guard.threads) as (container, stream):  # from the very start, as OpenCV
        clock = survey.clock(stream)
        for position, frame in enumerate(decode_all(container, stream, guard.check)):
            if position in wanted:
                stack.add(convert(frame), clock(frame))
            if position >= last:
                break
    frames, timestamps = stack.result()
    return frames, timestamps, 90 * (convert.turns or 0)


class DecodePass:
    """One pass of the decoder over the file, taking the planned frames.

    Seeks ahead when a keyframe lies between here and the next wanted frame; before such
    a seek, drains the decoder as soon as the wanted frame's packet is in, instead of
    feeding it the packets after it (frame threads and B-frames hold a few back).
    """

    def __init__(
        self,
        source: VideoSource,
        survey: Survey,
        plan: DecodePlan,
        guard: DecodeGuard,
        allow_seek: bool,
        stack: FrameStack,
    ):
        index, wanted = survey.index, plan.wanted
        self._source, self._survey, self._guard = source, survey, guard
        self._stack = stack
        self._convert = convert = FrameConverter(plan.rgb_size, guard.threads, plan.size)
        # The callback must not hold `self`: that cycle kept the output buffer, the decoder and
        # the container alive until the garbage collector ran, and the next decode's buffer then
        # had to be faulted in on fresh pages (system time) instead of reusing these.
        self._picker = FramePicker(
            survey.frame_times()[wanted], lambda frame, t: stack.add(convert(frame), t)
        )
        wanted_pts = index.pts[wanted] if survey.decoded_times is None else None  # seeking needs them
        self._seeker = Seeker(index, wanted_pts) if allow_seek and wanted_pts is not None else None
        exact_times = wanted_pts is not None and index.complete
        may_skip = exact_times and (plan.keyframes_only or survey.codec in SKIPPABLE_CODECS)
        # When the decoder may skip frames: the wanted frames' packets, which it must not skip.
        self._protected = set(wanted_pts.tolist()) if may_skip and wanted_pts is not None else None
        self._skip_mode: Literal["NONKEY", "NONREF"] = "NONKEY" if plan.keyframes_only else "NONREF"
        self._floor: int | None = None  # after a seek, frames shown before the keyframe are leftovers
        self._fed_max = -math.inf

    def run(self) -> Decoded:
        picker = self._picker
        with self._source.rewound(self._survey.index, self._guard.threads) as (container, stream, packets):
            self._container, self._stream, self._ctx = container, stream, stream.codec_context
            self._clock = self._survey.clock(stream)
            self._packets = packets
            while not picker.done:
                self._guard.check()
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

    def _feed(self, packet: Packet[VideoStream]) -> None:
        if self._protected is not None:
            self._ctx.skip_frame = "DEFAULT" if packet.pts in self._protected else self._skip_mode
        if packet.pts is not None:
            self._fed_max = max(self._fed_max, packet.pts)
        self._offer(decode_packet(self._ctx, packet))
        picker, seeker = self._picker, self._seeker
        if seeker is not None and not picker.done and packet.pts == seeker.wanted_pts[picker.pending]:
            self._drain_if_seeking_next(seeker)

    def _drain_if_seeking_next(self, seeker: Seeker) -> None:
        """The pending wanted frame's packet is in: if the next wanted frame is reached by a
        seek, drain the decoder now and seek."""
        pending = self._picker.pending
        jump = seeker.plan(pending + 1, self._fed_max)
        if jump is None:
            return
        self._offer(decode_packet(self._ctx, None))
        if self._picker.pending != pending + 1:
            raise SeekMissed()  # the frame the index promised did not come out
        if not self._picker.done:
            seeker.decided(pending + 1)
            self._seek(jump)

    def _seek(self, jump: tuple[int, int]) -> None:
        self._packets = seek_keyframe(self._container, self._stream, *jump)  # flushes the decoder
        self._picker.after_seek()
        self._floor, self._fed_max = jump[0], -math.inf

    def _offer(self, frames: Iterable[VideoFrame]) -> None:
        for frame in frames:
            if self._floor is None or frame.pts is None or frame.pts >= self._floor:
                self._picker.offer(frame, self._clock(frame))
