"""`ProcessorConfig`: one side (one modality: image, video) of a family's processor, resolved
from transformers' own configuration keys; what differs between the sides is the family's
side's (mmprep.families: Side.defaults, own_keys, takes_pixel_aliases).

Layers, each overriding the one before: the transformers class's defaults, the config file's
keys, the caller's keyword overrides. Within one layer `min_pixels` / `max_pixels` win over
`size`, as transformers' `__init__` makes them; so an override's `size` replaces the file's
pixel bounds whichever key the file used (transformers' from_pretrained would let a file's
`min_pixels` / `max_pixels` win over a `size` keyword and drop the keyword without a word).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

import mmprep.families as families

from .errors import ProcessorConfigError

FAMILIES = families.FAMILIES

# Keys transformers' configs carry that change nothing here: class names, and frame
# sampling, which is the decoder's job (the processors take frames already sampled).
IGNORED_KEYS = frozenset(
    {
        "processor_class",
        "image_processor_type",
        "video_processor_type",
        "auto_map",
        "_processor_class",
        "do_sample_frames",
        "fps",
        "num_frames",
        "min_frames",
        "max_frames",
        "max_duration",
        "return_metadata",
        "video_metadata",
        "do_convert_rgb",
        "default_to_square",
        "data_format",
        "input_data_format",
        "device",
        "return_tensors",
        "disable_grouping",
        "max_image_size",
    }
)
_SIDE_KEYS = frozenset(
    {
        "size",
        "patch_size",
        "temporal_patch_size",
        "merge_size",
        "image_mean",
        "image_std",
        "rescale_factor",
        "do_resize",
        "do_rescale",
        "do_normalize",
        "resample",
    }
)
# Keys only some sides' classes have (a Qwen-VL video's clip cap; families.Side.own_keys
# says which side has them): accepted on every side, read only where the side has them.
_ONE_SIDE_KEYS = frozenset({"cap_pixels_per_frame", "max_video_tokens"})
# Steps transformers' Qwen-VL classes have but never take (their class default is off):
# accepted off (false or null), refused on, since that would change the output.
OFF_SWITCHES = frozenset({"do_center_crop", "do_pad"})
# What those steps would use: nothing while they are off, which is the only way they load.
OFF_SETTINGS = frozenset({"crop_size", "pad_size", "size_divisor"})
PIXEL_ALIASES = {"min_pixels": "shortest_edge", "max_pixels": "longest_edge"}
KNOWN_KEYS = _SIDE_KEYS | _ONE_SIDE_KEYS | PIXEL_ALIASES.keys() | IGNORED_KEYS | OFF_SWITCHES | OFF_SETTINGS


@dataclass(frozen=True)
class ProcessorConfig:
    """What one side of a processor does. `min_pixels` / `max_pixels` are transformers'
    `size["shortest_edge"]` / `size["longest_edge"]`: per frame for images and Qwen2-style
    video, for the whole clip for Qwen3-VL video."""

    family: str
    kind: families.Kind  # the side's modality (families.Side.modality)
    min_pixels: int
    max_pixels: int
    patch_size: int
    temporal_patch_size: int
    merge_size: int
    image_mean: tuple[float, float, float]
    image_std: tuple[float, float, float]
    rescale_factor: float
    do_resize: bool
    do_rescale: bool
    do_normalize: bool
    cap_pixels_per_frame: bool = False
    max_video_tokens: int = 0
    resample: int = 3  # PIL's number: 3 bicubic, 2 bilinear (Gemma 3's), as transformers resizes
    # a `size` of {"height", "width"} (a tiled family's tile): frames resized to it, and
    # min_pixels = max_pixels = its area; (0, 0) for pixel bounds
    fixed_size: tuple[int, int] = (0, 0)
    grid_pinpoints: tuple[tuple[int, int], ...] = ()  # image_grid_pinpoints, (h, w) each
    # the family's other extra keys (Family.extra_keys: InternVL's min_patches, ...), as
    # (key, value) pairs, its class defaults filled in
    options: tuple[tuple[str, Any], ...] = ()

    @property
    def factor(self) -> int:
        """Both sides of a resized frame are multiples of this."""
        return self.patch_size * self.merge_size

    def option(self, name: str) -> Any:
        """One of the family's extra settings (a KeyError for a name it has not)."""
        return dict(self.options)[name]

    def with_options(self, values: Mapping[str, Any]) -> ProcessorConfig:
        """This config with options transformers' processor takes per call set (its side's
        request_keys: a request's mm_processor_kwargs, Gemma 3's pan-and-scan), each a value
        of its default's type; a ProcessorConfigError names any other key, or a value of
        another type."""
        if not values:
            return self
        side = self.side()
        options = dict(self.options)
        for key, value in values.items():
            if key not in side.request_keys:
                raise ProcessorConfigError(
                    f"{key} is not an option {self.family}'s {self.kind} processor takes per call"
                    + (f" (it takes {', '.join(sorted(side.request_keys))})" if side.request_keys else "")
                )
            options[key] = _like(value, side.defaults[key], key)
        return replace(self, options=tuple(sorted(options.items())))

    def transformers_kwargs(self) -> dict[str, Any]:
        """The keyword arguments that build the same processor in transformers."""
        kwargs = asdict(self)
        del kwargs["family"], kwargs["kind"]
        kwargs["size"] = {"shortest_edge": kwargs.pop("min_pixels"), "longest_edge": kwargs.pop("max_pixels")}
        fixed, pinpoints = kwargs.pop("fixed_size"), kwargs.pop("grid_pinpoints")
        del kwargs["options"]  # read by mmprep's rules; transformers' classes split them otherwise
        if self.fixed_size != (0, 0):
            kwargs["size"] = {"height": fixed[0], "width": fixed[1]}
        elif self.max_pixels == 0:  # sized by the family's own options
            kwargs["size"] = None
        if pinpoints:
            kwargs["image_grid_pinpoints"] = [list(pair) for pair in pinpoints]
        kwargs["image_mean"], kwargs["image_std"] = list(self.image_mean), list(self.image_std)
        for key in _ONE_SIDE_KEYS - self.side().own_keys:  # not a keyword of this side's class
            del kwargs[key]
        return kwargs

    def side(self) -> families.Side:
        """The family's rules for this side's modality."""
        return families.get(self.family).sides[self.kind]


