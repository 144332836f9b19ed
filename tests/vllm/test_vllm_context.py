"""The GenerateRequest filled as vLLM 0.33.0's render fills it, and its context limit:
max_model_len derived from config.json as vLLM derives it (or --max-model-len), a prompt
over it refused with vLLM's 400 and message on the render route and on chat through
--engine vllm-generate, max_tokens defaulting to what the prompt leaves, the request id's
form, parse_context. Real servers on loopback (mmprep, tests/support/vllm_like.py's
VllmGenerateLike)."""

from __future__ import annotations

import importlib.util
import json
import re

import httpx
import pytest

from mmprep.core.config import Settings
from mmprep.model.context import derive_max_model_len
from mmprep.service import load_resources
from mmprep.vllm.sampling import generation_defaults
from tests.support.chat import assert_error, chat, image, png_data_url, post
from tests.support.model_folder import make_model_folder
from tests.support.servers import LiveServer, ThreadServer
from tests.support.vllm_like import VllmGenerateLike

MODEL = "mmprep-echo"  # the chat helper's model name


# -- max_model_len as vLLM derives it ---------------------------------------------------


LENGTH_CASES = [
    # Qwen2.5-VL-7B-Instruct's published config.json: the top level is the text config
    (
        {
            "model_type": "qwen2_5_vl",
            "max_position_embeddings": 128000,
            "rope_scaling": {"type": "mrope"},
        },
        128000,
    ),
    # Qwen3-VL's: a text_config, whose value wins over a top-level one
    (
        {
            "model_type": "qwen3_vl",
            "max_position_embeddings": 1000,
            "text_config": {"max_position_embeddings": 262144, "rope_scaling": {"rope_type": "default"}},
        },
        262144,
    ),
    # a key the text config lacks takes transformers' class default
    ({"model_type": "qwen2_vl", "text_config": {"vocab_size": 10}}, 32768),
    # linear RoPE scaling multiplies; YaRN's length is already scaled
    (
        {
            "model_type": "qwen2_vl",
            "max_position_embeddings": 4096,
            "rope_scaling": {"type": "linear", "factor": 2.0},
        },
        8192,
    ),
    (
        {
            "model_type": "qwen2_vl",
            "max_position_embeddings": 32768,
            "rope_scaling": {"rope_type": "yarn", "factor": 4.0},
        },
        32768,
    ),
    # in a text_config, the smallest length key wins, model_max_length over all...
    ({"model_type": "qwen2_vl", "text_config": {"max_position_embeddings": 4096, "seq_length": 2048}}, 2048),
    (
        {
            "model_type": "qwen2_vl",
            "text_config": {"max_position_embeddings": 4096, "model_max_length": 9000},
        },
        9000,
    ),
    # ...but at the top level only max_position_embeddings reaches transformers' text config
    ({"model_type": "qwen2_vl", "max_position_embeddings": 4096, "seq_length": 2048}, 4096),
]


@pytest.mark.parametrize(("config", "expected"), LENGTH_CASES)
def test_max_model_len_is_derived_as_vllm_derives_it(config, expected):
    assert derive_max_model_len(config)[0] == expected


@pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None,
    reason="vLLM is not installed (see tests/data/vllm/make_goldens.py)",
)
@pytest.mark.parametrize("config", [config for config, _ in LENGTH_CASES])
def test_vllms_own_derivation_agrees(config, tmp_path):
    """With vLLM importable: its _get_and_verify_max_len on transformers' reading of the file."""
    from transformers import AutoConfig
    from vllm.config.model import _get_and_verify_max_len
    from vllm.transformers_utils.config import get_hf_text_config, patch_rope_parameters
    from vllm.transformers_utils.model_arch_config_convertor import ModelArchConfigConvertorBase

    (tmp_path / "config.json").write_text(json.dumps(config))
    hf = AutoConfig.from_pretrained(tmp_path)
    text = get_hf_text_config(hf)
    patch_rope_parameters(text)

    class Arch:
        derived_max_model_len_and_key = ModelArchConfigConvertorBase(hf, text).derive_max_model_len_and_key()

    assert _get_and_verify_max_len(text, Arch, None, None, False, None) == derive_max_model_len(config)[0]


