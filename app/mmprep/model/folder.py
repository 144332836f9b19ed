"""`ModelFolder`: what the renderer and the tokens-out path read from a model folder, loaded
once per process (`load_model_folder` caches it by path and processor).

    tokenizer.json                  the tokenizer (tokenizers.Tokenizer.from_file); its added
                                    tokens are the special tokens, each with its `special` flag;
                                    prompts are encoded by fastokens where it gives the same
                                    ids (encoder.py)
    chat template                   as transformers and vLLM find it, first found wins:
                                    processor_config.json's "chat_template", chat_template.json,
                                    chat_template.jinja, tokenizer_config.json's "chat_template";
                                    for requests with tools, vLLM takes the tokenizer's
                                    (chat_template.jinja, then tokenizer_config.json's) where
                                    there is one: `tools_chat_template`
    config.json                     model_type (its family: mmprep.families), and the ids of the
                                    family's vision tokens (image/video/vision_start/vision_end
                                    for Qwen-VL), else the family's token names' ids
    tokenizer_config.json           bos/eos/pad/unk tokens, which transformers passes to the
                                    template (optional)
    generation_config.json          the EOS ids (optional; else config.json's eos_token_id)
    preprocessor configs            the vision processor (mmprep.processors.load_processor), unless an
                                    override is given (`--processor`)

A folder that lacks a file a model needs is refused with a ModelFolderError naming the file.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from mmprep import families
from mmprep.processors import Processor, ProcessorConfigError, load_processor

from .encoder import Encoder, prompt_encoder

# tokenizer_config.json keys transformers hands the template (its special_tokens_map)
_TEMPLATE_TOKENS = (
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
)


class ModelFolderError(ValueError):
    """The folder cannot serve a model: a file missing or unreadable; `str(error)` names it."""


@dataclass(frozen=True)
class SpecialToken:
    """An added token of tokenizer.json: `special` ones are dropped by skip_special_tokens."""

    id: int
    content: str
    special: bool


@dataclass(frozen=True)
class ModelFolder:
    path: Path
    tokenizer: Tokenizer
    chat_template: str
    chat_template_source: str  # the file it came from, for messages
    tools_chat_template: str  # for requests with tools (vLLM's resolve_hf_chat_template)
    tools_chat_template_source: str
    config: dict[str, Any]
    model_type: str
    family: str  # the model family (mmprep.families), which is also its processor's
    vision_token_ids: dict[str, int]  # the family's token_names' keys -> their ids in this model
    eos_token_ids: tuple[int, ...]
    added_tokens: dict[int, SpecialToken]  # id -> token, every added token of tokenizer.json
    template_tokens: dict[str, str]  # bos_token, eos_token, ... as the template sees them
    processor: Processor
    # text -> token ids (a uint32 array), no special tokens added, as tokenizer.encode(...).ids
    # gives them: fastokens' where it agrees with the tokenizers library (encoder.py)
    encode_ids: Encoder
    fast_encode: bool  # whether fastokens encodes (else the tokenizers library)

    def encode(self, text: str) -> list[int]:
        """encode_ids as a list: for the short texts the families tokenize."""
        return self.encode_ids(text).tolist()

    @property
    def name(self) -> str:
        """The folder's name: the served model name unless one is given."""
        return self.path.name

    def pad_token_id(self, modality: families.Kind) -> int:
        """The pad the template writes for one item of a modality (by its name)."""
        return self.vision_token_ids[families.get(self.family).sides[modality].pad]

    @property
    def image_token_id(self) -> int:
        """The pad the template writes for an image (every family has one)."""
        return self.vision_token_ids["image_token_id"]

    @property
    def video_token_id(self) -> int:
        return self.vision_token_ids["video_token_id"]

    @property
    def vision_start_token_id(self) -> int:
        return self.vision_token_ids["vision_start_token_id"]

    @property
    def vision_end_token_id(self) -> int:
        return self.vision_token_ids["vision_end_token_id"]

    @property
    def special_token_ids(self) -> frozenset[int]:
        return frozenset(token.id for token in self.added_tokens.values() if token.special)

    @classmethod
    def load(cls, path: str | os.PathLike, processor: str | None = None) -> ModelFolder:
        """Read the folder at `path`; `processor` (a family, preset id or folder) overrides
        the folder's own processor configs."""
        folder = Path(path)
        if not folder.is_dir():
            raise ModelFolderError(f"--model {str(path)!r} is not a folder")
        config = _read_json(folder / "config.json", required=True)
        model_type = config.get("model_type")
        family = families.for_model_type(model_type)
        if family is None or not isinstance(model_type, str):
            raise ModelFolderError(
                f"{folder / 'config.json'}: model_type {model_type!r} is not one mmprep renders prompts for "
                f"({', '.join(sorted(families.MODEL_TYPES))})"
            )
        tokenizer, encode, fast = _tokenizer(folder / "tokenizer.json")
        tokenizer_config = _read_json(folder / "tokenizer_config.json")
        template, source = _chat_template(folder, tokenizer_config)
        tools_template, tools_source = _tokenizer_template(folder, tokenizer_config) or (template, source)
        added = {
            id_: SpecialToken(id_, token.content, token.special)
            for id_, token in tokenizer.get_added_tokens_decoder().items()
        }
        ids = {
            key: _token_id(config, family.config_aliases.get(key, key), name, tokenizer, folder)
            for key, name in family.token_names.items()
        }
        return cls(
            path=folder.resolve(),
            tokenizer=tokenizer,
            chat_template=template,
            chat_template_source=source,
            tools_chat_template=tools_template,
            tools_chat_template_source=tools_source,
            config=config,
            model_type=model_type,
            family=family.name,
            eos_token_ids=_eos_ids(folder, config),
            added_tokens=added,
            template_tokens=_template_tokens(tokenizer_config),
            processor=_processor(folder, processor, family.name),
            encode_ids=encode,
            fast_encode=fast,
            vision_token_ids=ids,
        )


