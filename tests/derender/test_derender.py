"""app/mmprep/derender on the replayed fixtures: the real Qwen3 vocabulary's token ids, fed at
20, 5, 2 and 1 token per engine output, give the expected answer, streamed or whole,
and the stream's steps add up to the whole answer. Then each stage on its own: the
detokenizer against tokenizer.decode, the stop checker's hold-back, the parsers'
edges."""

from __future__ import annotations

import json

import pytest

from mmprep.api.common.chat_answers import Answer, CompletionBuilder
from mmprep.api.common.chat_protocol import parse_chat_request
from mmprep.derender import Derendering, OutputOptions
from mmprep.derender.detokenize import Detokenizer
from mmprep.derender.stops import StopChecker, StopRules
from mmprep.interface.engine import EngineError, EngineOutput
from mmprep.interface.prepared import SamplingParams
from tests.support.derender_fixtures import (
    CHUNK_SIZES,
    EOS_IDS,
    assert_message,
    derendering,
    facts,
    fixture_names,
    load,
    replay,
    tokenizer,
)


@pytest.mark.parametrize("chunk", CHUNK_SIZES)
@pytest.mark.parametrize("name", fixture_names())
def test_a_fixture_gives_its_expected_answer_at_every_chunk_size(name, chunk):
    fixture = load(name)
    assert tokenizer().decode(fixture["token_ids"], skip_special_tokens=False) == fixture["text"]
    check_answer(fixture, chunk, fixture["expected"])


PARSING_TOOLS = [name for name in fixture_names() if "tool_call_parser" in load(name)["server"]]


@pytest.mark.parametrize("chunk", CHUNK_SIZES)
@pytest.mark.parametrize("name", PARSING_TOOLS)
def test_with_partial_tool_calls_a_fixture_gives_its_partial_answer(name, chunk):
    """--stream-partial-tool-calls: a call is shown as it is written, so one that breaks
    after its first whole argument stays a call (the fixture's `partial`); every other
    answer is the default's."""
    fixture = load(name)
    check_answer(fixture, chunk, fixture.get("partial", fixture["expected"]), partial=True)


def check_answer(fixture: dict, chunk: int, expected: dict, partial: bool = False) -> None:
    deltas, derender = replay(fixture, chunk, partial)
    answer = Answer(derender.reasoning, derender.logprobs)
    for delta in deltas:
        answer.add(delta)
    completion = CompletionBuilder("r", "m").answer(answer, derender.finish_reason, derender.stop_reason, {})
    choice = completion["choices"][0]
    assert_message(choice["message"], expected["message"])
    assert choice["finish_reason"] == expected["finish_reason"]
    assert choice["stop_reason"] == expected.get("stop_reason")
    if "logprobs" in expected:
        assert choice["logprobs"] == {"content": expected["logprobs"]}
    else:
        assert choice["logprobs"] is None


@pytest.mark.parametrize("name", fixture_names())
def test_no_piece_of_a_stream_holds_a_broken_character(name):
    deltas, _ = replay(load(name), 1)
    for delta in deltas:
        for text in (delta.content, delta.reasoning, *(call.arguments for call in delta.tool_calls)):
            assert "\ufffd" not in text


# -- the detokenizer ------------------------------------------------------------------------

TEXTS = [
    "Grüße aus Köln! 你好，世界。🎉👩‍👩‍👧🇫🇷",
    '<think>\nhm</think>\n\n<tool_call>\n{"a": 1}\n</tool_call><|im_end|>',
    "  leading spaces, \ttabs\n\nand 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ∮ E⋅da = Q",
    "<|vision_start|><|image_pad|><|image_pad|><|vision_end|>text<|im_end|><|endoftext|>",
]


@pytest.mark.parametrize("skip", [True, False])
@pytest.mark.parametrize("text", TEXTS)
def test_the_pieces_of_every_prefix_add_up_to_decode(text, skip):
    ids = tokenizer().encode(text).ids
    detokenizer, pieces = Detokenizer(tokenizer(), skip_special_tokens=skip), []
    for n, token_id in enumerate(ids, 1):
        pieces.append(detokenizer.step(token_id))
        whole = tokenizer().decode(ids[:n], skip_special_tokens=skip)
        if "\ufffd" not in whole:  # a prefix that ends inside a character: held, not broken
            assert "".join(pieces) == whole
    pieces.append(detokenizer.flush())
    assert "".join(pieces) == tokenizer().decode(ids, skip_special_tokens=skip)


def test_an_unfinished_character_at_the_end_is_dropped_not_sent_broken():
    ids = tokenizer().encode("a🎉").ids[:-1]  # the emoji's last byte never comes
    detokenizer = Detokenizer(tokenizer())
    text = "".join(detokenizer.step(i) for i in ids)
    assert text == "a"
    assert detokenizer.flush() == ""  # as vLLM: decode would say "a\ufffd"


