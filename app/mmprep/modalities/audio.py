"""Audio: OpenAI's `input_audio` part (`{"data": base64, "format": "wav"}`) and vLLM's
`audio_url` part (an http(s), data: or file: URL, as the other parts take them), decoded with
PyAV to a float32 mono waveform at the model's feature-extractor rate, as vLLM 0.33 makes it
(AudioMediaIO, then its parser's resampler), then the extractor's log-mel features.

vLLM reads an `input_audio` part as the data URL `data:audio/<format>;base64,<data>`
(renderers/chat_utils/content_parser.py), and decodes by the bytes, whatever the format says:
so does mmprep. Without a processor (no --model, no --processor) the waveform stays at the
file's own rate: there is no model whose rate it should have.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import soundfile

from mmprep import families
from mmprep.decoders import DecodedAudio, decode_audio
from mmprep.processors import Processor

from ..core.errors import ServiceError
from ..interface.prepared import MediaItem
from ..media.data_url import DataURL
from .base import DecodeContext, Loaded, Modality

AUDIO_URL_KEYS = ("url",)
INPUT_AUDIO_KEYS = ("data", "format")


@dataclass(frozen=True, kw_only=True)
class LoadedAudio(Loaded[DecodedAudio]):
    @property
    def tensor(self) -> np.ndarray:
        return self.decoded.waveform

    def item(self, param: str) -> MediaItem:
        audio = self.decoded
        return MediaItem(
            kind=AUDIO.name,
            tensor=audio.waveform,
            metadata={**audio.metadata.to_dict(), "sampling_rate": audio.sampling_rate},
            param=param,
            processed=self.processed,
        )


@dataclass(frozen=True)
class Audio(Modality[DecodedAudio]):
    name = "audio"
    part_type = "audio_url"  # what an OpenAI-compatible upstream is sent (data_url)
    part_types = ("audio_url", "input_audio")
    timed = False
    hashed_bare = True  # vLLM's parser hands its hasher the resampled waveform itself
    token_type_id = 3  # transformers' create_mm_token_type_ids: audio tokens are 3
    processor_scope = "audio_kwargs"

    def part_options(self, value: dict[str, Any], param: str) -> dict[str, Any]:
        unknown = sorted(set(value) - set(AUDIO_URL_KEYS))
        if unknown:
            raise ServiceError(
                f"{param} has unknown key(s) {', '.join(map(repr, unknown))}: an audio_url takes url",
                "invalid_content_part",
                param,
            )
        return {}

    def part_source(self, part_type: str, value: Any, param: str) -> tuple[str | DataURL, dict[str, Any]]:
        if part_type != "input_audio":
            return super().part_source(part_type, value, param)
        if not isinstance(value, dict) or not isinstance(value.get("data"), str) or not value["data"]:
            raise ServiceError(
                f"{param} must be an object with a 'data' string (the file, base64) and a 'format'",
                "invalid_content_part",
                param,
            )
        unknown = sorted(set(value) - set(INPUT_AUDIO_KEYS))
        if unknown:
            raise ServiceError(
                f"{param} has unknown key(s) {', '.join(map(repr, unknown))}: "
                "an input_audio takes data, format",
                "invalid_content_part",
                param,
            )
        audio_format = value.get("format", "")
        if not isinstance(audio_format, str):
            raise ServiceError(
                f"{param}.format must be a string such as 'wav'", "invalid_content_part", param
            )
        try:
            payload = value["data"].encode("ascii")
        except UnicodeEncodeError:
            raise ServiceError(f"{param}.data is not base64", "invalid_content_part", param) from None
        # vLLM's data:audio/<format>;base64,<data>, held as the DataURL a long data URL is
        return DataURL(f"audio/{audio_format}", True, payload), {}

    def decode(self, data: bytes, context: DecodeContext) -> LoadedAudio:
        vision = context.vision
        processor: Processor | None = vision.processor if vision is not None else None
        rate = processor.audio_config.sampling_rate if processor and processor.audio_config else None
        audio = decode_audio(data, sampling_rate=rate)
        if processor is None:
            return LoadedAudio(decoded=audio)
        processed = context.timed(self.name, lambda: processor.process_audio(audio.waveform))
        return LoadedAudio(decoded=audio, processed=processed)

    def item_tokens(
        self,
        family: families.Family,
        item: MediaItem,
        processor: Processor,
        token_ids: dict[str, int],
        encode: Callable[[str], list[int]],
    ) -> list[int]:
        """`<|audio>`, a soft token per 40 ms of unmasked features (at most the processor's
        audio_seq_length), `<audio|>`: transformers' replace_audio_token."""
        assert item.processed is not None  # placeholders.item_tokens checks it
        if processor.audio_config is None:
            raise ValueError(f"{item.param}: the model's processor has no audio feature extractor")
        (frames,) = family.audio.item_grid(item.processed.tensors)
        return family.audio.placeholder_tokens(frames, processor.audio_config.seq_length, token_ids)

    def data_url(self, item: MediaItem, encode: Callable[[np.ndarray], str], picture_type: str) -> str:
        """The waveform as a 32-bit float WAV at its own rate: vLLM's loaders read it as it
        is (no rounding to 16-bit), and resample it only where the rate is not the model's."""
        wav = float_wav(item.tensor, item.metadata["sampling_rate"])
        return "data:audio/wav;base64," + base64.b64encode(wav).decode("ascii")


def float_wav(waveform: np.ndarray, rate: int) -> bytes:
    """A mono 32-bit float WAV file of `waveform`, as libsndfile writes it."""
    buffer = io.BytesIO()
    soundfile.write(buffer, waveform, rate, format="WAV", subtype="FLOAT")
    return buffer.getvalue()


AUDIO = Audio()
