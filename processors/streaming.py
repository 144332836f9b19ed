"""`VideoStream`: a video's frames resized and written into the processor's output as they
arrive, so processing runs while the decoder is still decoding instead of after it.

Feed it from decode_video's `on_frame` (or not at all), then ask for `result(frames)`:

    with processor.stream_video(threads) as stream:
        video = decode_video(data, num_frames=32, on_frame=stream.add)
        processed = stream.result(video.frames)

Each frame is one task in a small thread pool (Pillow and numpy release the GIL for the
heavy parts), so a thread the OS holds back (the cores are shared) delays one frame, not
half the clip; with one thread the work runs in the caller's thread as frames come. If the
frames in the end are not the ones announced (a damaged video returns fewer than planned),
`result` processes the frames it is given from scratch: announcing is only a head start.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Self

import numpy as np

from .errors import ProcessorError
from .patches import PatchWriter, ProcessedMedia
from .resize import resize_bicubic

_DONE = Future()  # a frame written in the announcing thread
_DONE.set_result(None)


class VideoStream:
    """`processor`: the Processor whose video config applies; `threads`: frames processed
    at once (1: in the announcing thread)."""

    def __init__(self, processor, threads: int):
        self._processor = processor
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="processor") if threads > 1 else None
        self._lock = threading.Lock()
        self._clip: _Clip | None = None
        self._refused = False  # the announced clip cannot be processed: result() says why
        self._tasks: dict[int, Future] = {}

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info) -> None:
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
            if self._refused:
                return
            earlier = self._tasks.get(position)
        if earlier is not None:  # announced again (a retried decode pass): the later one wins
            wait([earlier])
        self._submit(position, frame)

    def result(self, frames: np.ndarray) -> ProcessedMedia:
        """The processed `frames`, uint8 (T, H, W, 3): from what was announced if that was
        all of them, else from the frames themselves, now."""
        self._finish()
        announced = self._clip is not None and self._clip.holds(frames) and len(self._tasks) == len(frames)
        if not announced:
            self._tasks = {}
            self._clip = _Clip(self._processor, len(frames), frames.shape[1:3])  # raises what add() kept back
            for position, frame in enumerate(frames):
                self._submit(position, frame)
            self._finish()
        return self._clip.writer.processed("pixel_values_videos", "video_grid_thw")

    def _submit(self, position: int, frame: np.ndarray) -> None:
        if self._pool is not None:
            self._tasks[position] = self._pool.submit(self._clip.write, position, frame)
        else:
            self._clip.write(position, frame)
            self._tasks[position] = _DONE

    def _finish(self) -> None:
        for task in list(self._tasks.values()):
            task.result()  # a task's error is raised here


class _Clip:
    """One clip's output: the size its frames are resized to, and the writer they go into."""

    def __init__(self, processor, count: int, frame_size: tuple[int, int]):
        self.count, self.frame_size = count, tuple(frame_size)
        self.size = processor.video_size(count, *frame_size)
        grid_t = -(-count // processor.video_config.temporal_patch_size)
        self.writer = PatchWriter(processor.video_config, grid_t, *self.size)

    def holds(self, frames: np.ndarray) -> bool:
        return len(frames) == self.count and tuple(frames.shape[1:3]) == self.frame_size

    def write(self, position: int, frame: np.ndarray) -> None:
        """Resize frame `position` and write it; the last frame also fills the last temporal
        block's remaining slots (transformers pads with copies of it), resized once."""
        resized = resize_bicubic(frame, *self.size)
        writer = self.writer
        end = writer.grid_t * writer.temporal if position == self.count - 1 else position + 1
        for index in range(position, end):
            writer.write(resized, index)
