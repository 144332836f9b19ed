"""The modalities mmprep takes (image, video, audio), one module each behind one table: each a
record (base.Modality) of what differs between them, from the content part that carries one
to what the echo engine says of it. Every other room asks the record; adding a modality is
one module and its line here."""

from __future__ import annotations

from mmprep.families import Kind

from ..interface.prepared import MediaItem
from .audio import AUDIO
from .base import DecodeContext, Loaded, Modality, part_error
from .image import IMAGE
from .video import VIDEO

MODALITIES: dict[Kind, Modality[object]] = {modality.name: modality for modality in (IMAGE, VIDEO, AUDIO)}
BY_PART_TYPE: dict[str, Modality[object]] = {
    part_type: modality for modality in MODALITIES.values() for part_type in modality.part_types
}


def modality_of(item: MediaItem) -> Modality[object]:
    """The record of an item's modality."""
    return MODALITIES[item.kind]


__all__ = [
    "BY_PART_TYPE",
    "MODALITIES",
    "DecodeContext",
    "Loaded",
    "Modality",
    "modality_of",
    "part_error",
]
