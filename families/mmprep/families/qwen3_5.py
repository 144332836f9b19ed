"""Qwen3.5 and Qwen3.6, dense and MoE (config.json model_type `qwen3_5`, `qwen3_5_moe`; vLLM's
qwen3_5.py): one model for text, images and video, on Qwen3-VL's processors.

transformers has no processor of theirs: both model types map to Qwen3VLProcessor,
Qwen2VLImageProcessor and Qwen3VLVideoProcessor, and vLLM 0.33 registers Qwen3-VL's
multimodal processor for them (only the config class differs), its `qwen3_vl` video loader
(named by video_preprocessor_config.json) and its fields (each video's block `timestamps`).
So the prompt, sizing, tensors and vLLM's facts are Qwen3-VL's; what differs is the model:
its vocabulary (248,320 embeddings; the vision tokens at 248053-248057, read from config.json),
its chat template (thinking on unless `enable_thinking` is false, tool calls as
`<function=...>`), and its context (262,144 positions in the published configs; transformers'
default, for a config.json without it, is 32,768). Told apart from Qwen3-VL by config.json's
model_type alone: their processor files are the same.
"""

from __future__ import annotations

from .qwen3_vl import Qwen3VL


class Qwen3_5(Qwen3VL):
    name = "qwen3_5"
    model_types = ("qwen3_5", "qwen3_5_moe")
    processor_classes = ()  # Qwen3VLProcessor and its video class name Qwen3-VL
    video_processor_classes = ()
    image_preset = "qwen3_5"
    max_position_embeddings = 32768  # Qwen3_5TextConfig's and Qwen3_5MoeTextConfig's default


FAMILY = Qwen3_5()