@lru_cache(maxsize=8)
def load_model_folder(path: str, processor: str | None = None) -> ModelFolder:
    """ModelFolder.load, once per process for each (path, processor): the settings' check
    at start and the service share one tokenizer."""
    return ModelFolder.load(path, processor)


_TOKENIZERS: dict[bytes, tuple[Tokenizer, Encoder, bool]] = {}


def _tokenizer(path: Path) -> tuple[Tokenizer, Encoder, bool]:
    """The tokenizer of a tokenizer.json, its prompt encoder, and whether that is fastokens';
    made once per distinct file content (folders that share a tokenizer, as tests' do, share
    the work)."""
    if not path.is_file():
        raise ModelFolderError(f"{path.parent} has no tokenizer.json (the tokenizer mmprep reads)")
    try:
        data = path.read_bytes()
        digest = hashlib.sha256(data).digest()
        if digest not in _TOKENIZERS:
            text = data.decode("utf-8")
            tokenizer = Tokenizer.from_str(text)
            if len(_TOKENIZERS) >= 4:
                _TOKENIZERS.pop(next(iter(_TOKENIZERS)))
            _TOKENIZERS[digest] = (tokenizer, *prompt_encoder(path, text, tokenizer))
        return _TOKENIZERS[digest]
    except Exception as error:  # OSError, UnicodeDecodeError, and the tokenizers library's own type
        raise ModelFolderError(f"cannot read {path}: {error}") from None


def _chat_template(folder: Path, tokenizer_config: dict[str, Any]) -> tuple[str, str]:
    """The template transformers' processor would use, else the tokenizer's (as vLLM's
    resolve_hf_chat_template falls back)."""
    processor_config = _read_json(folder / "processor_config.json")
    if isinstance(processor_config.get("chat_template"), str):
        return processor_config["chat_template"], "processor_config.json"
    legacy = folder / "chat_template.json"
    if legacy.is_file():
        template = _read_json(legacy).get("chat_template")
        if not isinstance(template, str):
            raise ModelFolderError(f'{legacy} has no "chat_template" string')
        return template, "chat_template.json"
    template = _tokenizer_template(folder, tokenizer_config)
    if template is not None:
        return template
    raise ModelFolderError(
        f"{folder} has no chat template: expected chat_template.json, chat_template.jinja or a "
        '"chat_template" in tokenizer_config.json'
    )


def _tokenizer_template(folder: Path, tokenizer_config: dict[str, Any]) -> tuple[str, str] | None:
    """The tokenizer's own template and the file it is in, as transformers' tokenizer loads it:
    chat_template.jinja over tokenizer_config.json's "chat_template" (a string, or named
    ones: the "default")."""
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        try:
            return jinja.read_text(encoding="utf-8"), jinja.name
        except (OSError, UnicodeDecodeError) as error:
            raise ModelFolderError(f"cannot read {jinja}: {error}") from None
    template = tokenizer_config.get("chat_template")
    if isinstance(template, list):  # named templates: [{"name": ..., "template": ...}]
        named = {entry.get("name"): entry.get("template") for entry in template if isinstance(entry, dict)}
        template = named.get("default")
    return (template, "tokenizer_config.json") if isinstance(template, str) else None


def _token_id(config: dict[str, Any], key: str, name: str, tokenizer: Tokenizer, folder: Path) -> int:
    """config.json's id for `key` (or its text config's), else the id of the token the
    family's processor falls back to, `name`."""
    value = config.get(key)
    if value is None and isinstance(config.get("text_config"), dict):
        value = config["text_config"].get(key)
    if isinstance(value, int):
        return value
    value = tokenizer.token_to_id(name)
    if value is None:
        raise ModelFolderError(
            f"{folder / 'config.json'} has no {key}, and tokenizer.json has no {name} token"
        )
    return value


def _eos_ids(folder: Path, config: dict[str, Any]) -> tuple[int, ...]:
    """generation_config.json's eos_token_id (what generation stops on), else config.json's."""
    generation = _read_json(folder / "generation_config.json")
    for source in (generation, config, config.get("text_config") or {}):
        value = source.get("eos_token_id")
        if isinstance(value, int):
            return (value,)
        if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
            return tuple(value)
    return ()


def _template_tokens(tokenizer_config: dict[str, Any]) -> dict[str, str]:
    """transformers passes its tokenizer's special_tokens_map to every template render."""
    tokens = {}
    for key in _TEMPLATE_TOKENS:
        value = tokenizer_config.get(key)
        if isinstance(value, dict):  # the older AddedToken form
            value = value.get("content")
        if isinstance(value, str):
            tokens[key] = value
    return tokens


def _processor(folder: Path, override: str | None, family: str) -> Processor:
    try:
        processor = load_processor(override if override is not None else folder)
    except ProcessorConfigError as error:
        raise ModelFolderError(str(error)) from None
    if processor.family != family:
        raise ModelFolderError(
            f"the processor ({processor.family}) is not the model's family ({family}, from "
            f"{folder / 'config.json'}): its placeholders would not match the model's"
        )
    return processor


def _read_json(path: Path, required: bool = False) -> dict[str, Any]:
    if not path.is_file():
        if required:
            raise ModelFolderError(f"{path.parent} has no {path.name}")
        return {}
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ModelFolderError(f"cannot read {path}: {error}") from None
    if not isinstance(values, dict):
        raise ModelFolderError(f"{path} must hold a JSON object, got {type(values).__name__}")
    return values