def test_special_tokens_kept_without_spaces_between_them():
    ids = tokenizer().encode("<|vision_start|><|image_pad|><|vision_end|>").ids
    detokenizer = Detokenizer(tokenizer(), skip_special_tokens=False, spaces_between_special_tokens=False)
    assert "".join(detokenizer.step(i) for i in ids) == "<|vision_start|><|image_pad|><|vision_end|>"


# -- stop conditions ----------------------------------------------------------------------


def shown_per_token(text: str, **rules) -> tuple[list[str], StopChecker]:
    checker = StopChecker(StopRules(eos_token_ids=EOS_IDS, **rules), Detokenizer(tokenizer()))
    shown = []
    for token_id in tokenizer().encode(text).ids:
        shown.append(checker.push(token_id))
        if checker.finish_reason:
            break
    else:
        shown.append(checker.flush())
    return shown, checker


def test_text_is_held_back_only_while_it_could_start_a_stop_string():
    shown, checker = shown_per_token("Do not STOP here", stop=("STOP NOW",))
    # "Do", " not", " STOP", " here": "STOP" could begin "STOP NOW" until " here" comes
    assert shown == ["Do", " not", " ", "STOP here", ""]
    assert checker.finish_reason is None


def test_without_stop_strings_nothing_is_held():
    shown, _ = shown_per_token("Do not STOP here")
    assert shown == ["Do", " not", " STOP", " here", ""]


def test_the_stop_string_that_ends_first_wins():
    shown, checker = shown_per_token("abcdef", stop=("cdef", "bc"))
    assert "".join(shown) == "a" and checker.stop_reason == "bc"


@pytest.mark.parametrize("include", [False, True])
def test_a_stop_string_across_tokens_stops_whether_or_not_it_is_shown(include):
    # "Hello", " world", ",", " stop", ...: the stop string ends inside the fourth token
    shown, checker = shown_per_token(
        "Hello world, stop here and more", stop=("world, st",), include_stop_str_in_output=include
    )
    assert "".join(shown) == ("Hello world, st" if include else "Hello ")
    assert checker.finish_reason == "stop" and checker.stop_reason == "world, st"


def test_a_stop_token_before_min_tokens_does_not_stop():
    shown, checker = shown_per_token("a<|im_end|>b<|im_end|>", min_tokens=2)
    assert "".join(shown) == "ab" and checker.finish_reason == "stop" and checker.tokens == 4


def test_ignore_eos_keeps_the_stop_token_ids():
    shown, checker = shown_per_token("a<|im_end|>b. c", ignore_eos=True, stop_token_ids=(13,))
    assert "".join(shown) == "ab" and checker.stop_reason == 13


def test_max_tokens_counts_the_tokens_not_the_text():
    shown, checker = shown_per_token("one two three", max_tokens=2)
    assert "".join(shown) == "one two" and checker.finish_reason == "length"


# -- the pipeline's edges -----------------------------------------------------------------


def test_a_text_engine_gets_the_parsers_too():
    derender = Derendering(None, "qwen3").start(SamplingParams())
    deltas = [derender.feed(EngineOutput(text=piece)) for piece in ("<thi", "nk>why</th", "ink>because")]
    deltas.append(derender.finish())
    assert "".join(d.reasoning for d in deltas) == "why"
    assert "".join(d.content for d in deltas) == "because"


def test_a_text_engine_without_parsers_is_passed_through():
    derender = Derendering().start(SamplingParams(stop=("x",)))
    assert derender.feed(EngineOutput(text="<think>x</think>")).content == "<think>x</think>"


def test_token_ids_without_a_tokenizer_are_an_engine_error():
    derender = Derendering().start(SamplingParams())
    with pytest.raises(EngineError, match="no tokenizer"):
        derender.feed(EngineOutput(token_ids=(1, 2)))


def test_an_engine_short_of_logprobs_is_an_engine_error_not_an_empty_list():
    derender = Derendering(facts()).start(SamplingParams(logprobs=True))
    with pytest.raises(EngineError, match="0 logprobs for 2 tokens"):
        derender.feed(EngineOutput(token_ids=(1, 2)))


def test_a_prompt_that_closed_the_thinking_starts_in_the_answer():
    prompt = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    derender = Derendering(facts(), "qwen3").start(SamplingParams(), prompt_text=prompt)
    delta = derender.feed(EngineOutput(token_ids=tuple(tokenizer().encode("Hello").ids)))
    assert (delta.reasoning, delta.content) == ("", "Hello")


