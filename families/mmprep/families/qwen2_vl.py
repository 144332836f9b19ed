"""Qwen2-VL (transformers' Qwen2VLProcessor; vLLM's qwen2_vl.py): the Qwen-VL base as it is."""

from __future__ import annotations

from .qwen_vl import QwenVL


class Qwen2VL(QwenVL):
    name = "qwen2_vl"
    model_types = ("qwen2_vl",)
    processor_classes = ("Qwen2VLProcessor",)
    video_processor_classes = ("Qwen2VLVideoProcessor",)
    image_processor_classes = ("Qwen2VLImageProcessor",)
    max_position_embeddings = 32768


FAMILY = Qwen2VL()
