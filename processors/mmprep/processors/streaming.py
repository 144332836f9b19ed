"""`VideoStream`: a video's frames resized and written into the processor's output as they
arrive, so processing runs while the decoder is still decoding instead of after it.

Feed it from decode_video's `on_frame` (or not at all), then ask for `result(frames)`:

    with processor.stream_video(threads) as stream:
        video = decode_video(data, num_frames=32, on_frame=stream.add)
        processed = stream.result(video.frames)

Each frame is one task in a small thread pool (Pillow and numpy release the GIL for the
heavy parts), so a thread the OS holds back (the cores are shared) delays one frame, not
half the clip. With one thread the work runs in the announcing thread as frames come: it
then counts against the decode's timeout, and its errors come out of decode_video. If the
frames in the end are not the ones announced (a damaged video returns fewer than planned),
`result` processes the frames it is given from scratch: announcing is only a head start.

What `add` relies on, as decode_video guarantees: one thread at a time announces a given
position (a retried pass announces again only after the first ones ended), and `result`
comes after the last `add`.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Protocol, Self

import numpy as np

from .errors import ProcessorError
from .patches import PatchWriter, ProcessedMedia
from .tiles import TileWriter


class VideoLayout(Protocol):
    """What a stream asks of the processor whose video config applies (a Processor is one;
    a protocol, so that this module needs nothing of processor.py, which makes the streams)."""

    def video_writer(self, num_frames: int, height: int, width: int) -> PatchWriter | TileWriter: ...


class VideoStream:
    """`processor`: the Processor whose video config applies; `threads`: frames processed
    at once (1: in the announcing thread)."""

    def __init__(self, processor: VideoLayout, threads: int):
        self._processor = processor
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="processor") if threads > 1 else None
        self._lock = threading.Lock()
        self._clip: _Clip | None = None
        self._refused = False  # the announced clip cannot be processed: result() says why
        self._sources: dict[int, int] = {}  # position -> address of the frame written there
        self._tasks: dict[int, Future[None]] = {}  # position -> its write, when in the pool

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._pool is not None:  # a failed decode leaves no work running on its frames
            self._pool.shutdown(wait=True, cancel_futures=True)

    def add(self, position: int, count: int, frame: np.ndarray) -> None:
        """decode_video's on_frame: frame `position` of the `count` planned, uint8 (H, W, 3)."""
        with self._lock:
            if self._clip is None and not self._refused:
                try:
                    self._clip = _Clip(self._processor, count, frame.shape[:2])
                except ProcessorError:
                    self._refused = True  # not raised into the decoder: result() raises it
            clip = self._clip
            if clip is None:  # refused
                return
            earlier = self._tasks.get(position)
        if earlier is not None and not earlier.cancel():  # announced again: the later frame wins
            wait([earlier])
        self._submit(clip, position, frame)

    def result(self, frames: np.ndarray) -> ProcessedMedia:
        """The processed `frames`, uint8 (T, H, W, 3): from what was announced if that was
        these very frames, else from the frames themselves, now."""
        self._finish()
        clip = self._clip
        if clip is None or not self._announced(clip, frames):
            self._sources, self._tasks = {}, {}
            # Made again for the frames given (their count may not be the one planned), so
            # a refusal that add() kept back is raised here, in the caller's thread.
            clip = self._clip = _Clip(self._processor, len(frames), frames.shape[1:3])
            for position, frame in enumerate(frames):
                self._submit(clip, position, frame)
            self._finish()
        return clip.writer.processed()

    def _announced(self, clip: _Clip, frames: np.ndarray) -> bool:
        sources = self._sources
        if not clip.holds(frames) or len(sources) != len(frames):
            return False
        return all(sources[position] == _address(frame) for position, frame in enumerate(frames))

    def _submit(self, clip: _Clip, position: int, frame: np.ndarray) -> None:
        self._sources[position] = _address(frame)
        if self._pool is None:
            clip.write(position, frame)
        else:
            self._tasks[position] = self._pool.submit(clip.write, position, frame)

    def _finish(self) -> None:
        for task in list(self._tasks.values()):  # a cancelled write was replaced in _tasks by its successor
            task.result()  # a task's error is raised here


class _Clip:
    """One clip's output: the writer its frames go into, resized to the clip's size."""

    def __init__(self, processor: VideoLayout, count: int, frame_size: tuple[int, int]):
        self.count, self.frame_size = count, tuple(frame_size)
        self.writer = processor.video_writer(count, *frame_size)

    def holds(self, frames: np.ndarray) -> bool:
        return len(frames) == self.count and tuple(frames.shape[1:3]) == self.frame_size

    def write(self, position: int, frame: np.ndarray) -> None:
        """Resize frame `position` and write it; the last frame also fills the last temporal
        block's remaining slots (transformers pads with copies of it), resized once."""
        writer = self.writer
        end = writer.grid_t * writer.temporal if position == self.count - 1 else position + 1
        writer.write(frame, position, copies=end - position)


def _address(frame: np.ndarray) -> int:
    """Where a frame's pixels are: the same frame announced and returned is at one address."""
    return int(frame.__array_interface__["data"][0])
