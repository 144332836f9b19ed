"""The input as FFmpeg containers: what a caller hands us (bytes, a path or a file object)
opened, as often as the passes over it need, with its video stream chosen and set up for
decoding; the survey's container kept and rewound; FFmpeg's exceptions as MediaErrors."""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, BinaryIO, Self, TypedDict

import av

from . import gpu
from .errors import CorruptMediaError, MediaNotFoundError, NoVideoStreamError, UnsupportedCodecError
from .index import FrameIndex
from .seeking import rewind
from .sniff import HEAD_BYTES, describe_bytes, mp4_cut_short

if TYPE_CHECKING:
    from types import TracebackType

    from av.container import InputContainer
    from av.packet import Packet
    from av.video.codeccontext import VideoCodecContext
    from av.video.frame import VideoFrame
    from av.video.stream import VideoStream

Source = bytes | bytearray | memoryview | str | os.PathLike[str] | BinaryIO

# What PyAV raises on input FFmpeg cannot make sense of. Anything else is our bug.
FFMPEG_ERRORS = (av.FFmpegError, EOFError, UnicodeDecodeError)


class _OpenOptions(TypedDict, total=False):
    metadata_errors: str


# PyAV before 19 decodes every metadata tag when it opens a container, and a tag that is not
# UTF-8 fails the open unless told to replace what it cannot decode; PyAV 19 decodes tags only
# when read (we never read them) and no longer takes the option.
_OPEN_OPTIONS: _OpenOptions = {"metadata_errors": "replace"} if int(av.__version__.split(".")[0]) < 19 else {}
# Frame threads cost a few tens of microseconds of hand-over per frame: more than decoding
# a frame this small takes. Such videos decode on one thread.
SMALL_FRAME_PIXELS = 320 * 240


class ReopenableSource:
    """A source that can be opened more than once (the decoder may need a second pass)."""

    def __init__(self, source: Source):
        # Exactly one of the three is set: the bytes, a path, or a seekable file object.
        self._data: bytes | None = None
        self._path: str | None = None
        self._file: BinaryIO | None = None
        self._start = 0  # where the media starts in the file object
        if isinstance(source, (bytes, bytearray, memoryview)):
            self._data = bytes(source)
            if not self._data:
                raise CorruptMediaError("the input is empty (0 bytes)")
        elif isinstance(source, (str, os.PathLike)):
            self._path = os.fspath(source)
            _check_path(self._path)
        elif hasattr(source, "read"):
            if not _seekable(source):
                self._data = source.read()
                if not self._data:
                    raise CorruptMediaError("the input is empty (0 bytes)")
            else:
                self._file, self._start = source, source.tell()
        else:
            raise TypeError(f"source must be bytes, a path or a binary file, not {type(source).__name__}")

    @contextmanager
    def open(self, device: str = "cpu") -> Iterator[av.container.InputContainer]:
        try:
            # PyAV 19's stub lacks metadata_errors, which only PyAV < 19 is given (_OPEN_OPTIONS)
            container = av.open(  # type: ignore[call-overload]
                self._target(), mode="r", hwaccel=gpu.hwaccel_for(device), **_OPEN_OPTIONS
            )
        except FFMPEG_ERRORS as error:
            raise CorruptMediaError(self._unreadable(error)) from error
        try:
            yield container
        finally:
            container.close()

    def _target(self) -> str | BinaryIO:
        if self._path is not None:
            return self._path
        if self._file is not None:
            self._file.seek(self._start)
            return self._file
        assert self._data is not None  # neither a path nor a file: the bytes
        return io.BytesIO(self._data)

    def _unreadable(self, error: Exception) -> str:
        """Why FFmpeg found no media here, in words a person can act on."""
        kind = describe_bytes(self._head())
        if kind is not None and not kind.endswith(("video", "file")):  # text, a document, an image...
            return f"this is {kind}, not a video"
        reason = getattr(error, "strerror", None) or str(error)  # without FFmpeg's "'<none>'"
        if kind is None:
            return f"FFmpeg cannot read this input as media ({reason})"
        if (cut := self.cut_short()) is not None:  # an MP4/MOV file cut off
            return incomplete_mp4(cut)
        return (
            f"FFmpeg cannot read this input as media ({reason}); it starts like {kind}, so it may be damaged"
        )

    def cut_short(self) -> str | None:
        """How this MP4/MOV file ends early (sniff.mp4_cut_short), or None: whole, or not an
        MP4/MOV file at all."""
        if describe_bytes(self._head()) != "an MP4/MOV file":
            return None
        try:
            if self._data is not None:
                data = self._data
                return mp4_cut_short(lambda offset, count: bytes(data[offset : offset + count]), len(data))
            if self._path is not None:
                with open(self._path, "rb") as file:
                    return _cut_short_in(file, 0)
            assert self._file is not None  # neither bytes nor a path: a file
            return _cut_short_in(self._file, self._start)
        except OSError:
            return None

    def _head(self) -> bytes:
        if self._data is not None:
            return self._data[:HEAD_BYTES]
        if self._path is not None:
            try:
                with open(self._path, "rb") as file:
                    return file.read(HEAD_BYTES)
            except OSError:  # a directory, say: nothing to sniff
                return b""
        assert self._file is not None  # neither bytes nor a path: a file
        self._file.seek(self._start)
        return self._file.read(HEAD_BYTES)


