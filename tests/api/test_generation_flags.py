"""vllm serve's --generation-config and --return-tokens-as-token-ids on mmprep serve, with vLLM
0.33's meaning, on real servers on loopback called by the official openai client.

--generation-config: the sampling defaults of a request that leaves them unset (vLLM's
ModelConfig.get_diff_sampling_param): auto (the model folder's generation_config.json), vllm
(none) or a folder; mmprep writes them into vLLM's SamplingParams (--engine vllm-generate, the
render route), as vLLM's own frontend does before its engine sees the request.
--return-tokens-as-token-ids: logprobs name each token token_id:N (vLLM's
format_token_id_placeholder), the request's own return_tokens_as_token_ids over it."""

from __future__ import annotations

import json

import httpx
import pytest

from mmprep.api.app import create_app
from mmprep.core.config import Settings
from mmprep.service import Service
from tests.support.chat import chat, openai_client
from tests.support.derender_fixtures import derendering, load
from tests.support.engines import TokenReplayEngine
from tests.support.model_folder import make_model_folder
from tests.support.servers import LiveServer, ThreadServer
from tests.support.vllm_like import VllmGenerateLike

MODEL = "test-vlm"
# what a model's generation_config.json says (Qwen2.5-VL's published one, with its sampling)
MODELS_OWN = {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.05, "max_new_tokens": 64}
ANOTHER = {"temperature": 0.3, "top_p": 0.5, "min_p": 0.1, "presence_penalty": 0.4}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    folder = make_model_folder("qwen2_vl", root / "Qwen2-VL-2B-Instruct")
    own = json.loads((folder / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(json.dumps({**own, **MODELS_OWN}))
    elsewhere = root / "generation"
    elsewhere.mkdir()
    (elsewhere / "generation_config.json").write_text(json.dumps(ANOTHER))
    return folder, elsewhere


@pytest.fixture(scope="module")
def upstream():
    server = VllmGenerateLike(model=MODEL, max_model_len=4096)
    with ThreadServer(server.app) as running:
        server.url = running.url
        yield server


def sent(upstream, front, **asked) -> dict:
    """The sampling_params of the GenerateRequest a chat through `front` sent `upstream`."""
    openai_client(front).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Hi"}], **asked
    )
    return upstream.received[-1]["body"]["sampling_params"]


@pytest.mark.parametrize(
    ("generation_config", "defaults"),
    [
        (None, {**MODELS_OWN, "max_tokens": 64}),  # auto, vLLM's default: the folder's
        ("auto", {**MODELS_OWN, "max_tokens": 64}),
        ("vllm", {}),
        ("elsewhere", ANOTHER),
    ],
)
def test_generation_config_gives_unset_sampling_fields_their_defaults(
    folders, upstream, generation_config, defaults
):
    folder, elsewhere = folders
    chosen = {} if generation_config is None else {"generation_config": generation_config}
    if generation_config == "elsewhere":
        chosen["generation_config"] = str(elsewhere)
    settings = Settings(
        engine="vllm-generate",
        upstream_url=f"{upstream.url}/v1",
        upstream_model=MODEL,
        model=folder,
        served_model_name=[MODEL],
        max_model_len=4096,
        **chosen,
    )
    with LiveServer(settings) as front:
        params = sent(upstream, front)
        for key in ("temperature", "top_p", "top_k", "min_p", "repetition_penalty", "presence_penalty"):
            assert params.get(key) == defaults.get(key), key
        # max_new_tokens is the max_tokens default; without one, what the context leaves
        assert params["max_tokens"] == defaults.get(
            "max_tokens", 4096 - len(upstream.received[-1]["body"]["token_ids"])
        )
        # the request's own win
        params = sent(upstream, front, temperature=1.2, top_p=0.9, max_tokens=5, extra_body={"top_k": 3})
        assert (params["temperature"], params["top_p"], params["top_k"], params["max_tokens"]) == (
            1.2,
            0.9,
            3,
            5,
        )
        # the render route writes the same
        body = chat({"type": "text", "text": "Hi"}, model=MODEL)
        rendered = httpx.post(f"{front.url}/v1/chat/completions/render", json=body, timeout=30).json()
        assert rendered["sampling_params"].get("temperature") == defaults.get("temperature")


def test_generation_config_is_checked_at_start(folders, tmp_path):
    with pytest.raises(ValueError, match="neither auto, vllm nor an existing folder"):
        Settings(model=folders[0], generation_config=str(tmp_path / "absent"))
    with pytest.raises(ValueError, match="--generation-config only applies with --model"):
        Settings(generation_config=str(folders[1]))


# -- --return-tokens-as-token-ids ------------------------------------------------------------


def replaying(folder, **settings) -> ThreadServer:
    """mmprep --model on the token-replaying engine, answering the derender fixtures' ids."""
    service = Service(
        Settings(model=folder, served_model_name=[MODEL], **settings),
        TokenReplayEngine(),
        derendering=derendering({"server": {}}),
    )
    return ThreadServer(create_app(service=service))


FIXTURE = load("logprobs")
REPLAY = {
    "replay": {
        "token_ids": FIXTURE["token_ids"],
        "logprobs": FIXTURE["logprobs"],
        "chunk": 2,
        "finish_reason": "stop",
    }
}
EXPECTED = FIXTURE["expected"]["logprobs"]  # without the flag: each token's text


def as_ids(token_id: int) -> str:
    return f"token_id:{token_id}"


def test_return_tokens_as_token_ids_names_chat_logprobs_tokens_by_id(folders):
    with replaying(folders[0], return_tokens_as_token_ids=True) as server:
        client = openai_client(server)
        ask = dict(model=MODEL, messages=[{"role": "user", "content": "Hi"}], logprobs=True, top_logprobs=2)
        content = client.chat.completions.create(**ask, extra_body=REPLAY).choices[0].logprobs.content
        assert [entry.token for entry in content] == [as_ids(i) for i in FIXTURE["token_ids"]]
        # as vLLM: the sampled token keeps its own bytes; an alternative's are its token_id:N's
        assert [entry.bytes for entry in content] == [entry["bytes"] for entry in EXPECTED]
        for entry, (_, _, alternatives) in zip(content, FIXTURE["logprobs"], strict=True):
            assert [(top.token, top.bytes) for top in entry.top_logprobs] == [
                (as_ids(i), list(as_ids(i).encode())) for i, _ in alternatives
            ]
        streamed = client.chat.completions.create(**ask, stream=True, extra_body=REPLAY)
        tokens = [
            e.token
            for chunk in streamed
            if chunk.choices and chunk.choices[0].logprobs
            for e in chunk.choices[0].logprobs.content
        ]
        assert tokens == [as_ids(i) for i in FIXTURE["token_ids"]]
        # the request's own choice wins
        plain = client.chat.completions.create(
            **ask, extra_body={**REPLAY, "return_tokens_as_token_ids": False}
        )
        assert [entry.token for entry in plain.choices[0].logprobs.content] == [e["token"] for e in EXPECTED]


def test_return_tokens_as_token_ids_names_completion_logprobs_and_offsets_by_id(folders):
    with replaying(folders[0]) as server:  # the flag off: a request may ask for it itself
        client = openai_client(server)
        request = {"model": MODEL, "prompt": "Q:", "logprobs": 1, "max_tokens": 50}
        extra = {**REPLAY, "return_tokens_as_token_ids": True}
        logprobs = client.completions.create(**request, extra_body=extra).choices[0].logprobs
        names = [as_ids(i) for i in FIXTURE["token_ids"]]
        assert logprobs.tokens == names
        assert logprobs.top_logprobs == [
            {name: entry["logprob"]} for name, entry in zip(names, EXPECTED, strict=True)
        ]
        # vLLM's offsets advance by the length of the token as written
        assert logprobs.text_offset == [sum(len(name) for name in names[:k]) for k in range(len(names))]
        plain = client.completions.create(**request, extra_body=REPLAY).choices[0].logprobs
        assert plain.tokens == [entry["token"] for entry in EXPECTED]


def test_return_tokens_as_token_ids_needs_a_model():
    with pytest.raises(ValueError, match="--return-tokens-as-token-ids only applies with --model"):
        Settings(return_tokens_as_token_ids=True)
