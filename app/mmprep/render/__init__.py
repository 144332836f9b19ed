"""The prompt's token ids with a model folder (`mmprep serve --model`): the chat template
rendered as transformers renders it, tokenized, each image and video placeholder expanded to
the processor's count. Knows jinja2 and the tokenizer, nothing of HTTP."""

from .content_format import detect_content_format
from .options import REASONING_EFFORTS, TemplateOptions
from .renderer import Renderer
from .template import compile_template

__all__ = ["REASONING_EFFORTS", "Renderer", "TemplateOptions", "compile_template", "detect_content_format"]
