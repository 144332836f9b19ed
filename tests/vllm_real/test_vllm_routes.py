"""mmprep's answers on the routes of vLLM's render server against what `vllm launch render`
0.33 answered to the same requests (tests/data/vllm_real/routes.json, recorded by
scripts/record_vllm_routes.py): /tokenize and /detokenize in both forms, the completion and
chat renders, /v1/models, /health, /load, /version, and the refusals of bad input, each
compared as tests/vllm_real/routes.py says. No vLLM here: the quick stand-in for
test_real_vllm_routes.py."""

from __future__ import annotations

import json
import subprocess

import httpx
import pytest

from mmprep.api.scale_out.derender_routes import CHAT_CHUNK, CHAT_COMPLETION, TEXT_CHUNK, TEXT_COMPLETION
from tests.vllm_real.real_vllm import RENDER_VENV, REPO, missing_venv
from tests.vllm_real.routes import (
    CODER_SETTINGS,
    KNOWN,
    PARSER_SETTINGS,
    ask,
    cases,
    coder_derender_cases,
    derender_cases,
    differences,
    encoder,
    mmprep_routes_server,
    routes_folder,
)

GOLDENS_FILE = REPO / "tests" / "data" / "vllm_real" / "routes.json"
if not GOLDENS_FILE.exists():
    pytest.skip("no goldens: python scripts/record_vllm_routes.py records them", allow_module_level=True)
GOLDENS = json.loads(GOLDENS_FILE.read_text())
CASES = cases(GOLDENS["model"])


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    folder = routes_folder(tmp_path_factory.mktemp("routes") / "model")
    (folder / "config.json").write_text(json.dumps(GOLDENS["config"]))
    return folder


@pytest.fixture(scope="module")
def url(folder):
    with mmprep_routes_server(folder, GOLDENS["model"]) as url:
        yield url


@pytest.fixture(scope="module")
def parsers_url(folder):
    with mmprep_routes_server(folder, GOLDENS["model"], PARSER_SETTINGS) as url:
        yield url


@pytest.fixture(scope="module")
def coder_url(folder):
    with mmprep_routes_server(folder, GOLDENS["model"], CODER_SETTINGS) as url:
        yield url


def test_every_case_recorded(folder):
    assert sorted(GOLDENS["answers"]) == sorted(CASES)
    assert sorted(GOLDENS["derender_answers"]) == sorted(derender_cases(GOLDENS["model"], encoder(folder)))
    coder = coder_derender_cases(GOLDENS["model"], encoder(folder))
    assert sorted(GOLDENS["coder_derender_answers"]) == sorted(coder)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=KNOWN[name]))
        if name in KNOWN
        else name
        for name in sorted(CASES)
    ],
)
def test_route_answers_as_vllm(url, name):
    case = CASES[name]
    assert differences(case[1], ask(url, case), GOLDENS["answers"][name]) == []
    assert httpx.get(f"{url}/health").status_code == 200


DERENDER = sorted(derender_cases("model", lambda text: [1]))


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=KNOWN[name]))
        if name in KNOWN
        else name
        for name in DERENDER
    ],
)
def test_derender_answers_as_vllm(folder, parsers_url, name):
    url = parsers_url
    case = derender_cases(GOLDENS["model"], encoder(folder))[name]
    assert differences(case[1], ask(url, case), GOLDENS["derender_answers"][name]) == []
    assert httpx.get(f"{url}/health").status_code == 200


CODER = sorted(coder_derender_cases("model", lambda text: [1] * len(text)))


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=KNOWN[name]))
        if name in KNOWN
        else name
        for name in CODER
    ],
)
def test_qwen3_coder_derender_answers_as_vllm(folder, coder_url, name):
    case = coder_derender_cases(GOLDENS["model"], encoder(folder))[name]
    assert differences(case[1], ask(coder_url, case), GOLDENS["coder_derender_answers"][name]) == []


# vLLM 0.33's response models for the derender answers, in the order of the tuples above
RESPONSE_MODELS = """
import json
from vllm.entrypoints.openai.chat_completion.protocol import (
    ChatCompletionResponse, ChatCompletionStreamResponse)
from vllm.entrypoints.openai.completion.protocol import CompletionResponse, CompletionStreamResponse
models = (ChatCompletionResponse, ChatCompletionStreamResponse, CompletionResponse, CompletionStreamResponse)
print(json.dumps([list(model.model_fields) for model in models]))
"""


def test_the_recorded_answers_have_the_fields_of_vllms_response_models():
    """Every derender answer vLLM gave (routes.json keeps each one's fields in the order vLLM
    wrote them) has exactly the fields mmprep writes for its kind of answer, in that order."""
    shapes = {
        "chat.completion": CHAT_COMPLETION,
        "chat.completion.chunk": CHAT_CHUNK,
        ("text_completion", False): TEXT_COMPLETION,
        ("text_completion", True): TEXT_CHUNK,
    }
    seen = set()
    for answers in (GOLDENS["derender_answers"], GOLDENS["coder_derender_answers"]):
        for answer in answers.values():
            for one in answer.get("chunks") or [answer]:
                if "fields" not in one:  # a refusal, or a render asked of this server
                    continue
                body = one["body"].get("chunk", one["body"])
                kind = body["object"]
                key = (kind, "chunk" in one["body"]) if kind == "text_completion" else kind
                assert one["fields"] == list(shapes[key]), key
                seen.add(key)
    assert len(seen) == 4


@pytest.mark.slow  # vLLM's interpreter, about 20 s of imports
def test_the_derender_answers_fields_are_those_of_vllms_response_models():
    if reason := missing_venv(RENDER_VENV):
        pytest.skip(reason)
    run = subprocess.run(
        [str(RENDER_VENV / "bin" / "python"), "-c", RESPONSE_MODELS],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    found = json.loads(run.stdout.strip().splitlines()[-1])
    assert found == [list(CHAT_COMPLETION), list(CHAT_CHUNK), list(TEXT_COMPLETION), list(TEXT_CHUNK)]