def test_max_model_len_setting(tmp_path, monkeypatch):
    """Derived, or checked, where the service is built (load_resources), from the folder."""
    folder = make_model_folder("qwen2_5_vl", tmp_path / "Qwen2.5-VL-7B-Instruct")
    assert Settings(model=folder).max_model_len is None  # reading settings loads nothing
    assert load_resources(Settings(model=folder)).max_model_len == 128000  # the folder's, as vllm serve's
    assert load_resources(Settings(model=folder, max_model_len=4096)).max_model_len == 4096
    with pytest.raises(
        ValueError, match=r"max_model_len \(200000\) is greater than the derived max_model_len"
    ):
        load_resources(Settings(model=folder, max_model_len=200000))
    monkeypatch.setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")  # vLLM's own opt-out, honoured alike
    assert load_resources(Settings(model=folder, max_model_len=200000)).max_model_len == 200000
    with pytest.raises(ValueError, match="--max-model-len only applies with --model"):
        Settings(max_model_len=4096)


# -- through HTTP -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_model_folder("qwen2_vl", tmp_path_factory.mktemp("models") / "Qwen2-VL-2B-Instruct")


@pytest.fixture(scope="module")
def render(folder):
    """mmprep with a small context, so a 224x224 image (64 tokens) does not fit."""
    with LiveServer(model=folder, served_model_name=[MODEL], max_model_len=48) as live:
        yield live


def rendered(server, body: dict, **headers: str) -> httpx.Response:
    return httpx.post(f"{server.url}/v1/chat/completions/render", json=body, headers=headers, timeout=60)


def test_a_prompt_over_the_context_is_refused_as_vllm_refuses_it(render):
    body = chat(image(png_data_url(224, 224)), {"type": "text", "text": "What is it?"})
    error = assert_error(rendered(render, body), 400, "context_length_exceeded", "messages")
    assert re.fullmatch(
        r"Input length \(\d+\) exceeds model's maximum context length \(48\)\.", error["message"]
    )
    long_text = chat({"type": "text", "text": "word " * 100})
    error = assert_error(rendered(render, long_text), 400, "context_length_exceeded")
    assert error["message"].startswith(
        "This model's maximum context length is 48 tokens. "
        "However, your prompt contains at least 49 input tokens"
    )


def test_max_tokens_defaults_to_what_the_prompt_leaves(render):
    answer = rendered(render, chat(image(png_data_url(56, 56)), {"type": "text", "text": "Hi"}))
    assert answer.status_code == 200, answer.text
    request = answer.json()
    assert request["sampling_params"]["max_tokens"] == 48 - len(request["token_ids"])
    asked = rendered(render, chat({"type": "text", "text": "Hi"}, max_tokens=3)).json()
    assert asked["sampling_params"]["max_tokens"] == 3
    over = rendered(render, chat({"type": "text", "text": "Hi"}, max_tokens=49))
    error = assert_error(over, 400, "invalid_request", "max_tokens")
    assert (
        error["message"]
        == "max_tokens=49 cannot be greater than max_model_len=48. Please request fewer output tokens."
    )