def check_keys(values: dict[str, Any], source: str, family: str) -> None:
    """Refuse keys this package does not know, rather than guess what they would change, and
    steps it does not take switched on. A null is the class default, as transformers reads
    it (a fast processor's saved config writes every attribute, unset ones as null)."""
    rules = families.get(family)
    known = KNOWN_KEYS | rules.extra_keys
    unknown = sorted(key for key, value in values.items() if key not in known and value is not None)
    if unknown:
        raise ProcessorConfigError(
            f"{source}: unknown processor setting(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(known - IGNORED_KEYS - OFF_SETTINGS))}"
        )
    switches = OFF_SWITCHES - rules.item_switches
    on = [f"{key}={json.dumps(values[key], default=repr)}" for key in sorted(switches) if values.get(key)]
    if on:
        raise ProcessorConfigError(
            f"{source}: {', '.join(on)}: the Qwen-VL processors never take this step (transformers' "
            "default is off); set it to false or leave it out"
        )


def resolve(family: str, side: families.Side, layers: list[tuple[dict[str, Any], str]]) -> ProcessorConfig:
    """`side` of the `family`'s processor: its class defaults (what transformers' class
    builds with no configuration at all) with each (values, where they came from) layer
    applied in order."""
    values = side.processor_defaults()
    for layer, source in layers:
        check_keys(layer, source, family)
        _apply(values, layer, family, side)
    return _build(family, side, values)


def _apply(values: dict[str, Any], layer: dict[str, Any], family: str, side: families.Side) -> None:
    """One layer over `values`: `size` replaces the bounds, then `min_pixels` / `max_pixels`
    refine them (as transformers' __init__ orders them), then the other keys replace theirs."""
    # A null means the class default (values already holds it), as transformers' __init__ reads it.
    # a side's request keys are never a file's (transformers' processor passes its own
    # defaults over them): ProcessorConfig.with_options sets them
    skipped = IGNORED_KEYS | OFF_SWITCHES | OFF_SETTINGS | side.request_keys
    known = (KNOWN_KEYS | families.get(family).extra_keys) - skipped
    layer = {key: value for key, value in layer.items() if key in known and value is not None}
    size = layer.pop("size", None)
    aliases = {key: layer.pop(key) for key in PIXEL_ALIASES if key in layer}
    for key in _ONE_SIDE_KEYS - side.own_keys:
        layer.pop(key, None)
    if size is not None:
        if not isinstance(size, dict):
            raise ProcessorConfigError(
                f"size must be a dict with shortest_edge and longest_edge, got {size!r}"
            )
        values["size"] = dict(size)
    # A class without min_pixels / max_pixels (Qwen3VLVideoProcessor): transformers ignores them.
    if side.takes_pixel_aliases:
        for alias, value in aliases.items():
            if value is not None:
                values["size"] = {**values["size"], PIXEL_ALIASES[alias]: value}
    values.update(layer)


