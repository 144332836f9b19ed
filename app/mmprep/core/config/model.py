"""The model folder and the vision processor (mmprep.model, mmprep.render,
mmprep.preprocess.vision)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Self

from pydantic import Field, field_validator, model_validator

from mmprep.families import FAMILIES

from .group import SettingsGroup


class ModelSettings(SettingsGroup):
    """The model folder and the vision processor (mmprep.model, mmprep.render, mmprep.preprocess.vision)."""

    model: Path | None = Field(
        None,
        description="a Hugging Face model folder, or a Hub id resolved from the local Hugging Face cache as "
        "vllm serve resolves it (Qwen/Qwen3-VL-8B-Instruct; HF_HUB_OFFLINE=1: nothing fetched; online, "
        "its configs and tokenizer, no weights), what `vllm serve` takes: its tokenizer, chat template, "
        "config and processor. Each request's prompt is then rendered to token ids, images and videos "
        "expanded to the processor's count, for token-in engines; the served model name defaults to the "
        "folder's name, or the Hub id (default: none, engines get the messages)",
    )
    revision: str | None = Field(
        None,
        description="vllm serve's --revision: with a Hub id --model, the branch, tag or commit of its "
        "snapshot in the cache (default: main)",
    )
    generation_config: str = Field(
        "auto",
        description="vllm serve's --generation-config: with --model, where the sampling defaults of a "
        "request that leaves them unset come from, as vLLM reads them (temperature, top_p, top_k, min_p, the "
        "repetition, presence and frequency penalties, and max_new_tokens as the max_tokens default): auto "
        "(the --model folder's generation_config.json, else its config.json), vllm (none: vLLM's own, "
        "OpenAI's), or a folder with a generation_config.json. Applied where mmprep writes vLLM's "
        "SamplingParams (--engine vllm-generate, the render routes); an upstream of --engine openai "
        "applies its own",
    )
    override_generation_config: dict[str, Any] = Field(
        {},
        description="vllm serve's --override-generation-config: with --model, JSON laid over the "
        """--generation-config's sampling defaults, e.g. '{"temperature": 0.5}', as vLLM lays it""",
    )
    max_model_len: int | None = Field(
        None,
        ge=1,
        description="with --model: the model's context length, as vllm serve --max-model-len; a longer "
        "prompt is refused with a 400 as vLLM refuses it (default: derived from the folder's config.json as "
        "vLLM derives it: the text config's max_position_embeddings, RoPE scaling)",
    )

    chat_template: str | None = Field(
        None,
        description="vllm serve's --chat-template: with --model, the chat template every request renders "
        "with (those with tools too) in place of the folder's: a file's path, or the template itself "
        "(as vLLM, a value that is no file and holds {, } or a line break)",
    )
    chat_template_content_format: Literal["auto", "string", "openai"] = Field(
        "auto",
        description="vllm serve's --chat-template-content-format: with --model, message content as the "
        "template takes it: string (the parts' text joined), openai (the list of parts), or auto (detected "
        "from the template, as vLLM detects it)",
    )
    trust_request_chat_template: bool = Field(
        False,
        description="--model: render a request that brings its own chat_template (top-level, or in "
        "chat_template_kwargs) with it, as vLLM's flag of that name; without it such a request is a 400 "
        "(a template is code run on the server)",
    )

    # -- the vision processor ------------------------------------------------------
    processor: str | None = Field(
        None,
        description="process every image and video into the model's tensors (pixel_values, *_grid_thw): a "
        f"family ({', '.join(FAMILIES)}), a preset model id (Qwen/Qwen2.5-VL-7B-Instruct) or a folder with "
        "its preprocessor config (default: the --model folder's, else none: engines get the decoded frames)",
    )
    processor_resize: Literal["exact", "ffmpeg"] = Field(
        "exact",
        description="--processor: how frames reach the model's size: exact (transformers' resize on the "
        "decoded frames) or ffmpeg (FFmpeg's scaler straight to it while decoding: faster, a few levels "
        "off; see docs/deployment.md)",
    )
    max_vision_tokens: int | None = Field(
        None,
        ge=1,
        description="--processor: refuse a request whose images and videos come to more placeholder tokens",
    )
    mm_device_do_normalize: bool | None = Field(
        None,
        description="--processor: leave the pixels uint8, unrescaled and unnormalized, for an engine that "
        "normalizes them on the device, as vLLM does by default for the Qwen-VL families (vllm serve "
        "--mm-device-do-normalize; give --no-mm-device-do-normalize where vLLM has it); the render route "
        "and --engine vllm-generate then send what vLLM's own renderer sends (default: as vLLM for the "
        "model with --model, except for --engine workers and --engine-class, whose engines take "
        "transformers' normalized float32)",
    )

    @field_validator("max_model_len", mode="before")
    @classmethod
    def _human_readable(cls, value: object) -> object:
        """As vllm serve's --max-model-len: 32k, 1m, 25.6k (powers of 1000; K, M, G, T powers of 1024),
        auto or -1 (derived from the folder)."""
        if not isinstance(value, str):
            return None if value == -1 else value
        text = value.strip()
        if text.lower() == "auto" or text == "-1":
            return None
        scale = {
            "k": 10**3,
            "m": 10**6,
            "g": 10**9,
            "t": 10**12,
            "K": 2**10,
            "M": 2**20,
            "G": 2**30,
            "T": 2**40,
        }.get(text[-1:])
        if scale is None:
            return text
        try:
            number = float(text[:-1])
        except ValueError:
            return text
        if text[-1].isupper() and number != int(number):
            raise ValueError(f"{value!r}: a binary multiple ({text[-1]}) takes a whole number")
        return int(number * scale)

    @model_validator(mode="after")
    def _processor_options_need_one(self) -> Self:
        if self.max_model_len is not None and self.model is None:
            raise ValueError("--max-model-len only applies with --model (the prompt's token ids)")
        if self.revision is not None and self.model is None:
            raise ValueError("--revision only applies with --model (a Hugging Face Hub id)")
        if self.override_generation_config and self.model is None:
            raise ValueError(
                "--override-generation-config only applies with --model (as --generation-config; without "
                "it give it to the vllm serve behind mmprep)"
            )
        if self.generation_config not in ("auto", "vllm"):
            if self.model is None:
                raise ValueError(
                    "--generation-config only applies with --model (mmprep writes the sampling defaults of "
                    "vLLM's SamplingParams only then; without it give it to the vllm serve behind mmprep)"
                )
            if not Path(self.generation_config).is_dir():
                said = repr(self.generation_config)
                raise ValueError(f"--generation-config {said} is neither auto, vllm nor an existing folder")
        if self.processor is None and self.model is None:
            given = [
                name
                for name in ("processor_resize", "max_vision_tokens", "mm_device_do_normalize")
                if self._given(name)
            ]
            if given:
                flags = ", ".join(f"--{name.replace('_', '-')}" for name in given)
                raise ValueError(f"{flags} only apply with --processor or --model")
        for name in ("chat_template", "chat_template_content_format"):
            if self._given(name) and self.model is None:
                raise ValueError(
                    f"--{name.replace('_', '-')} only applies with --model (mmprep renders the template only "
                    "then; without it give it to the engine that renders, e.g. the vllm serve behind mmprep)"
                )
        if self._given("trust_request_chat_template") and self.model is None:
            raise ValueError(
                "--trust-request-chat-template only applies with --model (mmprep renders the template "
                "only then; without it the engine reads the request's chat_template, if at all)"
            )
        return self
