"""vllm serve's flags that change an answer, on a real mmprep server on loopback called by the
official openai client (docs/vllm-flags.md's rows marked taken)."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from tests.support.chat import MODEL, data_url, image, openai_client, png_data_url, video
from tests.support.media import MEDIA
from tests.support.model_folder import make_model_folder
from tests.support.servers import AppProcess, LiveServer

VIDEO = data_url(MEDIA / "224p_6_vp9.webm", "video/webm")


def account(client, *parts, **extra) -> dict:
    answer = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": list(parts)}], **extra
    )
    return json.loads(answer.choices[0].message.content)


def test_limit_mm_per_prompt_refuses_more_items_naming_the_modality_and_limit():
    with LiveServer(limit_mm_per_prompt={"image": 1, "video": 0}) as server:
        client = openai_client(server)
        one = image(png_data_url(8, 8))
        assert len(account(client, one)["media"]) == 1
        with pytest.raises(openai.BadRequestError) as refused:
            account(client, one, one)
        assert refused.value.code == "too_many_media_parts"
        assert "At most 1 image(s) may be provided in one prompt" in refused.value.message
        with pytest.raises(openai.BadRequestError, match="At most 0 video"):
            account(client, video(VIDEO))


def test_media_io_kwargs_are_the_servers_video_options_under_the_requests():
    with LiveServer(media_io_kwargs={"video": {"num_frames": 3}}) as server:
        client = openai_client(server)
        assert account(client, video(VIDEO))["media"][0]["indices"] == [0, 2, 5]
        asked = account(client, video(VIDEO), extra_body={"media_io_kwargs": {"video": {"fps": 1.0}}})
        assert asked["media"][0]["timestamps"] == [0.0, 1.0, 2.0]  # the request's fps replaces num_frames
        assert account(client, video(VIDEO, num_frames=2))["media"][0]["indices"] == [0, 5]


def test_mm_processor_kwargs_lie_under_the_requests_key_by_key():
    server_kwargs = {"min_pixels": 1, "videos_kwargs": {"a": 1, "b": 2}}
    with LiveServer(mm_processor_kwargs=server_kwargs) as server:
        client = openai_client(server)
        said = account(client, {"type": "text", "text": "hi"})
        assert said["mm_processor_kwargs"] == server_kwargs
        said = account(
            client,
            {"type": "text", "text": "hi"},
            extra_body={"mm_processor_kwargs": {"min_pixels": 2, "videos_kwargs": {"b": 3}}},
        )
        assert said["mm_processor_kwargs"] == {"min_pixels": 2, "videos_kwargs": {"a": 1, "b": 3}}


def test_force_include_usage_ends_every_stream_with_its_usage():
    with LiveServer(enable_force_include_usage=True) as server:
        client = openai_client(server)
        chunks = list(
            client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "hello"}], stream=True
            )
        )
        assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0
        completion = list(client.completions.create(model=MODEL, prompt="hello", stream=True))
        assert completion[-1].usage is not None
    with LiveServer() as server:  # without it, as OpenAI: no usage unless asked
        chunks = list(
            openai_client(server).chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "hello"}], stream=True
            )
        )
        assert all(chunk.usage is None for chunk in chunks)


TEMPLATE = "{% for m in messages %}USER:{{ m['content'] }}\n{% endfor %}"


@pytest.mark.parametrize(
    ("content_format", "text"),
    [("auto", "USER:hi\n"), ("string", "USER:hi\n"), ("openai", "USER:[{'type': 'text', 'text': 'hi'}]\n")],
)
def test_chat_template_inline_or_a_file_and_its_content_format(tmp_path, content_format, text):
    folder = make_model_folder("qwen2_5_vl", tmp_path / "model")
    template_file = tmp_path / "template.jinja"
    template_file.write_text(TEMPLATE)
    for given in (TEMPLATE, str(template_file)):
        settings = dict(model=folder, chat_template=given, chat_template_content_format=content_format)
        with LiveServer(served_model_name=[MODEL], **settings) as server:
            body = {
                "model": MODEL,
                "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
            }
            tokens = httpx.post(f"{server.url}/tokenize", json=body, timeout=30).json()["tokens"]
            said = httpx.post(f"{server.url}/detokenize", json={"model": MODEL, "tokens": tokens}, timeout=30)
            assert said.json()["prompt"] == text
            prompt = account(openai_client(server), {"type": "text", "text": "hi"})["prompt"]
            assert prompt["tokens"] == len(tokens)


@pytest.mark.slow
def test_a_vllm_serve_command_line_runs_as_mmprep_serve(tmp_path):
    """`python -m mmprep serve FOLDER` with vLLM's spellings: positional model, several keys
    after one flag, JSON flags, vLLM's negative spelling, a flag that is always so."""
    folder = make_model_folder("qwen2_5_vl", tmp_path / "model")
    args = [str(folder), "--api-key", "k1", "k2", "--limit-mm-per-prompt", '{"image": 1}']
    args += ["--served-model-name", MODEL, "--disable-log-requests", "--trust-request-mm-kwargs"]
    args += ["--max-model-len", "4k", "--uvicorn-log-level", "warning"]
    args += [
        "--generation-config",
        "vllm",
        "--return-tokens-as-token-ids",
        "--mm-processor-kwargs",
        '{"max_pixels": 50000}',
    ]
    with AppProcess("serve", *args) as server:
        assert httpx.get(f"{server.url}/health", timeout=10).status_code == 200
        with pytest.raises(openai.AuthenticationError):
            account(openai_client(server), {"type": "text", "text": "hi"})
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="k2", max_retries=0)
        assert account(client, {"type": "text", "text": "hi"})["prompt"]["tokens"] > 0
        one = image(png_data_url(8, 8))
        with pytest.raises(openai.BadRequestError, match="At most 1 image"):
            account(client, one, one)
