"""Record what `vllm launch render` (vLLM 0.33) answers on each of its routes into
tests/data/vllm_real/routes.json, for tests/vllm_real/test_vllm_routes.py, which asks mmprep
the same and compares them without vLLM (issue 28, point 3).

    bash scripts/vllm_venv.sh                      # once: the vLLM venvs
    .venv/bin/python scripts/record_vllm_routes.py

The requests and what of the answers is compared: tests/vllm_real/routes.py. The model is a
tiny Qwen2-VL folder (tests/vllm_real/real_vllm.py); the render server reads no weights, so
the folder mmprep makes (configs and the real tokenizer) is enough. Three servers: the derender
routes are asked of one started with parsers (qwen3, hermes), and of one with qwen3_coder's.
About four minutes. Each derender answer also keeps its top-level fields in the order vLLM
wrote them (`fields`: the file's keys are sorted).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.vllm_real, as pytest imports it

from record_vllm_goldens import dumps  # noqa: E402 (after the path)

from tests.vllm_real.real_vllm import RENDER_VENV, VllmProcess, missing_venv  # noqa: E402
from tests.vllm_real.routes import (  # noqa: E402
    CODER_ARGS,
    FAMILY,
    PARSER_ARGS,
    ROUTES_ARGS,
    ask,
    cases,
    coder_derender_cases,
    derender_cases,
    encoder,
    routes_folder,
    slim,
)

GOLDENS = REPO / "tests" / "data" / "vllm_real" / "routes.json"


def main() -> None:
    if reason := missing_venv(RENDER_VENV):
        sys.exit(reason)
    folder = routes_folder(Path(tempfile.mkdtemp(prefix="mmprep-routes-")) / f"tiny-{FAMILY}")
    model = str(folder)
    began = time.monotonic()
    with VllmProcess(RENDER_VENV, ["launch", "render"], folder, *ROUTES_ARGS) as server:
        print(f"vllm launch render ready in {server.started_in:.0f} s", flush=True)
        answers = {name: slim(ask(server.url, case)) for name, case in cases(model).items()}
    with VllmProcess(RENDER_VENV, ["launch", "render"], folder, *ROUTES_ARGS, *PARSER_ARGS) as server:
        print(f"vllm launch render (with parsers) ready in {server.started_in:.0f} s", flush=True)
        derendered = {
            name: ask(server.url, case) for name, case in derender_cases(model, encoder(folder)).items()
        }
    with VllmProcess(RENDER_VENV, ["launch", "render"], folder, *ROUTES_ARGS, *CODER_ARGS) as server:
        print(f"vllm launch render (with qwen3_coder) ready in {server.started_in:.0f} s", flush=True)
        coder = {
            name: ask(server.url, case) for name, case in coder_derender_cases(model, encoder(folder)).items()
        }
    recorded = {
        "version": "vllm 0.33.0 launch render",
        "family": FAMILY,
        "model": model,  # the served name: vLLM names the model by the path it was given
        "config": json.loads((folder / "config.json").read_text()),
        "answers": answers,
        "derender_answers": derendered,  # from the server with PARSER_ARGS
        "coder_derender_answers": coder,  # from the server with CODER_ARGS
    }
    GOLDENS.parent.mkdir(parents=True, exist_ok=True)
    GOLDENS.write_text(dumps(recorded))
    count = len(answers) + len(derendered) + len(coder)
    print(f"{count} answers in {time.monotonic() - began:.0f} s -> {GOLDENS}")


if __name__ == "__main__":
    main()