def test_reasoning_is_dropped_when_the_request_says_so():
    derender = Derendering(facts(), "qwen3").start(SamplingParams(), OutputOptions(include_reasoning=False))
    delta = derender.feed(EngineOutput(token_ids=tuple(tokenizer().encode("<think>x</think>y").ids)))
    assert (delta.reasoning, delta.content) == ("", "y")


def test_calls_are_parsed_only_for_requests_with_tools():
    derender = Derendering(facts(), None, "hermes", enable_auto_tool_choice=True).start(SamplingParams())
    text = '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
    delta = derender.feed(EngineOutput(token_ids=tuple(tokenizer().encode(text).ids)))
    assert delta.content == text and not delta.tool_calls


def test_a_tool_parser_without_auto_tool_choice_parses_nothing():
    setup = Derendering(facts(), None, "hermes", enable_auto_tool_choice=False)
    assert not setup.parses_tools(OutputOptions(tools=({"type": "function", "function": {"name": "f"}},)))


def test_parallel_tool_calls_false_keeps_the_first_call_only():
    fixture = load("tool_calls_several_with_text")
    body = parse_chat_request(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "hi"}],
            **fixture["request"],
            "parallel_tool_calls": False,
        }
    )
    derender = derendering(fixture).start(body.sampling_params(), body.output_options())
    deltas = [derender.feed(EngineOutput(token_ids=tuple(fixture["token_ids"]))), derender.finish()]
    assert [call.name for d in deltas for call in d.tool_calls] == ["get_weather"]
    assert derender.finish_reason == "tool_calls"


@pytest.mark.parametrize(
    ("fields", "thinking"),
    [
        ({}, True),
        ({"reasoning_effort": "low"}, True),
        ({"reasoning_effort": "none"}, False),  # vLLM tells the template enable_thinking=false
        ({"reasoning_effort": "none", "chat_template_kwargs": {"enable_thinking": True}}, True),
        ({"chat_template_kwargs": {"enable_thinking": False}}, False),
    ],
)
def test_the_answer_expects_thinking_as_the_template_was_told(fields, thinking):
    body = parse_chat_request({"model": "m", "messages": [{"role": "user", "content": "hi"}], **fields})
    assert body.output_options().enable_thinking is thinking


# -- the parser plugins -------------------------------------------------------------------


def test_a_call_goes_out_whole_once_it_has_closed_and_parsed():
    """By default (vLLM's answer) nothing of a call is sent before it is known to be one."""
    deltas, _ = replay(load("tool_call_qwen3_coder"), 1)
    calls = [(n, call) for n, d in enumerate(deltas) for call in d.tool_calls]
    assert [(call.name, call.arguments) for _, call in calls] == [
        ("get_weather", '{"city": "São Paulo", "days": 5, "metric": true}')
    ]
    text = tokenizer().decode(load("tool_call_qwen3_coder")["token_ids"][: calls[0][0] + 1])
    assert text.endswith("</tool_call>")  # the step that closed it


def test_a_hermes_answer_is_held_from_its_first_call_to_its_end():
    """vLLM's hermes reads the whole answer's calls at once (one that does not parse makes it
    all content): from the first <tool_call> on, nothing goes out until the answer ends."""
    from mmprep.derender.tools import make_tool_parser

    parser = make_tool_parser("hermes")
    call = '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'
    assert parser.feed("Sure. ") == ("Sure.", [])
    assert parser.feed(call) == ("", [])
    assert parser.feed(" then " + call[:20]) == ("", [])
    content, calls = parser.finish()  # the second call was cut: all of it is content
    assert (content, calls) == (" " + call + " then " + call[:20], [])


def test_a_calls_arguments_stream_as_they_are_written_each_piece_whole_json_so_far():
    deltas, _ = replay(load("tool_call_qwen3_coder"), 1, partial=True)
    pieces = [call.arguments for d in deltas for call in d.tool_calls if call.id is None]
    # one piece per parameter as its </parameter> comes, then the closing brace
    assert pieces == ['{"city": "São Paulo"', ', "days": 5', ', "metric": true', "}"]
    for n in range(1, len(pieces)):  # every prefix closes as valid JSON: nothing broken was sent
        assert json.loads("".join(pieces[:n]) + "}")


def test_a_json_calls_name_waits_for_its_first_whole_argument():
    from mmprep.derender.tools import make_tool_parser

    parser = make_tool_parser("hermes", partial=True)
    steps = [parser.feed(piece)[1] for piece in ('<tool_call>{"name": "f", ', '"arguments": {"a": 1', ", ")]
    assert steps[:2] == [[], []]  # "1" may go on as "12": not whole yet
    assert [(c.name, c.arguments) for c in steps[2]] == [("f", ""), (None, '{"a": 1')]
    content, calls = parser.feed('"b": [2]}}</tool_call>')
    assert content == "" and [c.arguments for c in calls] == [', "b": [2]}']


