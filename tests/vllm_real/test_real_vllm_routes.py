"""The differential test live (issue 28, point 3): `vllm launch render` 0.33 and mmprep on one
tiny Qwen2-VL folder, every case of tests/vllm_real/routes.py asked of both and compared as
it says. Skipped, saying why, where vLLM's render venv is absent (scripts/vllm_venv.sh makes
it; VLLM_RENDER_VENV points elsewhere); test_vllm_routes.py checks the recorded answers
without it."""

from __future__ import annotations

import json

import pytest

from tests.vllm_real.real_vllm import RENDER_VENV, VllmProcess, missing_venv
from tests.vllm_real.routes import (
    CODER_ARGS,
    CODER_SETTINGS,
    FAMILY,
    KNOWN,
    PARSER_ARGS,
    PARSER_SETTINGS,
    ROUTES_ARGS,
    ask,
    cases,
    coder_derender_cases,
    derender_cases,
    differences,
    encoder,
    mmprep_routes_server,
    routes_folder,
)

pytestmark = pytest.mark.slow
if reason := missing_venv(RENDER_VENV):
    pytest.skip(reason, allow_module_level=True)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return routes_folder(tmp_path_factory.mktemp("routes") / f"tiny-{FAMILY}")


def test_every_route_answers_as_vllm(folder):
    with VllmProcess(RENDER_VENV, ["launch", "render"], folder, *ROUTES_ARGS) as vllm:
        with mmprep_routes_server(folder, str(folder)) as mmprep:
            compare(vllm.url, mmprep, cases(str(folder)))


def test_derender_answers_as_vllm(folder):
    with VllmProcess(RENDER_VENV, ["launch", "render"], folder, *ROUTES_ARGS, *PARSER_ARGS) as vllm:
        with mmprep_routes_server(folder, str(folder), PARSER_SETTINGS) as mmprep:
            compare(vllm.url, mmprep, derender_cases(str(folder), encoder(folder)))


def test_qwen3_coder_derender_answers_as_vllm(folder):
    with VllmProcess(RENDER_VENV, ["launch", "render"], folder, *ROUTES_ARGS, *CODER_ARGS) as vllm:
        with mmprep_routes_server(folder, str(folder), CODER_SETTINGS) as mmprep:
            compare(vllm.url, mmprep, coder_derender_cases(str(folder), encoder(folder)))


# vllm serve --override-generation-config over the folder's generation_config.json
OVERRIDE = {"temperature": 0.2, "top_k": 5, "max_new_tokens": 7, "skip_special_tokens": False}
RENDERS = ("chat-render", "completion-text", "completion-sampling", "messages-render", "responses-render")


def test_override_generation_config_renders_as_vllm(folder):
    args = ["--override-generation-config", json.dumps(OVERRIDE)]
    with VllmProcess(RENDER_VENV, ["launch", "render"], folder, *ROUTES_ARGS, *args) as vllm:
        with mmprep_routes_server(folder, str(folder), {"override_generation_config": OVERRIDE}) as mmprep:
            compare(
                vllm.url, mmprep, {name: case for name, case in cases(str(folder)).items() if name in RENDERS}
            )


def compare(vllm: str, mmprep: str, asked: dict) -> None:
    differing, known = [], []
    for name, case in asked.items():
        found = differences(case[1], ask(mmprep, case), ask(vllm, case))
        if name in KNOWN:
            known += [name] if found else []
        else:
            differing += [f"{name}: {difference}" for difference in found]
    assert not differing, "\n".join(differing)
    assert sorted(known) == sorted(set(KNOWN) & set(asked))  # each difference kept on purpose is still there
