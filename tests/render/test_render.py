"""The prompt's token ids equal transformers', id for id: goldens made once with
transformers (tests/data/render/make_goldens.py) for Qwen2-VL, Qwen2.5-VL and Qwen3-VL,
checked here with the tokenizers library alone. Also the errors a request gets when the
template or its media do not fit."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mmprep.api.common.chat_protocol import parse_chat_request
from mmprep.core.errors import ServiceError
from mmprep.interface.prepared import TokenPrompt
from mmprep.model import ModelFolder, ModelFolderError, load_model_folder
from mmprep.processors.loading import PRESETS
from mmprep.render import Renderer, TemplateOptions
from tests.support.model_folder import make_model_folder, media_item

GOLDENS = json.loads((Path(__file__).parents[1] / "data" / "render" / "goldens.json").read_text())["cases"]
FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl")


@pytest.fixture(scope="session")
def renderers(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    return {
        family: Renderer(load_model_folder(str(make_model_folder(family, root / family))))
        for family in FAMILIES
    }


def render_case(renderer: Renderer, case: dict):
    media = [media_item(renderer.folder, spec, i) for i, spec in enumerate(case["media"])]
    return renderer.render(case["messages"], media, TemplateOptions(**case["options"])), media


@pytest.mark.parametrize("name", sorted(GOLDENS))
def test_token_ids_equal_transformers(name, renderers):
    case = GOLDENS[name]
    renderer = renderers[case["family"]]
    prompt, media = render_case(renderer, case)
    # our processors' grids are transformers' for the same frame sizes
    assert [item.processed.tensors[f"{item.kind}_grid_thw"][0].tolist() for item in media] == [
        spec["grid"] for spec in case["media"]
    ]
    assert prompt.text == case["text"]
    assert list(prompt.token_ids) == case["input_ids"]


@pytest.mark.parametrize("name", sorted(GOLDENS))
def test_placeholders_cover_each_item_in_order(name, renderers):
    case = GOLDENS[name]
    renderer = renderers[case["family"]]
    prompt, media = render_case(renderer, case)
    folder = renderer.folder
    assert [(p.modality, p.media_index) for p in prompt.placeholders] == [
        (m.kind, i) for i, m in enumerate(media)
    ]
    pads = {"image": folder.image_token_id, "video": folder.video_token_id}
    for placeholder, item in zip(prompt.placeholders, media, strict=True):
        span = prompt.token_ids[placeholder.offset : placeholder.offset + placeholder.length].tolist()
        assert span.count(pads[item.kind]) == item.processed.num_tokens
        assert (
            span[0] != pads[item.kind] or span[-1] == pads[item.kind]
        )  # pads only, or a whole Qwen3-VL block
    covered = sum(p.length for p in prompt.placeholders)
    all_pads = sum(prompt.token_ids.tolist().count(pad) for pad in pads.values())
    assert all_pads == sum(item.processed.num_tokens for item in media) and covered >= all_pads


def test_the_prompts_ids_are_one_read_only_uint32_array(renderers):
    """From the tokenizer's buffer to the answer without an int per token; a prompt made of
    a list of ids holds the same array, and equal prompts are equal."""
    renderer = renderers["qwen2_5_vl"]
    case = GOLDENS[sorted(name for name in GOLDENS if GOLDENS[name]["family"] == "qwen2_5_vl")[0]]
    prompt, _ = render_case(renderer, case)
    ids = prompt.token_ids
    assert ids.dtype == np.uint32 and ids.ndim == 1 and not ids.flags.writeable
    same = TokenPrompt(ids.tolist(), prompt.placeholders, prompt.text)
    assert same == prompt and same != TokenPrompt(ids[:-1], prompt.placeholders, prompt.text)
    mine = np.array([1, 2, 3], dtype=np.uint32)
    TokenPrompt(mine)
    assert mine.flags.writeable  # the caller's own array stays its own


def test_the_goldens_cover_what_the_issue_asks():
    names = {name.split("/")[1] for name in GOLDENS}
    assert {
        "text_only",
        "one_image",
        "one_video",
        "several",
        "multi_turn",
        "tools",
        "enable_thinking_false",
    } <= names
    assert {name.split("/")[0] for name in GOLDENS} == set(FAMILIES)


def test_qwen3_vl_video_has_a_time_and_a_wrapper_per_block(renderers):
    renderer = renderers["qwen3_vl"]
    prompt, media = render_case(renderer, GOLDENS["qwen3_vl/odd_frames_video"])
    decoded = renderer.folder.tokenizer.decode(list(prompt.token_ids), skip_special_tokens=False)
    # 5 frames at indices 0, 50, ..., 200 of 25 fps: blocks (0, 50) (100, 150) (200, 200)
    assert "<1.0 seconds><|vision_start|>" in decoded and "<5.0 seconds><|vision_start|>" in decoded
    assert "<8.0 seconds><|vision_start|>" in decoded


def test_kwargs_the_template_does_not_read_change_nothing(renderers):
    renderer = renderers["qwen3_vl"]
    messages = [{"role": "user", "content": "hi"}]
    plain = renderer.render_text(messages)
    assert (
        renderer.render_text(
            messages, TemplateOptions(chat_template_kwargs={"enable_thinking": False, "unrelated": 1})
        )
        == plain
    )
    assert "Picture 1:" in renderer.render_text(
        [{"role": "user", "content": [{"type": "image", "media_index": 0}]}],
        TemplateOptions(chat_template_kwargs={"add_vision_id": True}),
    )


def chat_request(messages: list[dict], **fields):
    """A chat request's body typed at the edge, as app/mmprep/api types it (the renderer's options)."""
    return parse_chat_request({"model": "m", "messages": messages, **fields})


@pytest.mark.parametrize(
    ("options", "param"),
    [
        ({"chat_template_kwargs": {"chat_template": 1}}, "chat_template_kwargs.chat_template"),
        ({"chat_template_kwargs": {"tools": "x"}}, "chat_template_kwargs.tools"),
        ({"chat_template_kwargs": {"documents": ["x"]}}, "documents"),
        ({"documents": "x"}, "documents"),
        ({"reasoning_effort": "lots"}, "reasoning_effort"),
        ({"chat_template_kwargs": "yes"}, "chat_template_kwargs"),
        ({"add_generation_prompt": "yes"}, "add_generation_prompt"),
        (
            {"continue_final_message": True},
            "continue_final_message",
        ),  # with add_generation_prompt's default true
        ({"tools": {"name": "x"}}, "tools"),
    ],
)
def test_bad_options_are_400s_naming_the_field(options, param):
    with pytest.raises(ServiceError) as caught:
        chat_request([{"role": "user", "content": "hi"}], **options)
    assert caught.value.status == 400 and caught.value.param == param
    assert caught.value.message.startswith(f"{param}: ")


@pytest.mark.parametrize(
    ("calls", "param"),
    [
        ("x", "messages[1].tool_calls"),
        ([None], "messages[1].tool_calls[0].function"),
        (
            [{"id": "1", "type": "function", "function": {"name": "f"}}],
            "messages[1].tool_calls[0].function.arguments",
        ),
        (
            [{"id": "1", "type": "function", "function": {"name": 3, "arguments": "{}"}}],
            "messages[1].tool_calls[0].function.name",
        ),
        (
            [{"type": "function", "function": {"name": "f", "arguments": "{}"}}],
            "messages[1].tool_calls[0].id",
        ),
        ([{"id": "1", "function": {"name": "f", "arguments": "{}"}}], "messages[1].tool_calls[0].type"),
    ],
)
def test_a_malformed_call_in_the_history_is_a_400_naming_its_field(calls, param):
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "", "tool_calls": calls}]
    with pytest.raises(ServiceError) as caught:
        chat_request(messages)
    assert caught.value.status == 400 and caught.value.param == param


def test_a_template_that_raises_is_a_400(renderers, tmp_path):
    folder = make_model_folder("qwen2_vl", tmp_path / "m", omit=("chat_template.json",))
    (folder / "chat_template.jinja").write_text(
        "{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('no tools here') }}{% endif %}"
        "{{ m.content }}{% endfor %}"
    )
    renderer = Renderer(load_model_folder(str(folder)))
    assert renderer.folder.chat_template_source == "chat_template.jinja"
    with pytest.raises(ServiceError) as caught:
        renderer.render_text([{"role": "tool", "content": "x"}])
    assert (
        caught.value.status == 400
        and caught.value.param == "messages"
        and "no tools here" in caught.value.message
    )


def test_more_media_than_placeholders_is_a_400(renderers):
    renderer = renderers["qwen2_vl"]
    case = GOLDENS["qwen2_vl/one_image"]
    media = [
        media_item(renderer.folder, case["media"][0], 0),
        media_item(renderer.folder, case["media"][0], 1),
    ]
    with pytest.raises(ServiceError) as caught:
        renderer.tokens(case["text"], media)
    assert caught.value.param == "messages" and "images: 1 in the prompt, 2 sent" in caught.value.message


def test_a_pad_token_typed_in_text_does_not_shift_the_media(renderers):
    renderer = renderers["qwen2_vl"]
    with pytest.raises(ServiceError) as caught:
        renderer.render([{"role": "user", "content": "look: <|image_pad|>"}], [])
    assert caught.value.code == "placeholder_mismatch"


# Each template with the format vLLM 0.33.0's own _detect_content_format (vllm/renderers/hf.py)
# gave it, run in the render venv (scripts/vllm_venv.sh).
MACRO = "{% macro r(c) %}{% for p in c %}x{% endfor %}{% endmacro %}"
CONTENT_FORMATS = [
    ("{% for m in messages %}{{ m['content'] }}{% endfor %}", "string"),
    ("{% for m in messages %}{% for p in m['content'] %}{{ p.text }}{% endfor %}{% endfor %}", "openai"),
    (
        "{% for m in messages %}{% for p in m.content | selectattr('type') %}x{% endfor %}{% endfor %}",
        "openai",
    ),
    # an item of the messages is not bound to them (0.33; earlier vLLMs said "openai")
    ("{% set first = messages[0] %}{% for p in first.content %}x{% endfor %}", "string"),
    # a macro's parameter that a call passes a message's content (Qwen3.5's render_content)
    (MACRO + "{% for m in messages %}{{ r(m.content) }}{% endfor %}", "openai"),
    (MACRO + "{% for m in messages %}{{ r(c=m['content']) }}{% endfor %}", "openai"),
    (MACRO + "{% for m in messages %}{{ r('x') }}{% endfor %}", "string"),
    (
        "{% for m in messages %}{% set content = m.content %}{% for p in content %}x{% endfor %}{% endfor %}",
        "openai",
    ),
    ("{% for content in stuff %}x{% endfor %}{% for p in content %}y{% endfor %}", "openai"),  # any `content`
    ("{% macro r(content) %}{% for p in content %}x{% endfor %}{% endmacro %}{{ r('x') }}", "string"),
    (
        "{% set ns = namespace(rest=messages) %}{% for m in ns.rest %}{% for p in m.content %}x{% endfor %}"
        "{% endfor %}",
        "openai",
    ),
    (
        "{% set msgs = messages[1:] %}{% for m in msgs %}{% for p in m.content %}x{% endfor %}{% endfor %}",
        "openai",
    ),
    (
        "{% set ns = namespace(x=1) %}{% set ns.rest = messages %}{% for m in ns.rest %}"
        "{% for p in m.content %}x{% endfor %}{% endfor %}",
        "openai",
    ),
    ("{% for m in messages %}{% for a, b in m.content %}x{% endfor %}{% endfor %}", "string"),  # vLLM fails
]


@pytest.mark.parametrize(("template", "expected"), CONTENT_FORMATS)
def test_the_content_format_is_detected_as_vllm_does(template, expected):
    from mmprep.render import compile_template, detect_content_format

    assert detect_content_format(compile_template(template).ast) == expected


def test_the_qwen_templates_take_parts(renderers, tmp_path):
    assert {renderer.content_format for renderer in renderers.values()} == {"openai"}
    qwen3_5 = Renderer(ModelFolder.load(make_model_folder("qwen3_5", tmp_path / "qwen3_5")))
    assert qwen3_5.content_format == "openai"  # through its render_content macro


def test_a_string_template_gets_the_text_joined_with_the_placeholders_first(tmp_path):
    folder = make_model_folder("qwen2_vl", tmp_path / "m", omit=("chat_template.json",))
    (folder / "chat_template.jinja").write_text("{% for m in messages %}[{{ m['content'] }}]{% endfor %}")
    renderer = Renderer(load_model_folder(str(folder)))
    content = [
        {"type": "text", "text": "a"},
        {"type": "image", "media_index": 0},
        {"type": "text", "text": "b"},
    ]
    assert renderer.render_text([{"role": "user", "content": content}]) == (
        "[<|vision_start|><|image_pad|><|vision_end|>\na\nb]"
    )


# -- messages as vLLM reads them (vllm/renderers/chat_utils, OnlineRenderer) --


def _history(arguments):
    return [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get", "arguments": arguments}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]


@pytest.mark.parametrize("arguments", ["", "null", "not json {", "[1, 2]", "42"])
def test_tool_call_arguments_that_are_no_object_render_as_an_empty_one(renderers, arguments):
    # vLLM's _postprocess_messages: "" and "null" are {}; so is text that is not a JSON object
    # (a warning, not a 400: the call is history, and a 400 would fail every later turn)
    renderer = renderers["qwen3_vl"]
    rendered = renderer.render_text(_history(arguments))
    assert rendered == renderer.render_text(_history("{}"))
    assert '<tool_call>\n{"name": "get", "arguments": {}}\n</tool_call>' in rendered
    assert '"arguments": {"city": "Paris"}}' in renderer.render_text(_history('{"city": "Paris"}'))


def test_a_tool_message_renders_as_vllm_renders_it(renderers):
    renderer = renderers["qwen3_vl"]
    with_id = _history("{}")
    without_id = [*with_id[:2], {"role": "tool", "content": "sunny"}]  # accepted: vLLM's custom message
    assert renderer.render_text(without_id) == renderer.render_text(with_id)
    # text parts joined with a line break, as vLLM joins them (the template alone would not)
    parts = [
        *with_id[:2],
        {"role": "tool", "content": [{"type": "text", "text": "sun"}, {"type": "text", "text": "ny"}]},
    ]
    assert "<tool_response>\nsun\nny\n</tool_response>" in renderer.render_text(parts)


def test_an_empty_tool_call_list_takes_the_plain_assistant_path(renderers):
    renderer = renderers["qwen3_vl"]
    plain = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert renderer.render_text([plain[0], {**plain[1], "tool_calls": []}]) == renderer.render_text(plain)


def test_a_call_of_another_type_is_a_400_naming_it():
    messages = _history("{}")
    messages[1]["tool_calls"][0]["type"] = "custom"
    with pytest.raises(ServiceError) as caught:
        chat_request(messages)
    assert caught.value.status == 400 and caught.value.param == "messages[1].tool_calls[0].type"


@pytest.mark.parametrize(
    ("options", "param"),
    [
        ({"chat_template": "{{ 'mine' }}"}, "chat_template"),
        ({"chat_template_kwargs": {"chat_template": "{{ 'mine' }}"}}, "chat_template_kwargs.chat_template"),
    ],
)
def test_a_requests_own_template_is_refused_unless_trusted(renderers, options, param):
    with pytest.raises(ServiceError) as caught:
        renderers["qwen3_vl"].render_text([{"role": "user", "content": "hi"}], TemplateOptions(**options))
    assert (caught.value.status, caught.value.param) == (400, param)
    assert "--trust-request-chat-template is not set" in caught.value.message  # vLLM's words


def test_a_trusted_request_template_is_used_as_vllm_uses_it(renderers):
    trusted = Renderer(renderers["qwen3_vl"].folder, trust_request_chat_template=True)
    messages = [{"role": "user", "content": "hi"}]
    mine = "{% for m in messages %}[{{ m.content }}]{% endfor %}{% if flavour %}{{ flavour }}{% endif %}"
    assert trusted.render_text(messages, TemplateOptions(chat_template=mine)) == "[hi]"
    # chat_template_kwargs reach it where it reads them; tokenize changes nothing
    kwargs = {"flavour": "!", "enable_thinking": False, "tokenize": True}
    assert (
        trusted.render_text(messages, TemplateOptions(chat_template=mine, chat_template_kwargs=kwargs))
        == "[hi]!"
    )
    # chat_template_kwargs' template where the top level gives none, the top level's over it
    assert (
        trusted.render_text(messages, TemplateOptions(chat_template_kwargs={"chat_template": mine})) == "[hi]"
    )
    top = TemplateOptions(chat_template="top", chat_template_kwargs={"chat_template": mine})
    assert trusted.render_text(messages, top) == "top"
    # and for a request with tools too (vLLM's first choice, before the tokenizer's)
    assert (
        trusted.render_text(
            messages,
            TemplateOptions(chat_template=mine, tools=[{"type": "function", "function": {"name": "f"}}]),
        )
        == "[hi]"
    )
    # the folder's own when the request brings none
    assert trusted.render_text(messages) == renderers["qwen3_vl"].render_text(messages)


@pytest.mark.parametrize(
    ("template", "says"),
    [
        (3, "chat_template: Input should be a valid string"),
        ("{% for m in messages %}\n{{ m }", "does not compile: line 2"),
    ],
)
def test_a_trusted_template_that_cannot_be_used_is_a_400(renderers, template, says):
    """A template that is no string is refused at the edge (the request's type), one that does
    not compile by the renderer."""
    trusted = Renderer(renderers["qwen3_vl"].folder, trust_request_chat_template=True)
    with pytest.raises(ServiceError) as caught:
        messages = [{"role": "user", "content": "hi"}]
        trusted.render_text(messages, chat_request(messages, chat_template=template).template_options())
    assert (caught.value.status, caught.value.param) == (
        400,
        "chat_template",
    ) and says in caught.value.message


@pytest.mark.parametrize("source", ["chat_template.json", "chat_template.jinja", "tokenizer_config.json"])
def test_a_folder_template_that_does_not_compile_is_refused_naming_file_and_line(tmp_path, source):
    folder = make_model_folder("qwen2_vl", tmp_path / "m", omit=("chat_template.json",))
    bad = "{% for m in messages %}\n{{ m.content }\n{% endfor %}"
    if source == "chat_template.jinja":
        (folder / source).write_text(bad)
    else:
        config = (
            json.loads((PRESETS / "qwen2_vl" / source).read_text()) if source != "chat_template.json" else {}
        )
        (folder / source).write_text(json.dumps({**config, "chat_template": bad}))
    with pytest.raises(
        ModelFolderError, match=rf"{folder / source}: the chat template does not compile: line 2 of"
    ):
        Renderer(ModelFolder.load(folder))