def test_hermes_keeps_special_tokens_when_it_parses_calls_as_vllms_adjust_request():
    from mmprep.derender import TOOL_PARSERS

    options = OutputOptions(tools=({"type": "function", "function": {"name": "f"}},))
    assert TOOL_PARSERS.get("hermes").adjust(options).skip_special_tokens is False
    assert TOOL_PARSERS.get("qwen3_coder").adjust(options).skip_special_tokens is None  # the request's
    # and the detokenizer reads the adjusted options: a special token stays in the content
    setup = Derendering(facts(), None, "hermes", enable_auto_tool_choice=True)
    ids = tuple(tokenizer().encode("<|box_start|>ok").ids)
    assert (
        setup.start(SamplingParams(), options).feed(EngineOutput(token_ids=ids)).content == "<|box_start|>ok"
    )
    plain = Derendering(facts(), None, "hermes", enable_auto_tool_choice=True).start(SamplingParams())
    assert plain.feed(EngineOutput(token_ids=ids)).content == "ok"  # no tools: nothing adjusted


def test_the_models_generation_config_says_whether_special_tokens_stay():
    """vLLM 0.33 reads skip_special_tokens in the generation config (--generation-config,
    --override-generation-config) for a request that sends none; the request's own wins."""
    import dataclasses

    ids = tuple(tokenizer().encode("<|box_start|>ok").ids)
    keeps = Derendering(dataclasses.replace(facts(), skip_special_tokens=False))
    assert keeps.start(SamplingParams()).feed(EngineOutput(token_ids=ids)).content == "<|box_start|>ok"
    asked = keeps.start(SamplingParams(), OutputOptions(skip_special_tokens=True))
    assert asked.feed(EngineOutput(token_ids=ids)).content == "ok"
    assert Derendering(facts()).start(SamplingParams()).feed(EngineOutput(token_ids=ids)).content == "ok"


def test_the_parsers_get_the_token_ids_each_step_came_from(monkeypatch):
    from mmprep.derender import REASONING_PARSERS, TOOL_PARSERS
    from mmprep.derender.reasoning.qwen3 import Qwen3ReasoningParser
    from mmprep.derender.tools.hermes import HermesToolParser

    seen: dict[str, list] = {"tools": [], "reasoning": []}

    class Tools(HermesToolParser):
        def feed(self, text, token_ids=()):
            seen["tools"].append(token_ids)
            return super().feed(text, token_ids)

    class Reasoning(Qwen3ReasoningParser):
        def feed(self, text, token_ids=()):
            seen["reasoning"].append(token_ids)
            return super().feed(text, token_ids)

    monkeypatch.setitem(TOOL_PARSERS._entries, "hermes", Tools)
    monkeypatch.setitem(REASONING_PARSERS._entries, "qwen3", Reasoning)
    fixture = load("tool_call_after_reasoning")
    deltas, _ = replay(fixture, 5)
    # every id taken, the EOS that ended the answer among them
    assert sum(seen["tools"], ()) == sum(seen["reasoning"], ()) == tuple(fixture["token_ids"])
    assert all(len(step) <= 5 for step in seen["tools"])


@pytest.mark.parametrize("kind", ["tool_call_parser", "reasoning_parser"])
def test_every_registered_parser_has_a_replayed_fixture(kind):
    from mmprep.derender import REASONING_PARSERS, TOOL_PARSERS

    registry = TOOL_PARSERS if kind == "tool_call_parser" else REASONING_PARSERS
    replayed = {load(name)["server"].get(kind) for name in fixture_names()}
    assert set(registry.names()) <= replayed


def test_a_long_call_is_reread_only_where_an_argument_can_end(monkeypatch):
    """Each token does not re-read the whole call: `streaming` runs only on a step that
    brings a `,` `}` (or a tag's `>`), and the end is searched for in the new text alone."""
    from mmprep.derender.tools import make_tool_parser

    arguments = {f"k{i}": f"value {i} " * 5 for i in range(50)}
    text = "<tool_call>" + json.dumps({"name": "f", "arguments": arguments}) + "</tool_call>"
    parser, reads = make_tool_parser("hermes", partial=True), []
    read = parser.streaming
    monkeypatch.setattr(parser, "streaming", lambda jail: reads.append(len(jail)) or read(jail))
    pieces = [parser.feed(text[i : i + 3]) for i in range(0, len(text), 3)] + [parser.finish()]
    deltas = [call for _, calls in pieces for call in calls]
    assert len(reads) <= 2 * len(arguments) + 2  # not one per piece (about 470 of them)
    assert [d.name for d in deltas if d.id] == ["f"] and len(deltas) == 1 + len(arguments) + 1
    assert json.loads("".join(d.arguments for d in deltas)) == arguments
