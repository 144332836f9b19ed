"""`mmprep serve --model FOLDER`: a model folder read once (tokenizer, chat template by
transformers' precedence, config ids, EOS ids, special tokens, processor), refused at start
naming the file it lacks; through HTTP, the echo engine's account and usage count the
rendered prompt's tokens."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from mmprep import families
from mmprep.decoders import decode_video
from mmprep.model import ModelFolder, ModelFolderError
from mmprep.preprocess.loader_picks import LoaderPicks
from mmprep.processors import load_processor
from mmprep.render import Renderer, TemplateOptions
from tests.support.chat import ask, assert_error, data_url, openai_client, post, video
from tests.support.cli import run_mmprep
from tests.support.media import MEDIA
from tests.support.model_folder import make_model_folder, video_item
from tests.support.servers import AppProcess, LiveServer

WEBM = MEDIA / "224p_6_vp9.webm"


@pytest.fixture(scope="module")
def qwen3_folder(tmp_path_factory):
    return make_model_folder("qwen3_vl", tmp_path_factory.mktemp("m") / "Qwen3-VL-Test")


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen2_5_vl", "qwen3_vl"])
def test_a_family_folder_loads_its_ids_tokens_and_processor(family, tmp_path):
    folder = ModelFolder.load(make_model_folder(family, tmp_path / family))
    assert folder.family == folder.model_type == family
    assert (folder.image_token_id, folder.video_token_id) == (151655, 151656)
    assert (folder.vision_start_token_id, folder.vision_end_token_id) == (151652, 151653)
    assert folder.eos_token_ids == (151645, 151643)
    assert folder.chat_template_source == "chat_template.json"
    assert folder.processor.family == family
    assert folder.added_tokens[151645].content == "<|im_end|>" and 151645 in folder.special_token_ids
    assert folder.template_tokens == {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
    if family != "qwen2_vl":  # tool calls (and Qwen3's thinking) survive skip_special_tokens
        assert folder.added_tokens[151657].content == "<tool_call>" and 151657 not in folder.special_token_ids
    if family == "qwen3_vl":
        assert folder.added_tokens[151667].content == "<think>" and 151667 not in folder.special_token_ids


@pytest.mark.parametrize("preset", ["qwen3_5", "qwen3_5_moe"])
def test_a_qwen3_5_folder_loads_its_ids_from_its_own_vocabulary(preset, tmp_path):
    """Qwen3.5 / 3.6: Qwen3-VL's processor, a vocabulary of 248,044 with the special tokens
    after it, the template as chat_template.jinja, no generation_config.json (the 9B publishes
    none): generation stops on config.json's EOS, and the tokenizer's own (model_facts)."""
    folder = ModelFolder.load(make_model_folder(preset, tmp_path / preset))
    assert (folder.family, folder.model_type, folder.processor.family) == ("qwen3_5", preset, "qwen3_5")
    assert (folder.image_token_id, folder.video_token_id) == (248056, 248057)
    assert (folder.vision_start_token_id, folder.vision_end_token_id) == (248053, 248054)
    assert folder.eos_token_ids == (248044,)
    assert folder.tokenizer.token_to_id(folder.template_tokens["eos_token"]) == 248046
    assert folder.chat_template_source == "chat_template.jinja"
    assert folder.added_tokens[248058].content == "<tool_call>" and 248058 not in folder.special_token_ids
    assert folder.added_tokens[248068].content == "<think>" and 248068 not in folder.special_token_ids
    assert folder.added_tokens[248076].content == "<|audio_pad|>" and 248076 in folder.special_token_ids
    assert folder.encode("hello <|im_start|>")[-1] == 248045


def test_the_chat_template_is_found_as_transformers_finds_it(tmp_path):
    folder = make_model_folder("qwen2_vl", tmp_path / "m")
    (folder / "chat_template.jinja").write_text("jinja")
    assert (
        ModelFolder.load(folder).chat_template_source == "chat_template.json"
    )  # the processor's legacy file first
    (folder / "chat_template.json").unlink()
    assert ModelFolder.load(folder).chat_template == "jinja"
    (folder / "chat_template.jinja").unlink()
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(
        json.dumps({**config, "chat_template": "from the tokenizer"})
    )
    loaded = ModelFolder.load(folder)
    assert (loaded.chat_template, loaded.chat_template_source) == (
        "from the tokenizer",
        "tokenizer_config.json",
    )
    (folder / "processor_config.json").write_text(json.dumps({"chat_template": "from the processor config"}))
    assert ModelFolder.load(folder).chat_template == "from the processor config"


@pytest.mark.parametrize(
    ("omit", "says"),
    [
        ("config.json", "has no config.json"),
        ("tokenizer.json", "has no tokenizer.json"),
        ("chat_template.json", "has no chat template"),
        ("preprocessor_config.json", "preprocessor_config.json"),
    ],
)
def test_a_folder_missing_a_file_is_refused_naming_it(omit, says, tmp_path):
    folder = make_model_folder("qwen2_5_vl", tmp_path / "m", omit=(omit,))
    with pytest.raises(ModelFolderError, match=says):
        ModelFolder.load(folder)


def test_a_processor_of_another_family_is_refused(tmp_path):
    folder = make_model_folder("qwen2_vl", tmp_path / "m")
    with pytest.raises(
        ModelFolderError, match=r"the processor \(qwen3_vl\) is not the model's family \(qwen2_vl"
    ):
        ModelFolder.load(folder, processor="qwen3_vl")
    assert ModelFolder.load(folder, processor="Qwen/Qwen2-VL-2B-Instruct").processor.family == "qwen2_vl"


@pytest.mark.slow  # `python -m mmprep serve` as a process
def test_serve_with_a_folder_missing_a_file_stops_and_names_it(tmp_path):
    folder = make_model_folder("qwen3_vl", tmp_path / "m", omit=("tokenizer.json",))
    result = run_mmprep("serve", "--model", str(folder))
    assert result.returncode == 2 and "has no tokenizer.json" in result.stderr


@pytest.mark.slow  # a `mmprep serve` process
def test_serve_model_renders_the_prompt_and_the_echo_counts_its_tokens(qwen3_folder):
    # About 10 s on 2 cores: a real `mmprep serve` process (imports, the 7 MB tokenizer, its
    # fast encoder) and the Qwen3-VL processing of the same frames here, for the expected ids.
    with AppProcess("serve", "--model", str(qwen3_folder)) as server:
        models = httpx.get(f"{server.url}/v1/models").json()
        assert [m["id"] for m in models["data"]] == ["Qwen3-VL-Test"]  # the folder's name
        content = [
            video(data_url(WEBM, "video/webm"), num_frames=4),
            {"type": "text", "text": "What happens?"},
        ]
        text, _, usage = ask(openai_client(server), content, model="Qwen3-VL-Test")
    answer = json.loads(text)
    # the same prompt, rendered here from the same frames' grid and the decoder's metadata:
    # the frames vLLM's Qwen3-VL loader takes (2 a second, whatever num_frames says)
    folder = ModelFolder.load(qwen3_folder)
    family = families.get("qwen3_vl")
    decoded = decode_video(
        WEBM.read_bytes(),
        max_pixels=1920 * 1080,
        frame_picks=LoaderPicks(family, families.FramesAsked(2.0, None, 768, 2.0), 768),
    )
    assert len(decoded.frames) != 4
    item = video_item(decoded, load_processor(folder.path))
    messages = [
        {
            "role": "user",
            "content": [{"type": "video", "media_index": 0}, {"type": "text", "text": "What happens?"}],
        }
    ]
    expected = Renderer(folder).render(messages, [item])
    assert answer["prompt"]["tokens"] == usage.prompt_tokens == len(expected.token_ids)
    assert answer["prompt"]["placeholders"] == [
        {
            "modality": "video",
            "media_index": 0,
            "offset": expected.placeholders[0].offset,
            "length": expected.placeholders[0].length,
        }
    ]
    assert answer["media"][0]["processed"]["num_tokens"] == item.processed.num_tokens


def test_a_request_the_template_cannot_take_is_a_400_before_any_fetch(qwen3_folder):
    with LiveServer(model=qwen3_folder) as server:
        body = {
            "model": "Qwen3-VL-Test",
            "messages": [{"role": "user", "content": "hi"}],
            "add_generation_prompt": True,
            "continue_final_message": True,
        }
        assert_error(post(server, body), 400, param="continue_final_message")
        body = {
            "model": "Qwen3-VL-Test",
            "messages": [{"role": "user", "content": "hi"}],
            "chat_template_kwargs": {"chat_template": "{{ messages }}"},
        }
        assert_error(post(server, body), 400, param="chat_template_kwargs.chat_template")
        response = post(server, {"model": "Qwen3-VL-Test", "messages": [{"role": "user", "content": "hi"}]})
        assert response.status_code == 200
        timing = dict(item.strip().split(";dur=") for item in response.headers["server-timing"].split(","))
        assert {"render", "preprocess"} <= set(timing) and float(timing["render"]) <= float(
            timing["preprocess"]
        )


def test_a_request_with_tools_gets_the_tokenizers_template_as_vllm_gives_it(tmp_path):
    folder = make_model_folder("qwen2_vl", tmp_path / "m")
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {
                **config,
                "chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}"
                "{{ tools | length }} tools",
            }
        )
    )
    renderer = Renderer(ModelFolder.load(folder))
    messages = [{"role": "user", "content": "hi"}]
    assert renderer.render_text(messages).startswith("<|im_start|>system")  # chat_template.json's
    assert (
        renderer.render_text(
            messages, TemplateOptions(tools=[{"type": "function", "function": {"name": "f"}}])
        )
        == "hi1 tools"
    )
    # the Qwen-VL folders carry no second template: the same one either way
    plain = Renderer(ModelFolder.load(make_model_folder("qwen3_vl", tmp_path / "q")))
    assert plain.tools_template is plain.template


def _render(server, body: dict) -> httpx.Response:
    return httpx.post(f"{server.url}/v1/chat/completions/render", json=body, timeout=60)


def test_tool_call_arguments_and_tool_messages_over_http_as_vllm_reads_them(qwen3_folder):
    def history(arguments, tool_message):
        call = {"id": "c1", "type": "function", "function": {"name": "get", "arguments": arguments}}
        return {
            "model": "Qwen3-VL-Test",
            "messages": [
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "content": "", "tool_calls": [call]},
                tool_message,
            ],
        }

    answered = {"role": "tool", "tool_call_id": "c1", "content": "sunny"}
    with LiveServer(model=qwen3_folder) as server:
        expected = _render(server, history("{}", answered)).json()["token_ids"]
        text = ModelFolder.load(qwen3_folder).tokenizer.decode(expected, skip_special_tokens=False)
        assert '"arguments": {}}' in text
        # "", "null" and text that is not JSON are {} to vLLM: the same ids, each a 200
        for arguments in ("", "null", "not json {"):
            response = _render(server, history(arguments, answered))
            assert response.status_code == 200 and response.json()["token_ids"] == expected, arguments
        # a tool message without tool_call_id is accepted and rendered as vLLM renders it
        without_id = _render(server, history("{}", {"role": "tool", "content": "sunny"}))
        assert without_id.status_code == 200 and without_id.json()["token_ids"] == expected
        client = openai_client(server)
        answer = client.chat.completions.create(**history("", {"role": "tool", "content": "sunny"}))
        assert json.loads(answer.choices[0].message.content)["prompt"]["tokens"] == len(expected)


def test_a_requests_chat_template_needs_trust_request_chat_template(qwen3_folder):
    import openai

    messages = [{"role": "user", "content": "hi"}]
    mine = "{% for m in messages %}<|im_start|>{{ m.content }}{% endfor %}"
    with LiveServer(model=qwen3_folder) as server:
        with pytest.raises(openai.BadRequestError) as caught:
            openai_client(server).chat.completions.create(
                model="Qwen3-VL-Test", messages=messages, extra_body={"chat_template": mine}
            )
        error = caught.value.body
        assert error["param"] == "chat_template" and "--trust-request-chat-template" in error["message"]
        body = {
            "model": "Qwen3-VL-Test",
            "messages": messages,
            "chat_template_kwargs": {"chat_template": mine},
        }
        assert_error(_render(server, body), 400, param="chat_template_kwargs.chat_template")
    with LiveServer(model=qwen3_folder, trust_request_chat_template=True) as server:
        rendered = _render(server, {"model": "Qwen3-VL-Test", "messages": messages, "chat_template": mine})
        assert rendered.status_code == 200, rendered.text
        folder = ModelFolder.load(qwen3_folder)
        assert rendered.json()["token_ids"] == folder.encode("<|im_start|>hi")
        assert (
            _render(server, {"model": "Qwen3-VL-Test", "messages": messages, "chat_template": 3}).status_code
            == 400
        )


def test_trust_request_chat_template_needs_a_model_folder():
    from mmprep.core.config import Settings

    with pytest.raises(ValueError, match="--trust-request-chat-template only applies with --model"):
        Settings(trust_request_chat_template=True)


def test_a_folder_as_the_hub_publishes_it_loads(tmp_path):
    # Qwen3-VL-8B-Instruct's processor configs as a fast processor writes them (nulls and
    # steps left off among them): --model takes the folder, with the published processor
    folder = make_model_folder("qwen3_vl", tmp_path / "Qwen3-VL-8B-Instruct")
    hub = Path(__file__).parents[1] / "data" / "processors" / "Qwen3-VL-8B-Instruct"
    for name in ("preprocessor_config.json", "video_preprocessor_config.json"):
        (folder / name).write_bytes((hub / name).read_bytes())
    loaded = ModelFolder.load(folder)
    published = load_processor("Qwen/Qwen3-VL-8B-Instruct")
    assert (loaded.processor.image_config, loaded.processor.video_config) == (
        published.image_config,
        published.video_config,
    )


@pytest.mark.slow  # `python -m mmprep serve` as a process
def test_serve_with_a_template_that_does_not_compile_stops_naming_file_and_line(tmp_path):
    folder = make_model_folder("qwen3_vl", tmp_path / "m")
    template = json.loads((folder / "chat_template.json").read_text())
    template["chat_template"] = "{% for m in messages %}\n{{ m.content }\n{% endfor %}"
    (folder / "chat_template.json").write_text(json.dumps(template))
    result = run_mmprep("serve", "--model", str(folder))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"mmprep: invalid model: --model {folder}: {folder.resolve() / 'chat_template.json'}: the chat "
        "template does not compile: line 2 of the template: unexpected '}'"
    ]
