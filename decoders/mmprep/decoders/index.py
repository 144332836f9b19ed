"""The frame index: every video frame's presentation time and every keyframe, from
demuxing alone (no decoding).

Demuxing reads each packet's header, which costs a small fraction of decoding it.
The index is what lets the decoder trust nothing the container claims: durations and
frame counts are checked against it, and it tells where to seek and which frames
may be skipped.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from av.container import InputContainer
    from av.video.stream import VideoStream


@dataclass(frozen=True)
class FrameIndex:
    time_base: Fraction
    pts: np.ndarray  # int64, every shown frame's presentation time, sorted
    keyframes: np.ndarray  # int64, sorted presentation times of the keyframes
    keyframe_dts: np.ndarray  # int64, each keyframe's decode time, for demuxers that seek by it
    end: int | None  # just past the last frame: its pts plus its duration
    packets: int  # packets with a payload, timestamps or not
    complete: bool  # every packet had a presentation time
    # Every presentation time came after the one read before it: no frame is shown out of the
    # order it is stored in, or the times were written in decode order (they then ignore any
    # reordering the decoder does).
    times_in_read_order: bool = True

    @property
    def has_times(self) -> bool:
        return len(self.pts) > 0

    def span_seconds(self) -> float | None:
        """Seconds from the first frame's start to the last frame's end."""
        if not self.has_times or self.end is None:
            return None
        return float((self.end - self.pts[0]) * self.time_base)

    def median_interval(self) -> float | None:
        """Typical seconds between frames, or None with fewer than two frames."""
        if len(self.pts) < 2:
            return None
        return float(np.median(np.diff(self.pts)) * self.time_base)

    def keyframe_at_or_before(self, pts: int) -> int | None:
        """Position in `keyframes` of the last keyframe shown at or before `pts`."""
        i = int(np.searchsorted(self.keyframes, pts, side="right")) - 1
        return i if i >= 0 else None

    def frames_between(self, after: float, before: int) -> int:
        """How many frames have presentation times in (after, before)."""
        lo = np.searchsorted(self.pts, after, side="right")
        hi = np.searchsorted(self.pts, before, side="left")
        return max(0, int(hi - lo))


def read_index(
    container: InputContainer, stream: VideoStream, check: Callable[[], None] | None = None
) -> FrameIndex:
    """Demux `stream` from the start of `container` and index its packets.

    `check`, if given, is called every few hundred packets and may raise to stop.
    """
    # array('q') keeps 8 bytes a packet, not a Python int's 28 plus a list slot: an hour of
    # 60 fps video is 216,000 packets.
    pts, durations, keys, key_dts = array("q"), array("q"), array("q"), array("q")
    packets = missing = 0
    for count, packet in enumerate(container.demux(stream)):
        if check is not None and count % 256 == 0:
            check()
        # Empty packets are PyAV's end-of-stream markers (and AVI's "drop frames"):
        # they carry no picture.
        if packet.size == 0 or packet.is_discard:
            continue
        packets += 1
        if packet.pts is None:
            missing += 1
            continue
        pts.append(packet.pts)
        durations.append(packet.duration or 0)
        if packet.is_keyframe:
            keys.append(packet.pts)
            key_dts.append(packet.pts if packet.dts is None else min(packet.dts, packet.pts))
    return _build(_fraction(stream.time_base), pts, durations, keys, key_dts, packets, missing)


class Ratio(Protocol):
    """A time base: a Fraction, or PyAV 19's own rational type."""

    @property
    def numerator(self) -> int: ...
    @property
    def denominator(self) -> int: ...


def _fraction(time_base: Ratio | None) -> Fraction:
    """The time base as an exact Fraction (PyAV 19 gives its own rational type)."""
    return Fraction(time_base.numerator, time_base.denominator) if time_base else Fraction(1, 1)


def _build(
    time_base: Fraction,
    pts_read: array[int],
    durations_read: array[int],
    keys_read: array[int],
    key_dts_read: array[int],
    packets: int,
    missing: int,
) -> FrameIndex:
    pts, durations = np.frombuffer(pts_read, dtype=np.int64), np.frombuffer(durations_read, dtype=np.int64)
    order = np.argsort(pts, kind="stable")
    sorted_pts = pts[order]
    end = None
    if len(sorted_pts):
        end = int(np.max(sorted_pts + durations[order]))
        if durations[order[-1]] == 0:
            # No duration on the last packet: assume it lasts as long as a typical frame.
            step = int(np.median(np.diff(sorted_pts))) if len(sorted_pts) > 1 else 0
            end = max(end, int(sorted_pts[-1]) + step)
    keys, key_dts = np.frombuffer(keys_read, dtype=np.int64), np.frombuffer(key_dts_read, dtype=np.int64)
    key_order = np.argsort(keys, kind="stable")
    return FrameIndex(
        time_base=time_base,
        pts=sorted_pts,
        keyframes=keys[key_order],
        keyframe_dts=key_dts[key_order],
        end=end,
        packets=packets,
        complete=missing == 0 and packets > 0,
        times_in_read_order=bool(np.all(np.diff(pts) > 0)),
    )