def _check_path(path: str) -> None:
    try:
        size = os.path.getsize(path)
    except OSError as error:
        raise MediaNotFoundError(f"cannot read {path!r}: {error.strerror}") from error
    if size == 0:
        raise CorruptMediaError(f"{path!r} is empty (0 bytes)")


def incomplete_mp4(cut: str) -> str:
    """What to tell of an MP4/MOV file that ends `cut` ("before its index (the moov box)")."""
    return f"the MP4/MOV file is incomplete: it ends {cut}, as when a download or a recording is cut off"


def _cut_short_in(file: BinaryIO, start: int) -> str | None:
    """mp4_cut_short for the MP4/MOV file that starts at `start` in `file`."""
    size = file.seek(0, os.SEEK_END) - start

    def read_at(offset: int, count: int) -> bytes:
        file.seek(start + offset)
        return file.read(count)

    return mp4_cut_short(read_at, size)


def _seekable(file: BinaryIO) -> bool:
    try:
        return bool(file.seekable())
    except (AttributeError, OSError, ValueError):
        return False


class VideoSource:
    """The input's video stream, opened for each pass that reads it. The container opened
    for the survey is kept and rewound for the first decode pass after it (opening costs
    FFmpeg a probe that decodes a few frames); a fresh one is opened if rewinding fails."""

    def __init__(self, source: Source, device: str = "cpu"):
        self._input, self._device = ReopenableSource(source), device
        self.decoded_on_gpu: bool | None = None  # once a decoder has run: whether NVDEC did the work
        self._kept: OpenVideo | None = None
        self._lock = threading.Lock()  # passes running side by side each ask for the kept one

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        kept = self._take_kept()
        if kept is not None:
            kept.__exit__(None, None, None)

    def cut_short(self) -> str | None:
        """How the input, an MP4/MOV file, ends early; None if it does not (ReopenableSource)."""
        return self._input.cut_short()

    def open(self, threads: int) -> OpenVideo:
        """A fresh container; `threads`: FFmpeg threads for its decoder."""
        return OpenVideo(self._input, threads, self._device, self)

    @contextmanager
    def kept_open(self, threads: int) -> Iterator[tuple[InputContainer, VideoStream]]:
        """(container, stream), left open after the block for `rewound` to reuse."""
        opened = self.open(threads)
        streams = opened.__enter__()
        self._kept = opened
        with opened.mapping_errors():
            yield streams

    @contextmanager
    def rewound(
        self, index: FrameIndex, threads: int
    ) -> Iterator[tuple[InputContainer, VideoStream, Iterator[Packet[VideoStream]]]]:
        """(container, stream, packets from the first keyframe): the kept container
        rewound if there is one and it can be, else a fresh one."""
        kept = self._take_kept()  # one user; closed when it is done
        if kept is not None:
            try:
                if index.complete and len(index.keyframes):
                    container, stream = kept.opened
                    set_threads(stream, threads)  # the decoder is not open yet
                    with kept.mapping_errors():
                        packets = rewind(container, stream, index)
                        if packets is not None:
                            yield container, stream, packets
                            return
            finally:
                kept.__exit__(None, None, None)
        with self.open(threads) as (container, stream):
            yield container, stream, container.demux(stream)

    def _take_kept(self) -> OpenVideo | None:
        with self._lock:
            kept, self._kept = self._kept, None
            return kept


