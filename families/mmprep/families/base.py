"""`Family`: everything that differs between model families, in one object per family.

A family is what transformers' processor classes, the model's config.json and vLLM's model
file make of one kind of model: which config.json `model_type`s it is, its processor's class
names and defaults, how it sizes a frame, the tokens an image or video stands for in the
prompt, the tensors the model takes and the facts vLLM's model file states about it. The
rest of mmprep asks the registry (registry.py) for the family and then asks the family; it
never compares family names itself. What differs by modality is a `Side` of the family,
one object per modality (`family.image`, `family.video`, `family.audio`; `family.sides[name]` for a caller
holding a modality's name), so nothing here compares modality names either.

What each method computes is plain data in, plain data out (ints, lists, numpy arrays), so
this package imports nothing of mmprep's: the processors (numpy and Pillow only) and the
service both use it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, Protocol

import numpy as np

from .video import VLLM_PLAIN_FRAMES, FramesAsked, SampledVideo, plain_picks

Kind = Literal["image", "video", "audio"]
Encode = Callable[[str], list[int]]  # text -> token ids, no special tokens added
# How a family's processor lays its pixels out: "patches", Qwen-VL's rows of flattened
# temporal patches (processors/mmprep/processors/patches.py); "tiles", whole (3, H, W) frames or tiles, one
# after another (processors/mmprep/processors/tiles.py)
Layout = Literal["patches", "tiles"]


@dataclass(frozen=True)
class View:
    """One resized copy of an image that a tiled processor cuts tiles from: resized to
    `size` (h, w), pasted at `offset` (top, left) into zeros of `canvas` (h, w), cut into
    tiles of `tile` (h, w) row by row ((0, 0): the canvas is one tile). `crop` (top, left,
    height, width): the part of the image resized, where it is not the whole image (Gemma
    3's pan-and-scan crops)."""

    size: tuple[int, int]
    canvas: tuple[int, int]
    offset: tuple[int, int] = (0, 0)
    tile: tuple[int, int] = (0, 0)
    crop: tuple[int, int, int, int] | None = None


class SideConfig(Protocol):
    """What a sizing rule reads of one side of a processor (processors' ProcessorConfig)."""

    @property
    def min_pixels(self) -> int: ...
    @property
    def max_pixels(self) -> int: ...
    @property
    def temporal_patch_size(self) -> int: ...
    @property
    def merge_size(self) -> int: ...
    @property
    def patch_size(self) -> int: ...
    @property
    def cap_pixels_per_frame(self) -> bool: ...
    @property
    def max_video_tokens(self) -> int: ...
    @property
    def factor(self) -> int: ...
    @property
    def fixed_size(self) -> tuple[int, int]: ...
    @property
    def grid_pinpoints(self) -> tuple[tuple[int, int], ...]: ...
    def option(self, name: str) -> Any: ...


class Side:
    """What one model family does with the items of one modality: its side of the processor
    (transformers' image or video class), the tensors it makes and their names, the tokens
    an item stands for in the prompt, and how vLLM and a batch hold them. A family holds one
    instance per modality it takes (`Family.sides`, keyed by the modality's name), so a
    caller that has an item's modality asks `family.sides[item.kind]` and never tells the
    modalities apart itself; a new modality is one more side class, not a branch in each rule.
    A family's sides subclass `ImageSide` / `VideoSide`, which say what every family's side
    of that modality shares."""

    modality: Kind  # the modality's name, Family.sides' key (mmprep.modalities' Modality.name)
    # whether the family's models take items of this modality at all (Gemma 3 takes no
    # video): a request with one is refused, naming the family and the part, and nothing
    # else of the side is read
    taken: bool = True
    # the key of token_names (and of ModelFolder.vision_token_ids) of the token the model
    # embeds an item as (the processor's image or video token, transformers' mm_token_type_ids)
    token_key: str
    # the key of the token the template writes once for an item of this modality, its pad,
    # where that is not token_key's (Gemma 3's template writes <start_of_image>, which its
    # processor expands to <image_soft_token>s); None: token_key's
    pad_key: str | None = None
    # (the pixels' name, the grid's name), as transformers' processor returns them; None
    # where it returns no grid (the pixels' shape is the item's size)
    tensor_names: tuple[str, str | None]
    # tensors the processor makes that the transformers model does not take (transformers'
    # ProcessorMixin.unused_input_names: Gemma 3's num_crops)
    unused_input_names: tuple[str, ...] = ()
    # what vLLM writes for a media part in a template that takes its content as a string
    # (vLLM's "string" content format)
    placeholder: str
    # transformers' class attributes for this side: what a key missing from a config file
    # falls back to
    defaults: Mapping[str, Any] = {}
    # processor config keys that only this side's classes have (a Qwen-VL video's clip cap,
    # LLaVA-OneVision's image_grid_pinpoints): read here, accepted and dropped on a side
    # without them (processors' ProcessorConfig)
    own_keys: frozenset[str] = frozenset()
    # options transformers' processor takes per call for this side's items (a request's
    # mm_processor_kwargs, flat or in the modality's scope; vllm serve --mm-processor-kwargs),
    # never from a config file, which its processor overrides with `defaults` (Gemma 3's
    # pan-and-scan): among the family's extra_keys, read with SideConfig.option
    request_keys: frozenset[str] = frozenset()
    # whether this side's class reads `min_pixels` / `max_pixels` (else they are ignored, as
    # transformers ignores them)
    takes_pixel_aliases: bool = True
    # vLLM's model file: how its _get_mm_fields_config holds this side's pixels ("flat": one
    # run of rows with each item's slice, every other tensor but the grid too; "batched":
    # each item its own array), and the names it gives tensors transformers names otherwise
    vllm_pixels_field: Literal["flat", "batched"] = "flat"
    vllm_names: Mapping[str, str] = {}
    # a batched side whose items vLLM's processor cuts back to their own size after the HF
    # processor padded the batch (Mistral 3's _postprocess_hf_mm_data), and tensors the
    # processor makes that vLLM's field config does not hold (Mistral 3's image_sizes)
    vllm_unpadded: bool = False
    vllm_left_out: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"<{self.modality} side {type(self).__name__}>"

    @property
    def pad(self) -> str:
        """The token_names key of the token the template writes once for an item."""
        return self.pad_key or self.token_key

    def processor_defaults(self) -> dict[str, Any]:
        """`defaults`, a copy the caller may change."""
        return dict(self.defaults)

    # -- the processor, for a tiled family ------------------------------------------------

    def tile_tokens(self, config: SideConfig, num_frames: int, height: int, width: int) -> int:
        """For a tiled family: an item's placeholder tokens, from its size as given (the
        patches layout counts its grid instead)."""
        raise NotImplementedError

    def tile_tensors(
        self, config: SideConfig, tiles: np.ndarray, height: int, width: int
    ) -> dict[str, np.ndarray]:
        """For a tiled family: an item's processed tensors, as transformers' processor returns
        them, from its normalized tiles (N, 3, H, W), this side's config and the item's size
        (an image's as given, a video's frames' as resized)."""
        raise NotImplementedError

    # -- the prompt ----------------------------------------------------------------------

    def item_grid(self, tensors: Mapping[str, np.ndarray]) -> list[int]:
        """What item_tokens reads as `grid` of an item's processed tensors: its grid's row, a
        (t, h, w) grid or a count of tiles."""
        grid_key = self.tensor_names[1]
        if grid_key is None:
            raise NotImplementedError(f"{self!r} has no grid: its item_grid reads its own")
        return [int(size) for size in np.ravel(tensors[grid_key][0])]

    def item_tokens(
        self,
        grid: Sequence[int],
        config: SideConfig,
        token_ids: Mapping[str, int],
        video: SampledVideo | None,
        encode: Encode,
    ) -> list[int]:
        """The tokens that replace an item's one pad in the prompt, as transformers' processor
        writes them: `grid` is its (t, h, w) grid, `config` this side of the processor,
        `token_ids` the ids of the family's `token_names` in this model folder, `video` the
        sampled video's facts (None for an item not over time). A ValueError where the item
        and its grid disagree."""
        raise NotImplementedError

    # -- the engines' inputs -------------------------------------------------------------

    def vllm_grid(self, grid: np.ndarray) -> np.ndarray:
        """An item's grid row (its grid tensor's, tensor_names[1]) as vLLM's model file holds
        it, where its value differs from transformers' (Gemma 3's num_patches: the crops and
        the whole image, where transformers counts num_crops)."""
        return grid

    def vllm_batched_fields(self, tensors: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Keys vLLM's model file adds to an item of this modality beyond transformers'
        tensors, each batched on the CPU, from the item's processed tensors (Llama 4's
        patches_per_image: the count its pixels are sized by)."""
        return {}

    def vllm_tensors(self, tensors: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """An item's processed tensors as vLLM's processor keeps them, before vllm_names
        (Gemma 4's audio: cut back to its unmasked frames)."""
        return dict(tensors)

    def refusal(self, config: Mapping[str, Any], model: str) -> str | None:
        """vLLM's message where this model (config.json's values, its served name) takes no
        items of this side's modality though its family's models may (a Gemma 4 without an
        audio tower); None where it takes them."""
        return None

    def vllm_shared_fields(self, token_ids: Mapping[str, int]) -> dict[str, int]:
        """Keys vLLM's items of this modality share (a shared field kept on the CPU: every
        item holds the same 0-d int64), from the model's token ids."""
        return {}

    def batch_pixels(self, pixels: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Each item's processed pixels as transformers' processor leaves them when it runs
        over all of this modality's items of a prompt at once (as vLLM's renderer runs it),
        in prompt order: a batch may pad them to one shape."""
        return list(pixels)


class ImageSide(Side):
    """An image side: transformers' image processor class."""

    modality = "image"
    token_key = "image_token_id"


class VideoSide(Side):
    """A video side: transformers' video processor class, whose Qwen-VL ancestors add a cap
    on the clip's pixels (cap_pixels_per_frame, max_video_tokens)."""

    modality = "video"
    token_key = "video_token_id"
    own_keys = frozenset({"cap_pixels_per_frame", "max_video_tokens"})


class NoVideoSide(VideoSide):
    """The video side of a family whose processor has none (Gemma 3, Mistral 3, Llama 4): a
    video part is refused. Its config (read from the image's file, as for every family
    without a video file) is never used; a subclass gives the family's `defaults`."""

    taken = False
    tensor_names = ("pixel_values_videos", None)
    placeholder = ""
    own_keys = frozenset()
    takes_pixel_aliases = False


class AudioSide(Side):
    """An audio side: transformers' feature extractor (processors' audio_features), whose
    tensors are a waveform's log-mel frames and their mask."""

    modality = "audio"
    token_key = "audio_token_id"
    takes_pixel_aliases = False

    def audio_tokens(self, num_samples: int, seq_length: int) -> int:
        """The soft tokens a waveform of `num_samples` (at the extractor's rate) stands for."""
        raise NotImplementedError

    def soft_tokens(self, frames: int, seq_length: int) -> int:
        """The soft tokens an item of `frames` unmasked feature frames stands for, at most
        `seq_length` (the processor's cap)."""
        raise NotImplementedError

    def placeholder_tokens(self, frames: int, seq_length: int, token_ids: Mapping[str, int]) -> list[int]:
        """The tokens that replace the item's one pad in the prompt, as transformers'
        processor writes them."""
        raise NotImplementedError


class NoAudioSide(AudioSide):
    """The audio side of a family whose processor has none (every family but Gemma 4): an
    audio part is refused, naming the family and the part."""

    taken = False
    tensor_names = ("input_features", None)
    placeholder = ""


class Family:
    """One model family. A subclass sets the class attributes, its sides (`image`, `video`:
    instances of its own ImageSide / VideoSide subclasses) and overrides what differs; the
    registry holds one instance of each."""

    name: str  # the registry's key, and ProcessorConfig.family
    # config.json `model_type`s of this family (the registry's other key)
    model_types: tuple[str, ...] = ()
    # transformers' class names in a processor config that say "this family", for a folder
    # without config.json: processor_class, video_processor_type, and image_processor_type
    # (matched as a prefix: the Fast variants)
    processor_classes: tuple[str, ...] = ()
    video_processor_classes: tuple[str, ...] = ()
    image_processor_classes: tuple[str, ...] = ()
    # the presets folder (mmprep/processors/presets/) whose preprocessor_config.json is the image side of
    # a processor built from the family name alone, where transformers has no image class of
    # the family's own
    image_preset: str | None = None
    # processor_config.json's top-level keys that the processor passes to its image processor
    # on every call, over the image processor's own config, by the config key each one is
    # (Mistral 3's PixtralProcessor: spatial_merge_size is merge_size)
    processor_keys: Mapping[str, str] = {}
    # config.json key -> the token the processor falls back to when config.json lacks the id
    token_names: Mapping[str, str] = {}
    # a token_names key -> the key config.json writes it under, where they differ
    # (transformers' attribute_map: LLaVA's image_token_id is image_token_index)
    config_aliases: Mapping[str, str] = {}
    # what the family does with each modality's items (Side); `sides` keys them by name
    image: Side
    video: Side
    audio: AudioSide = NoAudioSide()
    layout: Layout = "patches"
    # the type transformers' processor rescales and normalizes in: "bfloat16" for Llama 4's
    # (Llama4ImageProcessor rounds each step to bfloat16, "as in the original
    # implementation", and returns bfloat16 pixels), float32 for the rest
    normalizes_in: Literal["float32", "bfloat16"] = "float32"
    # processor config keys beyond the Qwen-VL ones that this family's classes read (their
    # defaults in its sides' defaults; SideConfig.option reads them, image_grid_pinpoints is
    # grid_pinpoints), and the steps transformers' Qwen-VL classes never take (do_pad, ...)
    # that this family's take without changing one item (its do_pad pads a batch's images
    # to one tile count)
    extra_keys: frozenset[str] = frozenset()
    item_switches: frozenset[str] = frozenset()
    # transformers' text-config default of max_position_embeddings, for a config.json without it
    max_position_embeddings: int | None = None
    # vLLM's model file: supports_mm_device_do_normalize (its renderer sends uint8 patches and
    # the model normalizes them), and video_needs_metadata (a video's metadata is parsed, and
    # so hashed, with its frames)
    device_normalizes: bool = False
    video_metadata_in_hash: bool = False
    # vLLM's renderer runs a video's frames through the image processor (at the video's
    # budget) where transformers runs its video processor: their rescale and normalize then
    # are the image side's (Processor.as_vllm_renders)
    vllm_frames_as_images: bool = False
    # the video loader vLLM 0.33 picks for the model by its video processor's class: "opencv"
    # (the plain one: num_frames or fps as asked, by index), or one with the model's own rule
    # ("qwen2_vl", "qwen3_vl"); vllm_frame_picks is its rule
    vllm_video_loader: str = "opencv"
    # whether the transformers engine (app/mmprep/engines/transformers_engine.py) can feed its model
    # the tensors as the engine batches them
    transformers_engine: bool = True

    def __init__(self) -> None:
        # each side under its modality's name: what a caller holding an item's modality asks
        self.sides: Mapping[Kind, Side] = MappingProxyType(
            {side.modality: side for side in (self.image, self.video, self.audio)}
        )

    def __repr__(self) -> str:
        return f"<family {self.name}>"

    # -- the processor -------------------------------------------------------------------

    def image_size(self, config: SideConfig, height: int, width: int) -> tuple[int, int]:
        """(height, width) an image of this size is resized to."""
        raise NotImplementedError

    def video_size(self, config: SideConfig, num_frames: int, height: int, width: int) -> tuple[int, int]:
        """(height, width) the frames of a clip of `num_frames` frames of this size are resized to."""
        raise NotImplementedError

    def image_views(self, config: SideConfig, height: int, width: int) -> list[View]:
        """For a tiled family: the views an image of this size is cut into, in order."""
        raise NotImplementedError

    def takes(self, modality: Kind) -> bool:
        """Whether the family's models take items of this modality (Side.taken)."""
        return self.sides[modality].taken

    def token_merges(self, encode: Encode) -> list[tuple[list[int], list[int]]]:
        """Runs of tokens that an item's tokens and the text beside them make, each with the
        token(s) the tokenizer writes for their text instead, in the order vLLM's prompt
        update replaces them (after putting every item's tokens in place). An item's tokens
        tokenized alone can end in text that the tokenizer joins with the text next to it in
        the whole prompt, as transformers' processor tokenizes it (Gemma 3's "\n\n" around an
        image and the line break before it: one token). `encode`: this model's tokenizer.
        [] for most families."""
        return []

    def vllm_frame_picks(self, total: int, duration: float, asked: FramesAsked) -> list[int]:
        """The frames vLLM 0.33's video loader for this family takes of a video of `total`
        frames lasting `duration` seconds, for what the request `asked`, as positions in the
        decoder's output: here its plain VideoBackend's (num_frames and fps as asked, both
        index-based; its 32 frames where nothing is asked)."""
        if asked.fps is None and asked.num_frames is None:
            return plain_picks(total, duration, VLLM_PLAIN_FRAMES, 0)
        return plain_picks(total, duration, asked.num_frames or 0, asked.fps or 0)

    # -- the engines' inputs -------------------------------------------------------------

    def vllm_video_fields(
        self, video: SampledVideo, temporal_patch_size: int, num_tokens: int
    ) -> dict[str, np.ndarray | list[float] | list[int]]:
        """The keys a video's vLLM MultiModalKwargsItem holds beyond its processed tensors,
        each a batched field kept on the CPU (the model's _get_mm_fields_config); `num_tokens`
        is the video's placeholder tokens."""
        return {}

    def vllm_image_runs(
        self, side: Side, tensors: Mapping[str, np.ndarray]
    ) -> list[dict[str, np.ndarray]] | None:
        """An item of `side` as vLLM 0.33's /inference/v1/generate takes it where it cannot
        take the one item vLLM's render makes: that endpoint has no is_embed mask, so every
        token of an item's range is an embedding, and an item whose embeddings other tokens
        split (Qwen3-VL's time stamps between a video's temporal blocks) cannot go whole. Its
        model reads each run of embeddings as an image of the family would be read: here each
        run's tensors, in prompt order, named as the image side names them (their range is
        the run alone; the tokens between are plain prompt tokens). None: the item goes whole."""
        return None

    def transformers_video_inputs(
        self, videos: Sequence[SampledVideo], temporal_patch_size: int
    ) -> dict[str, np.ndarray]:
        """What transformers' model takes for a batch's videos beyond pixels and grids."""
        return {}
