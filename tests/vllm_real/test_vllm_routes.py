"""mmprep's answers on the routes of vLLM's render server against what `vllm launch render`
0.33 answered to the same requests (tests/data/vllm_real/routes.json, recorded by
scripts/record_vllm_routes.py): /tokenize and /detokenize in both forms, the completion and
chat renders, /v1/models, /health, /load, /version, and the refusals of bad input, each
compared as tests/vllm_real/routes.py says. No vLLM here: the quick stand-in for
test_real_vllm_routes.py."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.vllm_real.real_vllm import REPO
from tests.vllm_real.routes import (
    KNOWN,
    ask,
    cases,
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
    with mmprep_routes_server(folder, GOLDENS["model"], parsers=True) as url:
        yield url


def test_every_case_recorded(folder):
    assert sorted(GOLDENS["answers"]) == sorted(CASES)
    assert sorted(GOLDENS["derender_answers"]) == sorted(derender_cases(GOLDENS["model"], encoder(folder)))


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