def test_the_request_id_and_parse_context_are_vllms(render, folder):
    body = chat({"type": "text", "text": "Hi"})
    assert rendered(render, body, **{"X-Request-Id": "bench-7"}).json()["request_id"] == "chatcmpl-bench-7"
    assert rendered(render, {**body, "request_id": "mine"}).json()["request_id"] == "chatcmpl-mine"
    assert re.fullmatch(r"chatcmpl-[0-9a-f]{16}", rendered(render, body).json()["request_id"])
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    history = {
        "role": "assistant",
        "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    }
    messages = [
        {"role": "user", "content": "Hi"},
        history,
        {"role": "tool", "tool_call_id": "1", "content": "ok"},
    ]
    body = {"model": MODEL, "messages": messages, "tools": tools, "max_tokens": 2}
    # tools under "auto" need the tool-call parser, as vLLM's render says
    assert_error(rendered(render, body), 400, "unsupported_field", "tool_choice")
    parsing = {"enable_auto_tool_choice": True, "tool_call_parser": "hermes", "max_model_len": 48}
    with LiveServer(model=folder, served_model_name=[MODEL], **parsing) as with_parser:
        request = rendered(with_parser, body).json()
    assert request["parse_context"] == {
        "tools": [
            {
                "type": "function",
                "function": {"name": "f", "description": None, "parameters": {"type": "object"}},
            }
        ],
        "tool_choice": "auto",  # vLLM's default when tools are given
        "parallel_tool_calls": True,
        "include_reasoning": True,
        "chat_template_kwargs": {"add_generation_prompt": True, "continue_final_message": False},
        "history_tool_call_cnt": 1,
    }


def test_generation_config_defaults_apply_as_vllms_auto(tmp_path):
    folder = make_model_folder("qwen2_vl", tmp_path / "m")
    config = json.loads((folder / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(json.dumps({**config, "max_new_tokens": 5, "top_k": 1}))
    with LiveServer(model=folder, served_model_name=[MODEL], max_model_len=4096) as live:
        params = rendered(live, chat({"type": "text", "text": "Hi"})).json()["sampling_params"]
    assert params["max_tokens"] == 5 and params["top_k"] == 1  # max_new_tokens below the context's room
    # Without generation_config.json, vLLM reads config.json's own sampling fields (transformers'
    # GenerationConfig.from_model_config): its top level, then its text_config.
    (folder / "generation_config.json").unlink()
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(
        json.dumps({**config, "temperature": 0.5, "text_config": {"top_p": 0.9}})
    )
    assert generation_defaults(folder) == {"temperature": 0.5, "top_p": 0.9}


def test_override_generation_config_is_laid_over_the_folders(tmp_path):
    """vllm serve --override-generation-config: over the folder's defaults, as vLLM's
    get_diff_sampling_param lays it; its skip_special_tokens is a request's default too
    (vLLM 0.33's render writes it, and the answer's text keeps the special tokens)."""
    folder = make_model_folder("qwen2_vl", tmp_path / "m")
    config = json.loads((folder / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(json.dumps({**config, "temperature": 0.5, "top_p": 0.9}))
    override = {"temperature": 0.2, "skip_special_tokens": False}
    settings = {"model": folder, "served_model_name": [MODEL], "override_generation_config": override}
    with LiveServer(**settings) as live:
        params = rendered(live, chat({"type": "text", "text": "Hi"})).json()["sampling_params"]
        asked = rendered(live, chat({"type": "text", "text": "Hi"}, skip_special_tokens=True)).json()
    assert params["temperature"] == 0.2 and params["top_p"] == 0.9
    assert params["skip_special_tokens"] is False
    assert "skip_special_tokens" not in asked["sampling_params"]  # the request's own: vLLM's default
    # vLLM's override_max_tokens: the override's max_new_tokens (or a --generation-config
    # folder's) caps the client's own max_tokens too
    with LiveServer(**{**settings, "override_generation_config": {"max_new_tokens": 3}}) as live:
        capped = rendered(live, chat({"type": "text", "text": "Hi"}, max_tokens=30)).json()
    elsewhere = tmp_path / "generation"
    elsewhere.mkdir()
    (elsewhere / "generation_config.json").write_text(json.dumps({"max_new_tokens": 4}))
    (folder / "generation_config.json").write_text(json.dumps({**config, "max_new_tokens": 4}))
    asked = chat({"type": "text", "text": "Hi"}, max_tokens=30)
    with LiveServer(model=folder, served_model_name=[MODEL], generation_config=str(elsewhere)) as live:
        by_folder = rendered(live, asked).json()
    with LiveServer(model=folder, served_model_name=[MODEL]) as live:
        by_auto = rendered(live, asked).json()
    assert capped["sampling_params"]["max_tokens"] == 3
    assert by_folder["sampling_params"]["max_tokens"] == 4
    assert by_auto["sampling_params"]["max_tokens"] == 30  # auto: the folder's is a default only
    with pytest.raises(ValueError, match="--override-generation-config only applies with --model"):
        Settings(override_generation_config={"temperature": 0.2})


@pytest.fixture(scope="module")
def upstream():
    server = VllmGenerateLike(model=MODEL, max_model_len=48)
    with ThreadServer(server.app) as running:
        server.url = running.url
        yield server


def test_chat_through_vllm_generate_is_refused_before_the_upstream(folder, upstream):
    settings = Settings(
        engine="vllm-generate",
        upstream_url=f"{upstream.url}/v1",
        upstream_model=MODEL,
        model=folder,
        served_model_name=[MODEL],
        max_model_len=48,
    )
    with LiveServer(settings) as live:
        answer = post(live, chat(image(png_data_url(224, 224)), {"type": "text", "text": "What is it?"}))
        fits = post(live, chat({"type": "text", "text": "Hi"}))
    error = assert_error(answer, 400, "context_length_exceeded", "messages")
    assert "exceeds model's maximum context length (48)" in error["message"]
    assert fits.status_code == 200, fits.text
    (sent,) = upstream.received  # only the prompt that fits reached vLLM
    assert sent["body"]["sampling_params"]["max_tokens"] == 48 - len(sent["body"]["token_ids"])
    assert re.fullmatch(r"chatcmpl-[0-9a-f]{16}", sent["body"]["request_id"])
