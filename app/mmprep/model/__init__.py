"""A Hugging Face model folder, as `mmprep serve --model PATH` reads it (what `vllm serve`
takes; no weights are read): the tokenizer, the chat template, the model's config and its
vision processor. Knows files and the tokenizers library, nothing of HTTP."""

from .folder import ModelFolder, ModelFolderError, SpecialToken, load_model_folder

__all__ = ["ModelFolder", "ModelFolderError", "SpecialToken", "load_model_folder"]
