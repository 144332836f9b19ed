"""`load_processor`: a family name, a preset model id, or a model folder, to a `Processor`.

Presets are the published preprocessor configs of the common Qwen-VL, LLaVA-OneVision and
InternVL models, shipped in `presets/` (nothing is downloaded). A folder is read as
transformers reads it: the image side from `processor_config.json`'s `image_processor`, else
`preprocessor_config.json`; the video side from `processor_config.json`'s `video_processor`,
else `video_preprocessor_config.json`, else `preprocessor_config.json`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mmprep.families as families

from .audio_features import AudioConfig
from .config import FAMILIES, ProcessorConfig, resolve
from .errors import ProcessorConfigError
from .processor import Processor

PRESETS = Path(__file__).parent / "presets"

Layer = tuple[dict[str, Any], str]


def load_processor(
    name: str | os.PathLike[str], sides: Mapping[str, Mapping[str, Any]] | None = None, /, **overrides: Any
) -> Processor:
    """`name`: a family (families.FAMILIES: "qwen2_vl", ..., "internvl"; transformers' classes
    as they are built with no config), a preset model id such as "Qwen/Qwen2.5-VL-7B-Instruct",
    or a folder with preprocessor_config.json and/or video_preprocessor_config.json.
    `overrides`: transformers' config keys (size, min_pixels, patch_size, image_mean, ...)
    applied over the config on both sides. `sides`: more such keys for one side alone, by its
    modality's name ({"video": {"max_pixels": ...}}), applied last (errors name them mm_processor_kwargs)."""
    name = os.fspath(name)
    nested: dict[str, Any] = {}  # processor_config.json, where the audio side's config is
    if families.find(name) is not None:
        family, image, video = _family(name)
    elif (preset := preset_models().get(name.lower())) is not None:
        family, image, video = _read_folder(PRESETS / preset)
        nested = _nested(PRESETS / preset)
    elif os.path.isdir(name):
        family, image, video = _read_folder(Path(name))
        nested = _nested(Path(name))
    else:
        raise ProcessorConfigError(
            f"{name!r} is neither a processor family ({', '.join(FAMILIES)}), a preset model id "
            f"(e.g. Qwen/Qwen2.5-VL-7B-Instruct; see mmprep/processors/presets/models.json) nor a folder"
        )
    layers = [(overrides, "keyword overrides")] if overrides else []
    rules, sides = families.get(family), sides or {}

    def side_config(side: families.Side, files: list[Layer]) -> ProcessorConfig:
        own = dict(sides.get(side.modality) or {})
        config = resolve(family, side, files + layers + ([(own, "mm_processor_kwargs")] if own else []))
        # the keys the side takes per call (Side.request_keys) are options, not config keys
        return config.with_options(
            {key: value for key, value in {**overrides, **own}.items() if key in side.request_keys}
        )

    return Processor(
        video=side_config(rules.video, video),
        image=side_config(rules.image, image) if image is not None else None,
        audio=_audio(rules, nested),
    )


def _audio(rules: families.Family, nested: dict[str, Any]) -> AudioConfig | None:
    """The audio side, for a family whose processor has one: processor_config.json's
    feature_extractor and audio_seq_length, transformers' class defaults where it has none."""
    if not rules.takes("audio"):
        return None
    return AudioConfig.from_processor_config(rules.name, nested, rules.audio.defaults)


def _nested(folder: Path) -> dict[str, Any]:
    path = folder / "processor_config.json"
    return _read_json(path) if path.is_file() else {}


def preset_models() -> dict[str, str]:
    """Lower-cased model id -> the preset folder holding its published configs."""
    models = _read_json(PRESETS / "models.json")
    return {model.lower(): folder for model, folder in models.items()}


def _family(family: str) -> tuple[str, list[Layer] | None, list[Layer]]:
    preset = families.get(family).image_preset
    if preset is not None:
        # transformers has no image processor class of this family's own: its models run
        # another's with their published config, so that is the default here.
        path = PRESETS / preset / "preprocessor_config.json"
        return family, [(_read_json(path), str(path))], []
    return family, [], []


def _read_folder(folder: Path) -> tuple[str, list[Layer] | None, list[Layer]]:
    nested_path = folder / "processor_config.json"
    nested = _read_json(nested_path) if nested_path.is_file() else {}
    image = _layer(nested, "image_processor", nested_path) or _file_layer(folder / "preprocessor_config.json")
    video = (
        _layer(nested, "video_processor", nested_path)
        or _file_layer(folder / "video_preprocessor_config.json")
        or _file_layer(folder / "preprocessor_config.json")
    )
    if video is None:
        raise ProcessorConfigError(
            f"{folder} has no processor config: expected preprocessor_config.json, "
            "video_preprocessor_config.json or processor_config.json"
        )
    family = _detect_family(folder, [nested, image[0] if image else {}, video[0]])
    # the processor's own keys that size the images (Family.processor_keys), over the files'
    own = _processor_layer(families.get(family), nested, nested_path)
    return family, [image, *own] if image else None, [video, *own]


def _processor_layer(rules: families.Family, nested: dict[str, Any], path: Path) -> list[Layer]:
    """processor_config.json's top-level keys that the family's processor passes to its
    image processor on every call (PixtralProcessor's patch_size and spatial_merge_size), as
    the config keys they are (Family.processor_keys); [] where it has none."""
    values = {key: nested[name] for name, key in rules.processor_keys.items() if nested.get(name) is not None}
    return [(values, f"{path} [processor]")] if values else []


def _detect_family(folder: Path, configs: list[dict[str, Any]]) -> str:
    model_config = folder / "config.json"
    if model_config.is_file():
        family = families.for_model_type(_read_json(model_config).get("model_type"))
        if family is not None:
            return family.name
    for key in ("processor_class", "video_processor_type"):
        for config in configs:
            if (family := families.for_processor_class(key, config.get(key))) is not None:
                return family.name
    for config in configs:
        if (family := families.for_image_processor_type(config.get("image_processor_type"))) is not None:
            return family.name
    raise ProcessorConfigError(
        f"{folder}: cannot tell the model family (one of {', '.join(FAMILIES)}) from config.json's "
        "model_type, processor_class, video_processor_type or image_processor_type"
    )


def _layer(nested: dict[str, Any], key: str, path: Path) -> Layer | None:
    values = nested.get(key)
    return (values, f"{path} [{key}]") if isinstance(values, dict) else None


def _file_layer(path: Path) -> Layer | None:
    return (_read_json(path), str(path)) if path.is_file() else None


def _read_json(path: Path) -> dict[str, Any]:
    try:
        values = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ProcessorConfigError(f"cannot read {path}: {error}") from None
    if not isinstance(values, dict):
        raise ProcessorConfigError(f"{path} must hold a JSON object, got {type(values).__name__}")
    return values
