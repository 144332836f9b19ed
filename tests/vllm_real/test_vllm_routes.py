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
from real_vllm import REPO
from routes import ask, cases, comparable, mmprep_routes_server

from mmprep.testing.model_folder import make_model_folder

GOLDENS_FILE = REPO / "tests" / "data" / "vllm_real" / "routes.json"
if not GOLDENS_FILE.exists():
    pytest.skip("no goldens: python scripts/record_vllm_routes.py records them", allow_module_level=True)
GOLDENS = json.loads(GOLDENS_FILE.read_text())
CASES = cases(GOLDENS["model"])


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    folder = make_model_folder(GOLDENS["family"], tmp_path_factory.mktemp("routes") / "model")
    (folder / "config.json").write_text(json.dumps(GOLDENS["config"]))
    with mmprep_routes_server(folder, GOLDENS["model"]) as url:
        yield url


def test_every_case_recorded():
    assert sorted(GOLDENS["answers"]) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_route_answers_as_vllm(url, name):
    case = CASES[name]
    ours = ask(url, case)
    assert comparable(case[1], ours) == comparable(case[1], GOLDENS["answers"][name])
    if ours["status"] >= 400:  # mmprep's refusal names the field vLLM's names, where it names one
        theirs = (GOLDENS["answers"][name]["body"] or {}).get("error", {})
        if theirs.get("param"):
            assert ours["body"]["error"]["param"] == theirs["param"]
    assert httpx.get(f"{url}/health").status_code == 200
