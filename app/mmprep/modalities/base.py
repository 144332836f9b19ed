"""The modality record: everything mmprep does differently for an image, a video and
audio, in one object per modality, as vLLM keeps a MediaIO per modality behind one
media connector. The rooms that handle media ask the record; none compares a modality's name.

A record says:
- `name`: the modality's name ("video"): a PreparedRequest media part's type, MediaItem.kind,
  a placeholder's modality, the metrics' label;
- `part_type`: the OpenAI content part that carries one ("video_url"; `part_types`, every
  part that does: audio's `input_audio` too), `part_source` its URL and `part_options`,
  the keys such a part may carry besides its URL;
- `timed`: whether an item is frames over time (timestamps, indices, sampling, the video
  rules of the families and of vLLM's wire);
- `for_part`: the record with a part's decode options bound, where the modality has any (a
  video's sampling: the video record holds it, as vLLM's VideoMediaIO holds its loader's);
- `decode`: the fetched bytes made into a `Loaded[D]` (D: what the modality decodes to, as
  vLLM's MediaIO[_T]; with the processor's tensors), whose `item` is the MediaItem the
  engines get; `units`, an item's frames; `account`, what the echo engine says of it beyond
  its tensor; `item_tokens`, what replaces its pad in the prompt;
- `data_url`: the item as an OpenAI-compatible server takes it back;
- `hashed_bare`: vLLM hashes the item's tensor as it is (audio's waveform), not as a picture;
- `token_type_id`: transformers' mm_token_type_ids value for its placeholder tokens;
  `processor_scope`, the key of mm_processor_kwargs for its processor alone ("videos_kwargs").
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar

import numpy as np

from mmprep import families
from mmprep.decoders import DecodedImage, DecodedVideo, MediaError, VideoMetadata, VideoSampling
from mmprep.families import Kind
from mmprep.processors import ProcessedMedia, Processor, ProcessorError

from ..core.config import MediaSettings, Settings
from ..core.errors import ServiceError
from ..interface.prepared import MediaItem
from ..media.data_url import DataURL

# What a modality decodes to (DecodedImage, DecodedVideo, DecodedAudio). Covariant: a table
# of every modality holds them as Modality[object], and what it decodes is only given out.
D = TypeVar("D", covariant=True)
# work() timed for mmprep_process_seconds under the modality's name (the Preprocessor's).
TimedProcessing = Callable[[str, Callable[[], ProcessedMedia]], ProcessedMedia]


class FramePicks(Protocol):
    """The model's own rule for a video's frames (preprocess/loader_picks.py's LoaderPicks):
    decode_video's frame_picks, and what the item then says of them."""

    def __call__(self, metadata: VideoMetadata) -> Sequence[int] | None: ...

    def hf_metadata(self, video: DecodedVideo) -> dict[str, Any]: ...

    def account(self, video: DecodedVideo) -> dict[str, Any]: ...


class Vision(Protocol):
    """What a decode asks of the model's processing (preprocess/vision.py's VisionProcessing,
    in a room above this one): its processor, its frame rules and its token check."""

    @property
    def processor(self) -> Processor: ...

    def process_image(self, image: DecodedImage) -> ProcessedMedia: ...

    def frame_rule(self, num_frames: int, height: int, width: int) -> tuple[int, int]: ...

    def loader_picks(self, sampling: VideoSampling, default_fps: float, limit: int) -> FramePicks | None: ...

    def decoder_threads(self, threads: int) -> int: ...


@dataclass(frozen=True, kw_only=True)
class Loaded(ABC, Generic[D]):
    """One media item decoded, and processed with --processor: what the decode cache keeps.
    Each modality's own says what else its item carries."""

    decoded: D
    processed: ProcessedMedia | None = None

    @property
    @abstractmethod
    def tensor(self) -> np.ndarray:
        """Its frames, pixels (uint8 RGB) or waveform."""

    @property
    def nbytes(self) -> int:
        processed = self.processed.tensors.values() if self.processed is not None else ()
        return self.tensor.nbytes + sum(tensor.nbytes for tensor in processed)

    @abstractmethod
    def item(self, param: str) -> MediaItem:
        """The MediaItem an engine gets for the part at `param`."""


@dataclass(frozen=True)
class DecodeContext:
    """What a decode in the pool's thread works with besides the bytes and the part's options."""

    settings: Settings
    vision: Vision | None  # None without --processor / --model
    cancel: threading.Event
    threads: int  # this decode's share of the cores
    timed: TimedProcessing


@dataclass(frozen=True)
class Modality(ABC, Generic[D]):
    """A modality's record; with a part's decode options bound (for_part), that part's decode.
    Equal records decode equal bytes alike: parts and the decode cache key by them."""

    name: ClassVar[Kind]  # the names are the families' Kind: what a family has rules for
    part_type: ClassVar[str]
    timed: ClassVar[bool]
    hashed_bare: ClassVar[bool] = False
    token_type_id: ClassVar[int]
    processor_scope: ClassVar[str]

    @property
    def part_types(self) -> tuple[str, ...]:
        """Every content part type that carries an item of this modality."""
        return (self.part_type,)

    def part_source(self, part_type: str, value: Any, param: str) -> tuple[str | DataURL, dict[str, Any]]:
        """The URL a part of `part_type` (its value: `value`) points at, and its own options.
        A long data URL stays the DataURL app/mmprep/transport/json_body.py made of it."""
        if isinstance(value, str | DataURL):  # some clients send the URL bare
            return value, {}
        if not isinstance(value, dict) or not isinstance(value.get("url"), str | DataURL) or not value["url"]:
            raise ServiceError(
                f"{param} must be an object with a 'url' string", "invalid_content_part", param
            )
        return value["url"], self.part_options(value, param)

    @abstractmethod
    def part_options(self, value: dict[str, Any], param: str) -> dict[str, Any]:
        """The keys a part carries besides its URL, checked; a ServiceError naming any other."""

    def for_part(
        self,
        requested: dict[str, Any],
        own: dict[str, Any],
        settings: MediaSettings,
        param: str,
        model_picks: bool = False,
    ) -> Self:
        """This record with the part's decode options bound: its own keys over the request's
        over the server's. `model_picks`: the model's own rule picks the frames, at their own
        size (preprocess/loader_picks.py): the server's frame and size defaults do not apply.
        Itself for a modality whose decode takes no options."""
        return self

    @abstractmethod
    def decode(self, data: bytes, context: DecodeContext) -> Loaded[D]:
        """The bytes decoded (in the pool's thread), and processed when there is a processor."""

    def units(self, tensor: np.ndarray) -> int:
        """The frames a tensor of this modality holds."""
        return len(tensor) if self.timed else 1

    def account(self, item: MediaItem) -> dict[str, Any]:
        """What the echo engine says of an item besides its tensor and metadata."""
        return {}

    def item_tokens(
        self,
        family: families.Family,
        item: MediaItem,
        processor: Processor,
        token_ids: dict[str, int],
        encode: Callable[[str], list[int]],
    ) -> list[int]:
        """The tokens that replace a processed item's one pad in the prompt, as its family's
        side writes them from its grid, with this side of `processor`'s config. A ValueError
        where they cannot be known."""
        assert item.processed is not None  # render/placeholders.py checks it
        config = processor.config(item.kind)
        if config is None:
            raise ValueError(f"{item.param}: the model folder has no image processor config")
        side = family.sides[item.kind]
        grid = side.item_grid(item.processed.tensors)
        video = item.sampled_video() if self.timed else None
        return side.item_tokens(grid, config, token_ids, video, encode)

    @abstractmethod
    def data_url(self, item: MediaItem, encode: Callable[[np.ndarray], str], picture_type: str) -> str:
        """The item as a data URL an OpenAI-compatible server reads, each picture as
        `encode` writes it (base64 of a `picture_type` file: jpeg or png)."""


def part_error(error: MediaError | ProcessorError | ServiceError, param: str) -> ServiceError:
    """A sampling, decoding, processing or fetching error as the client sees it: a 400 naming the part."""
    return ServiceError(f"{param}: {error}", error.code, param)
