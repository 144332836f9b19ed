"""`--model` as `vllm serve MODEL` takes it: a folder, else a Hugging Face Hub id
(`Qwen/Qwen3-VL-8B-Instruct`) resolved to its snapshot in the local Hugging Face cache, as
vLLM resolves it: huggingface_hub's `snapshot_download`, with `local_files_only` when
`HF_HUB_OFFLINE=1`, in the cache `HF_HUB_CACHE` names (else `HF_HOME`'s `hub`, else
`~/.cache/huggingface/hub`), at `--revision` (a branch, tag or commit; default main).

Online, only the files mmprep reads are fetched (configs, tokenizer, chat template,
preprocessor configs: never the weights); offline, the cached snapshot must be there, and
an id that is not is an error naming the id, the revision and the cache's path.
"""

from __future__ import annotations

from pathlib import Path

from .folder import ModelFolderError

# What a model folder holds that mmprep reads (model/folder.py): fetched online, never the weights.
READ_FILES = ["*.json", "*.jinja", "*.txt", "*.model", "*.tiktoken"]


def is_hub_id(model: str) -> bool:
    """Whether `model` is spelled as a Hub repository id (`org/name` or `name`) and names no
    existing path: how vLLM tells a Hub id from a folder."""
    if Path(model).exists():
        return False
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(model)
    except HFValidationError:
        return False
    return True


def resolve_model(model: str, revision: str | None = None) -> Path:
    """The folder of `model`: itself if it is one, else the Hub id's snapshot in the local
    Hugging Face cache (fetched online: the files mmprep reads). A ModelFolderError says
    what is missing, with the cache's path."""
    if not is_hub_id(model):
        if revision is not None:
            raise ModelFolderError(
                f"--revision {revision} only applies to a Hugging Face Hub id; {model!r} is a folder"
                if Path(model).is_dir()
                else f"--model {model!r} is neither a folder nor a Hugging Face Hub id"
            )
        return Path(model)
    from huggingface_hub import constants, snapshot_download

    offline = constants.HF_HUB_OFFLINE
    at = f" at revision {revision}" if revision is not None else ""
    try:
        return Path(
            snapshot_download(model, revision=revision, allow_patterns=READ_FILES, local_files_only=offline)
        )
    except Exception as error:  # huggingface_hub's: not cached, not found, no network, ...
        first_line = (str(error).splitlines() or [""])[0]
        how = (
            "HF_HUB_OFFLINE=1: nothing is downloaded"
            if offline
            else f"nor could it be fetched: {type(error).__name__}: {first_line}"
        )
        fetch = f"hf download {model} --exclude '*.safetensors'"
        raise ModelFolderError(
            f"--model {model}: no such folder, and the Hugging Face Hub id is not in the local cache{at} "
            f"({constants.HF_HUB_CACHE}; {how}). Fetch it with `{fetch}` (HF_HUB_CACHE or HF_HOME "
            "move the cache), or give the model's folder"
        ) from None
