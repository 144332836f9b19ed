"""What a video is, as far as the decoder trusts it: the VideoMetadata the decoder
reports and the duration fallback this project exists for.

FFmpeg reports no stream duration and no frame count for VP9/WebM, and wrong ones for
AVI files with stale headers and edited MP4s. So every duration the container offers
is checked against the frame index (packet timestamps) and used only if they agree.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .index import FrameIndex

if TYPE_CHECKING:
    from av.container import InputContainer
    from av.video.stream import VideoStream


@dataclass(frozen=True)
class VideoMetadata:
    width: int  # as displayed: after rotation
    height: int
    fps: float  # average frame rate
    duration: float  # seconds of the video stream, first frame to end of last
    num_frames: int
    codec: str
    container: str
    rotation: int  # degrees counter-clockwise the stored picture is turned for display
    duration_source: str  # "stream", "container", "packets" or "decoded"
    start_time: float  # the first frame's presentation time in the container, seconds
    # The frame count the file's header claims, as OpenCV reads it (CAP_PROP_FRAME_COUNT: the
    # stream's nb_frames, else the container's duration times fps, rounded); 0 where it
    # claims none. Often not num_frames: kept because loaders that trust it (vLLM's) pick by it.
    header_frames: int = 0
    # Where OpenCV's FFmpeg capture says it stands after seeking to the end (CAP_PROP_POS_AVI_RATIO
    # 1.0, then CAP_PROP_POS_FRAMES): vLLM's loader trusts it over header_frames when it is
    # lower by more than one (its end-of-stream cross-check). Counted partly by time, not by
    # frame: a variable-rate timeline gives other than what plays (more where frames were
    # dropped, fewer where they come faster than the rate). 0: not known.
    end_seek_frames: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def stream_duration(stream: VideoStream) -> float | None:
    if stream.duration and stream.duration > 0 and stream.time_base:
        return float(stream.duration * stream.time_base)
    return None


def container_duration(container: InputContainer) -> float | None:
    """The container's duration minus its start time (its clock may not start at 0)."""
    if not container.duration or container.duration <= 0:
        return None
    start = container.start_time or 0
    seconds = (container.duration - start) / 1_000_000
    return seconds if seconds > 0 else None


def header_frame_count(stream: VideoStream, container: InputContainer, fps: float | None) -> int:
    """The frame count the header claims, as OpenCV's FFmpeg capture reads it: the stream's
    nb_frames, else floor(container duration x fps + 0.5); 0 where neither is known."""
    if stream.frames and stream.frames > 0:
        return int(stream.frames)
    if container.duration and container.duration > 0 and fps:
        return max(0, math.floor(container.duration / 1_000_000 * fps + 0.5))
    return 0


def end_seek_frames(
    index: FrameIndex, start: int, fps: float, header_frames: int, by_decode_time: bool
) -> int:
    """CAP_PROP_POS_FRAMES after OpenCV's seek to frame `header_frames` (what a seek to ratio
    1.0 does), from the index alone. OpenCV seeks back to the keyframe before 16 frames'
    time short of it (more, while the frame it lands on is past the target), numbers that
    frame by its time (times `fps`, rounded, less the first frame's number), then counts
    one per frame it reads after it, up to the target, plus one. `start`: the stream's
    start time, in ticks. `by_decode_time`: the demuxer seeks by decode time from the first
    packet's (MP4 and MOV: their sample tables), else by presentation time. 0 where the
    index has no times or the header no count."""
    if not index.has_times or header_frames < 2 or fps <= 0:
        return 0
    tick = float(index.time_base)

    def number(pts: int) -> int:  # OpenCV's dts_to_frame_number
        return int(fps * (pts - start) * tick + 0.5)

    first, delta = number(int(index.pts[0])), 16
    seek_times = index.keyframes  # what the demuxer compares the seek's target with
    if by_decode_time and len(index.keyframe_dts):
        seek_times = start + index.keyframe_dts - index.keyframe_dts.min()
    while True:
        earlier = max(header_frames - delta, 0)
        ts = start + int(earlier / fps / tick + 0.5)
        key = int(np.searchsorted(seek_times, ts, side="right")) - 1
        # the first frame shown from that keyframe on (an edit list may hide the keyframe)
        shown = 0 if key < 0 else int(np.searchsorted(index.pts, index.keyframes[key]))
        shown = min(shown, len(index.pts) - 1)
        landed = number(int(index.pts[shown])) - first
        if 0 <= landed <= header_frames - 1:
            return min(landed + len(index.pts) - 1 - shown, header_frames - 1) + 1
        if earlier == 0:
            return 0
        delta = delta * 2 if delta < 16 else delta * 3 // 2


def resolve_duration(
    stream: VideoStream, container: InputContainer, index: FrameIndex
) -> tuple[float | None, str]:
    """The video's duration and where it came from: stream, container or packets.

    A claimed duration is believed when it matches the packets' span within about a
    frame and a half; audio that outlasts the video, a header that claims 1000 frames
    for 20, or a trimmed MP4 fail that test and fall through to the packets.
    Returns (None, "decoded") when the packets carry no timestamps at all.
    """
    span = index.span_seconds()
    interval = index.median_interval() or 0.0
    for source, claimed in (
        ("stream", stream_duration(stream)),
        ("container", container_duration(container)),
    ):
        if claimed is None:
            continue
        if span is None or abs(claimed - span) <= 1.5 * interval + 0.002:
            return claimed, source
    if span is not None and span > 0:
        return span, "packets"
    return None, "decoded"


def stream_fps(stream: VideoStream) -> float | None:
    """FFmpeg's average frame rate for the stream, or its best guess, if it has either."""
    for rate in (stream.average_rate, stream.guessed_rate):
        if rate and rate > 0:
            return float(rate)
    return None
