"""--api-key (and VLLM_API_KEY), as vllm serve's, on every route that does work: a real server
on loopback, called by the official openai and anthropic clients and by plain HTTP."""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

from mmprep.api.app import FAMILIES
from mmprep.api.auth import OPEN_PATHS
from mmprep.core.config import Settings
from tests.support.chat import MODEL
from tests.support.model_folder import make_model_folder
from tests.support.servers import LiveServer

KEYS = ["first-key", "second-key"]
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = make_model_folder("qwen2_5_vl", tmp_path_factory.mktemp("model"))
    with LiveServer(api_key=KEYS, model=folder, served_model_name=[MODEL], enable_preview=True) as live:
        yield live


def test_without_a_key_every_route_but_the_probes_is_a_401_in_openais_shape(server):
    families = [route for family in FAMILIES for route in family.router.routes]
    routes = [
        route for route in [*server.app.routes, *families] if getattr(route, "methods", None)
    ]  # the app's own (the docs) and each endpoint family's
    guarded = [route for route in routes if route.path not in OPEN_PATHS]
    assert {"/tokenize", "/detokenize", "/v1/chat/completions/derender", "/preview", "/v1/models"} <= {
        route.path for route in guarded
    }
    for route in guarded:
        for method in route.methods or ():
            if method == "HEAD":
                continue
            answer = httpx.request(method, server.url + route.path, json={}, timeout=10)
            assert answer.status_code == 401, (method, route.path, answer.text)
            assert answer.headers["www-authenticate"] == "Bearer"
            if route.path.startswith("/v1/messages"):
                assert answer.json()["error"]["type"] == "authentication_error"
            else:
                error = answer.json()["error"]
                assert error["code"] == "invalid_api_key" and error["type"] == "invalid_request_error"
                assert error["param"] is None and "Authorization: Bearer" in error["message"]
    for path in sorted(OPEN_PATHS):
        assert httpx.get(server.url + path, timeout=10).status_code == 200, path


def test_a_wrong_key_or_scheme_is_refused_and_each_key_given_is_taken(server):
    url = server.url + "/tokenize"
    body = {"model": MODEL, "prompt": "hello"}
    for headers in (
        {"authorization": "Bearer first-ke"},
        {"authorization": "Bearer first-key-and-more"},
        {"authorization": "Basic first-key"},
        {"authorization": "first-key"},
        {"x-api-key": "wrong"},
    ):
        assert httpx.post(url, json=body, headers=headers, timeout=10).status_code == 401, headers
    for headers in (
        {"authorization": "Bearer first-key"},
        {"authorization": "bearer second-key"},
        {"x-api-key": "second-key"},
        {"authorization": "Bearer wrong", "x-api-key": "first-key"},
    ):
        answer = httpx.post(url, json=body, headers=headers, timeout=10)
        assert answer.status_code == 200, (headers, answer.text)
        assert answer.json()["tokens"]


def test_the_openai_client_needs_the_key(server):
    no_key = openai.OpenAI(base_url=server.url + "/v1", api_key="not-it", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as refused:
        no_key.chat.completions.create(**CHAT)
    assert refused.value.status_code == 401 and refused.value.code == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        no_key.models.list()
    for key in KEYS:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0)
        assert client.chat.completions.create(**CHAT).choices[0].finish_reason
        assert [model.id for model in client.models.list()] == [MODEL]
        assert client.completions.create(model=MODEL, prompt="hi", max_tokens=2).choices[0].text is not None


def test_the_anthropic_client_needs_the_key_as_x_api_key_or_bearer(server):
    message = {"model": MODEL, "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}
    wrong = anthropic.Anthropic(base_url=server.url, api_key="not-it", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as refused:
        wrong.messages.create(**message)
    assert refused.value.status_code == 401
    assert refused.value.body["error"]["type"] == "authentication_error"
    by_header = anthropic.Anthropic(base_url=server.url, api_key=KEYS[0], max_retries=0)
    by_bearer = anthropic.Anthropic(base_url=server.url, auth_token=KEYS[1], max_retries=0)
    for client in (by_header, by_bearer):
        assert client.messages.create(**message).type == "message"


def test_vllms_variable_gives_the_key_unless_a_flag_or_mmpreps_variable_does(monkeypatch):
    monkeypatch.setenv("VLLM_API_KEY", "from-vllm")
    assert Settings().api_key == ["from-vllm"]
    assert Settings(api_key=["flag"]).api_key == ["flag"]
    monkeypatch.setenv("MMPREP_API_KEY", '["mine"]')
    assert Settings().api_key == ["mine"]
    monkeypatch.delenv("MMPREP_API_KEY")
    monkeypatch.setenv("VLLM_API_KEY", "")
    assert Settings().api_key == []
    assert "from-vllm" not in repr(Settings(api_key=["from-vllm"]))


def test_behind_a_root_path_and_for_a_browsers_preflight(tmp_path):
    settings = dict(api_key=["k"], root_path="/mm", allowed_origins=["https://app.example"])
    with LiveServer(**settings) as live:
        for path in ("/mm/v1/models", "/v1/models"):  # a proxy that keeps the prefix, or strips it
            assert httpx.get(live.url + path, timeout=10).status_code == 401
            assert httpx.get(live.url + path, headers={"authorization": "Bearer k"}, timeout=10).is_success
        assert httpx.get(live.url + "/mm/health", timeout=10).status_code == 200
        preflight = httpx.options(
            live.url + "/v1/chat/completions",
            headers={"origin": "https://app.example", "access-control-request-method": "POST"},
            timeout=10,
        )
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == "https://app.example"
        refused = httpx.get(live.url + "/v1/models", headers={"origin": "https://app.example"}, timeout=10)
        assert refused.status_code == 401  # and the browser may read why:
        assert refused.headers["access-control-allow-origin"] == "https://app.example"