class OpenVideo:
    """Context manager: the container and its video stream, set up for decoding.

    Maps FFmpeg's exceptions to MediaError on the way out.
    """

    def __init__(
        self, source: ReopenableSource, threads: int, device: str = "cpu", video: VideoSource | None = None
    ):
        self._source, self._threads, self._device, self._video = source, threads, device, video

    def __enter__(self) -> tuple[InputContainer, VideoStream]:
        self._opened = self._source.open(self._device)
        container = self._opened.__enter__()
        try:
            stream = select_video_stream(container)
            set_threads(stream, self._threads)
        except NoVideoStreamError as error:
            self._opened.__exit__(None, None, None)
            cut = self._source.cut_short()  # an index cut into lists streams it cannot describe
            if cut is not None:
                raise CorruptMediaError(incomplete_mp4(cut)) from error
            raise
        except BaseException:
            self._opened.__exit__(None, None, None)
            raise
        self.opened = container, stream
        return self.opened

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        ctx = self.opened[1].codec_context
        if self._video is not None and ctx.is_open:  # a decoder ran: say whether NVDEC did the work
            self._video.decoded_on_gpu = bool(ctx.is_hwaccel)
        self._opened.__exit__(None, None, None)
        if isinstance(error, FFMPEG_ERRORS):
            raise _damaged(error) from error

    @contextmanager
    def mapping_errors(self) -> Iterator[None]:
        """FFmpeg's exceptions as CorruptMediaError, for work done outside `with`."""
        try:
            yield
        except FFMPEG_ERRORS as error:
            raise _damaged(error) from error


def _damaged(error: Exception) -> CorruptMediaError:
    return CorruptMediaError(f"the video is damaged or truncated: {error}")


def set_threads(stream: VideoStream, threads: int) -> None:
    ctx = stream.codec_context
    ctx.thread_type = "AUTO"  # frame and slice threads
    ctx.thread_count = 1 if ctx.width * ctx.height <= SMALL_FRAME_PIXELS else threads


def select_video_stream(container: InputContainer) -> VideoStream:
    """FFmpeg's best video stream (av_find_best_stream, as ffprobe, torchcodec and decord
    choose): the default one, then the one with the most frames probed, then the highest
    bit rate. Not the first: a file may carry a small preview stream before the real one."""
    candidates = [
        s for s in container.streams.video if not (s.disposition & av.stream.Disposition.attached_pic)
    ]
    if not candidates:
        kinds: list[str] = sorted({s.type for s in container.streams}) or ["nothing"]
        raise NoVideoStreamError(f"the input has no video stream (it holds: {', '.join(kinds)})")
    if container.format.name.endswith("_pipe") or container.format.name == "image2":
        raise NoVideoStreamError(
            f"the input is a still image ({container.format.name.removesuffix('_pipe')}), not a video: "
            "send it as an image_url part"
        )
    best = container.streams.best("video")
    # FFmpeg passes over streams for the hearing or visually impaired, and may rank cover art.
    stream = best if best in candidates else candidates[0]
    if stream.codec_context is None:
        raise UnsupportedCodecError("the video's codec is not one FFmpeg can decode")
    if not stream.codec_context.width or not stream.codec_context.height:
        raise CorruptMediaError("the video stream does not say its frame size")
    return stream


def decode_packet(ctx: VideoCodecContext, packet: Packet[VideoStream] | None) -> Sequence[VideoFrame]:
    """Decode one packet; a packet the decoder rejects is skipped like a lost packet,
    as players do (the frames after it may still decode). A decoder that cannot open
    (its setup data is damaged) never will: that is corrupt media."""
    try:
        return ctx.decode(packet)
    except av.InvalidDataError as error:
        if not ctx.is_open:
            raise CorruptMediaError(f"the video's decoder could not start: {error}") from error
        return ()


def decode_all(
    container: InputContainer, stream: VideoStream, check: Callable[[], None]
) -> Iterator[VideoFrame]:
    """Every frame of the stream from where the container stands; `check` between packets."""
    ctx = stream.codec_context
    for packet in container.demux(stream):
        check()
        if packet.size:
            yield from decode_packet(ctx, packet)
    yield from decode_packet(ctx, None)
