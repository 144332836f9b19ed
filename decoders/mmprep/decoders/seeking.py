"""Where to seek, and seeking: the keyframe before each wanted frame, landings checked,
and the split of the work into runs of keyframe intervals that decode side by side."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from .index import FrameIndex

if TYPE_CHECKING:
    from av.container import InputContainer
    from av.packet import Packet
    from av.video.stream import VideoStream

# Seeking flushes the decoder's pipeline; below this many frames, decoding through is cheaper.
MIN_FRAMES_TO_SEEK = 3
# Decoding keyframe intervals side by side pays for its second container only past this
# many frames of work.
MIN_FRAMES_TO_SPLIT = 48


class SeekMissed(Exception):
    """A seek landed somewhere the index did not promise: decode from the start instead."""


class Seeker:
    """Decides when to seek: when the keyframe before the next wanted frame lies ahead
    of everything fed to the decoder by more than a few frames."""

    def __init__(self, index: FrameIndex, wanted_pts: np.ndarray):
        self._index, self.wanted_pts = index, wanted_pts
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
        if pending >= len(self.wanted_pts):
            return None
        k = self._index.keyframe_at_or_before(int(self.wanted_pts[pending]))
        if k is None:
            return None
        key_pts = int(self._index.keyframes[k])
        if key_pts <= fed_max or self._index.frames_between(fed_max, key_pts) < MIN_FRAMES_TO_SEEK:
            return None
        return key_pts, int(self._index.keyframe_dts[k])


def rewind(
    container: InputContainer, stream: VideoStream, index: FrameIndex
) -> Iterator[Packet[VideoStream]] | None:
    """Packets from the first keyframe again, or None if the container cannot seek there."""
    try:
        return seek_keyframe(container, stream, int(index.keyframes[0]), int(index.keyframe_dts[0]))
    except SeekMissed:
        return None


def seek_keyframe(
    container: InputContainer, stream: VideoStream, key_pts: int, fallback_ts: int
) -> Iterator[Packet[VideoStream]]:
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
    raise SeekMissed()


def split_by_keyframe(index: FrameIndex, wanted: np.ndarray, budget: int) -> list[np.ndarray]:
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
    cuts: list[int] = []
    done, share = 0, work.sum() / groups
    for i, frames in enumerate(work[:-1]):
        done += frames
        if done >= share * (len(cuts) + 1) and len(cuts) < groups - 1:
            cuts.append(lasts[i] + 1)
    return np.split(wanted, cuts)
