"""The frames of a video where vLLM's loader rule applies: where mmprep stands in for
vLLM's renderer (preprocess/vision.py, `speaks_vllm`), a video gets the frames vLLM 0.33's
loader for the model takes (the Qwen-VL line's own, else its plain one:
`Family.vllm_video_loader`, `Family.vllm_frame_picks`), by its arithmetic over what it reads
of the file (`families.vllm_source`:
the header's frame count, its average rate, their quotient as the duration), as positions
over the frames the decoder hands out, counted from the start as OpenCV's grab loop
counts them (the decoder's order, not the timestamps': decoders' DecodePlan.in_output_order).

Where that loader would not return what it picks (its count, from the header or its seek
to the end, names a frame that does not play: its grab fails, and vLLM hands the model
fewer frames), the frames are picked by the
same rule over what plays (the count that decodes, the timestamps' span), and the item says
so: `"picks": "presentation-time"` with the reason, in its metadata and the log.

The server's limits stay: a video whose picks are more than `--max-frames` is a 400 naming
it, never fewer frames. A request's own max_frames (mmprep's key) bounds the Qwen-VL
loaders' picks as their max_frames would.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from mmprep import families
from mmprep.decoders import DecodedVideo, VideoMetadata

from ..core.errors import ServiceError

log = logging.getLogger("mmprep")


@dataclass(frozen=True)
class LoaderPicks:
    """decode_video's frame_picks rule for one video part, and what the item then says."""

    family: families.Family
    asked: families.FramesAsked  # the request's fps, num_frames and max_frames
    limit: int  # --max-frames: picks beyond it are a 400

    def __call__(self, metadata: VideoMetadata) -> list[int]:
        source, picks = self._decide(metadata)
        if source is None:
            log.info("%s; picking by presentation time", self._why_not(metadata))
        return picks

    def source(self, metadata: VideoMetadata) -> families.LoaderSource | None:
        """vLLM's view of the video, or None where its loader would fail to grab a frame it
        picks (it counts frames that do not play: a header or its end seek says so)."""
        return self._decide(metadata)[0]

    @staticmethod
    def _vllm_source(metadata: VideoMetadata) -> families.LoaderSource:
        return families.vllm_source(
            metadata.num_frames, metadata.header_frames, metadata.end_seek_frames, metadata.fps
        )

    def _why_not(self, metadata: VideoMetadata) -> str:
        """Why vLLM's loader would not return the frames it picks, in words."""
        total = self._vllm_source(metadata).total
        counted = (
            "the header's count"
            if total == metadata.header_frames
            else "where OpenCV's seek to the end lands"
        )
        return (
            f"vLLM's {self.family.vllm_video_loader} loader counts {total} frames ({counted}) but "
            f"{metadata.num_frames} play: it would fail to grab a frame it picks"
        )

    def _decide(self, metadata: VideoMetadata) -> tuple[families.LoaderSource | None, list[int]]:
        """vLLM's view and its picks; where they name a frame that does not play, None and
        the same rule's picks over what plays."""
        source = self._vllm_source(metadata)
        picks = self._picks(source.total, source.duration)
        if max(picks) < metadata.num_frames:
            return source, picks
        return None, self._picks(metadata.num_frames, metadata.duration)

    def _picks(self, total: int, duration: float) -> list[int]:
        picks = self.family.vllm_frame_picks(total, duration, self.asked)
        if len(set(picks)) > self.limit:
            raise ServiceError(
                f"vLLM's {self.family.vllm_video_loader} loader takes {len(set(picks))} frames of this "
                f"video, more than the server's --max-frames {self.limit}: ask for fewer "
                "(media_io_kwargs.video.fps or num_frames) or send a shorter video",
                "too_many_frames",
            )
        return picks

    def hf_metadata(self, video: DecodedVideo) -> dict[str, Any]:
        """transformers' VideoMetadata as vLLM's loader writes it: its frame count and
        duration (`source`) where its picks stand; the decoder's where they do not."""
        metadata = video.to_hf_metadata()
        source = self.source(video.metadata)
        if source is not None:
            metadata |= {"total_num_frames": source.total, "duration": source.duration}
        return metadata

    def account(self, video: DecodedVideo) -> dict[str, Any]:
        """How the frames were picked, for the item's metadata (the echo account shows it)."""
        if self.source(video.metadata) is not None:
            return {"picks": f"vllm:{self.family.vllm_video_loader}"}
        return {"picks": "presentation-time", "picks_reason": self._why_not(video.metadata)}