def _build(family: str, side: families.Side, values: dict[str, Any]) -> ProcessorConfig:
    size = values["size"]
    resample = values.get("resample", 3)
    if isinstance(resample, bool) or resample not in (2, 3):
        raise ProcessorConfigError(f"resample={resample!r}: only bilinear (2) and bicubic (3) are supported")
    if size is None:  # a class that sizes by its own options (Gemma 4's max_soft_tokens): no bounds
        fixed, bounds = (0, 0), (0, 0)
    elif families.get(family).layout == "tiles" and "longest_edge" in side.defaults.get("size", {}):
        # a tiled family that fits the image in a square (Pixtral's): max_pixels is its side,
        # the only key it reads (transformers' takes longest_edge first, vLLM's no other)
        fixed, bounds = (0, 0), (0, _positive_int(size.get("longest_edge"), "size.longest_edge"))
    elif families.get(family).layout == "tiles":
        fixed = _fixed_size(size)
        bounds = (fixed[0] * fixed[1],) * 2
    else:
        fixed = (0, 0)
        bounds = (
            _positive_int(size.get("shortest_edge"), "size.shortest_edge"),
            _positive_int(size.get("longest_edge"), "size.longest_edge"),
        )
    return ProcessorConfig(
        family=family,
        kind=side.modality,
        min_pixels=bounds[0],
        max_pixels=bounds[1],
        patch_size=_patch_size(values["patch_size"]),
        temporal_patch_size=_positive_int(values["temporal_patch_size"], "temporal_patch_size"),
        merge_size=_positive_int(values["merge_size"], "merge_size"),
        image_mean=_triple(values["image_mean"], "image_mean"),
        image_std=_triple(values["image_std"], "image_std", nonzero=True),
        rescale_factor=_number(values["rescale_factor"], "rescale_factor", nonzero=True),
        do_resize=_flag(values["do_resize"], "do_resize"),
        do_rescale=_flag(values["do_rescale"], "do_rescale"),
        do_normalize=_flag(values["do_normalize"], "do_normalize"),
        cap_pixels_per_frame=_flag(values.get("cap_pixels_per_frame") or False, "cap_pixels_per_frame"),
        max_video_tokens=_positive_int(values["max_video_tokens"], "max_video_tokens")
        if "max_video_tokens" in side.own_keys
        else 0,
        resample=resample,
        fixed_size=fixed,
        grid_pinpoints=_pinpoints(values.get("image_grid_pinpoints") or [])
        if "image_grid_pinpoints" in side.own_keys
        else (),
        options=_options(family, values),
    )


# extra keys that have a field of their own, checked as it is built
TYPED_EXTRA_KEYS = frozenset({"image_grid_pinpoints"})


def _options(family: str, values: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The family's other extra keys, each a JSON scalar (the config stays hashable: the
    media cache keys by it)."""
    keys = sorted(families.get(family).extra_keys - TYPED_EXTRA_KEYS)
    for key in keys:
        if key in values and (values[key] is None or not isinstance(values[key], (bool, int, float, str))):
            raise ProcessorConfigError(f"{key} must be a number, a string or a boolean, got {values[key]!r}")
    return tuple((key, values[key]) for key in keys if key in values)


def _fixed_size(size: dict[str, Any]) -> tuple[int, int]:
    """transformers' {"height", "width"} size as (h, w): the tile a tiled family resizes to
    (the patches layout's Qwen-VL classes take pixel bounds only)."""
    if "height" not in size and "width" not in size:
        raise ProcessorConfigError(f"size must give a tile's height and width, got {size!r}")
    return _positive_int(size.get("height"), "size.height"), _positive_int(size.get("width"), "size.width")


def _patch_size(value: Any) -> int:
    """patch_size as a number, or as a square {"height", "width"} (Pixtral's saved configs)."""
    if isinstance(value, dict) and set(value) == {"height", "width"} and value["height"] == value["width"]:
        value = value["height"]
    return _positive_int(value, "patch_size")


def _pinpoints(value: Any) -> tuple[tuple[int, int], ...]:
    if not isinstance(value, list) or not all(
        isinstance(pair, (list, tuple)) and len(pair) == 2 for pair in value
    ):
        raise ProcessorConfigError(f"image_grid_pinpoints must be a list of [height, width], got {value!r}")
    return tuple(
        (_positive_int(h, "image_grid_pinpoints"), _positive_int(w, "image_grid_pinpoints")) for h, w in value
    )


def _like(value: Any, default: Any, name: str) -> Any:
    """`value` if it is of `default`'s kind (a boolean, an integer, a number), else a
    ProcessorConfigError naming `name`."""
    if isinstance(default, bool):
        ok, kind = isinstance(value, bool), "true or false"
    elif isinstance(default, int):
        ok, kind = isinstance(value, int) and not isinstance(value, bool), "an integer"
    elif isinstance(default, float):
        ok, kind = isinstance(value, (int, float)) and not isinstance(value, bool), "a number"
    else:
        ok, kind = isinstance(value, type(default)), type(default).__name__
    if not ok:
        raise ProcessorConfigError(f"{name} must be {kind}, got {value!r}")
    return float(value) if isinstance(default, float) else value


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ProcessorConfigError(f"{name} must be a positive integer, got {value!r}")
    return value


def _number(value: Any, name: str, nonzero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (nonzero and value == 0):
        raise ProcessorConfigError(f"{name} must be a{' non-zero' if nonzero else ''} number, got {value!r}")
    return float(value)


def _triple(value: Any, name: str, nonzero: bool = False) -> tuple[float, float, float]:
    values = [value] * 3 if isinstance(value, (int, float)) and not isinstance(value, bool) else value
    if not isinstance(values, (list, tuple)) or len(values) != 3:
        raise ProcessorConfigError(
            f"{name} must be a number or a list of 3 (one per RGB channel), got {value!r}"
        )
    first, second, third = (_number(item, name, nonzero) for item in values)
    return first, second, third


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise ProcessorConfigError(f"{name} must be true or false, got {value!r}")
    return value
