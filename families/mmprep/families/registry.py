"""The registry: every family mmprep knows, by its name and by config.json's `model_type`.

Adding a family is one module beside qwen2_vl.py (a Family subclass and its FAMILY) and its
line in REGISTERED; the tables below are built from the families' own attributes.
"""

from __future__ import annotations

from . import (
    gemma3,
    gemma4,
    internvl,
    llama4,
    llava_onevision,
    mistral3,
    qwen2_5_vl,
    qwen2_vl,
    qwen3_5,
    qwen3_vl,
)
from .base import Family

REGISTERED: tuple[Family, ...] = (
    qwen2_vl.FAMILY,
    qwen2_5_vl.FAMILY,
    qwen3_vl.FAMILY,
    qwen3_5.FAMILY,
    llava_onevision.FAMILY,
    internvl.FAMILY,
    gemma4.FAMILY,
    gemma3.FAMILY,
    mistral3.FAMILY,
    llama4.FAMILY,
)


def _table(pairs: list[tuple[str, Family]], what: str) -> dict[str, Family]:
    table: dict[str, Family] = {}
    for key, family in pairs:
        if key in table:  # two families claiming one name would make the lookup depend on order
            raise RuntimeError(f"{what} {key!r} is claimed by {table[key].name} and {family.name}")
        table[key] = family
    return table


BY_NAME = _table([(family.name, family) for family in REGISTERED], "family name")
BY_MODEL_TYPE = _table(
    [(model_type, family) for family in REGISTERED for model_type in family.model_types], "model_type"
)
BY_PROCESSOR_CLASS = _table(
    [(name, family) for family in REGISTERED for name in family.processor_classes], "processor_class"
)
BY_VIDEO_PROCESSOR_CLASS = _table(
    [(name, family) for family in REGISTERED for name in family.video_processor_classes],
    "video_processor_type",
)
_IMAGE_PROCESSOR_CLASSES = [
    (name, family) for family in REGISTERED for name in family.image_processor_classes
]

FAMILIES = tuple(BY_NAME)  # the names, in registration order
MODEL_TYPES = tuple(BY_MODEL_TYPE)


def get(name: str) -> Family:
    """The family of this name (a KeyError naming the known ones for any other)."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown model family {name!r}: one of {', '.join(FAMILIES)}") from None


def find(name: str | None) -> Family | None:
    """The family of this name, None for None or a name no family has."""
    return BY_NAME.get(name) if name is not None else None


def for_model_type(model_type: object) -> Family | None:
    """The family of a config.json `model_type` (qwen3_vl_moe is qwen3_vl), None if none."""
    return BY_MODEL_TYPE.get(model_type) if isinstance(model_type, str) else None


def for_processor_class(key: str, value: object) -> Family | None:
    """The family a processor config's `processor_class` or `video_processor_type` names."""
    table = BY_PROCESSOR_CLASS if key == "processor_class" else BY_VIDEO_PROCESSOR_CLASS
    return table.get(value) if isinstance(value, str) else None


def for_image_processor_type(value: object) -> Family | None:
    """The family whose image processor class `value` is (its Fast variant too)."""
    for name, family in _IMAGE_PROCESSOR_CLASSES:
        if str(value or "").startswith(name):
            return family
    return None
