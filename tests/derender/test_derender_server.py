"""The derender fixtures through a real mmprep server on loopback: a token-replaying
engine (tests/support/engines.py) gives each fixture's ids, 20, 5, 2 or 1 at a time, and the
official openai client reads the answer, streamed and not. Its stream helper assembles
the tool calls, which must equal the non-streamed ones; a stop closes the engine."""

from __future__ import annotations

from typing import Self

import httpx
import pytest

from mmprep.api.app import create_app
from mmprep.cli import Mmprep, Serve
from mmprep.core.config import Settings
from mmprep.derender import Derendering, OutputOptions
from mmprep.engines.echo import EchoEngine
from mmprep.interface.engine import EngineOutput
from mmprep.interface.prepared import SamplingParams
from mmprep.service import Service
from tests.support.chat import assert_error, openai_client, post
from tests.support.derender_fixtures import CHUNK_SIZES, assert_message, derendering, fixture_names, load
from tests.support.engines import TokenReplayEngine
from tests.support.servers import ThreadServer

MODEL = "qwen-test"
MESSAGES = [{"role": "user", "content": "hi"}]


class ReplayServer(ThreadServer):
    """A server on a token-replaying engine, with the engine and an openai client at hand."""

    def __init__(self, service: Service, engine: TokenReplayEngine) -> None:
        super().__init__(create_app(service=service))
        self.engine = engine

    def __enter__(self) -> Self:
        super().__enter__()
        self.client = openai_client(self)  # of the url it listens on, known from here
        return self


class Servers:
    """One server per parser setup, started when first asked for."""

    def __init__(self):
        self._open, self._servers = {}, {}

    def get(self, fixture: dict, partial: bool = False) -> ReplayServer:
        """`partial`: with --stream-partial-tool-calls."""
        key = (*sorted(fixture["server"].items()), partial)
        if key not in self._servers:
            engine = TokenReplayEngine()
            setup = derendering(fixture, partial)
            service = Service(Settings(served_model_name=[MODEL]), engine, derendering=setup)
            server = ReplayServer(service, engine).__enter__()
            self._servers[key] = server
        return self._servers[key]

    def close(self) -> None:
        for server in self._servers.values():
            server.__exit__(None, None, None)


@pytest.fixture(scope="module")
def servers():
    found = Servers()
    yield found
    found.close()


def body(fixture: dict, chunk: int) -> dict:
    replay = {"token_ids": fixture["token_ids"], "chunk": chunk, "finish_reason": fixture["engine_finish"]}
    if "logprobs" in fixture:
        replay["logprobs"] = fixture["logprobs"]
    return {**fixture["request"], "replay": replay}


def as_dict(message) -> dict:
    """An openai message object as the wire had it (the reasoning fields are extras)."""
    found = message.model_dump(exclude_none=False, exclude_unset=True)
    for key in ("refusal", "annotations", "audio", "function_call", "parsed"):
        found.pop(key, None)
    if not found.get("tool_calls"):
        found.pop("tool_calls", None)
    else:
        found["tool_calls"] = [
            {
                "id": c["id"],
                "type": c["type"],
                "function": {"name": c["function"]["name"], "arguments": c["function"]["arguments"]},
            }
            for c in found["tool_calls"]
        ]
    return found


@pytest.mark.parametrize("chunk", CHUNK_SIZES)
@pytest.mark.parametrize("name", fixture_names())
def test_the_openai_client_gets_the_expected_answer_whole_and_streamed(servers, name, chunk):
    fixture = load(name)
    server, expected = servers.get(fixture), fixture["expected"]
    client = server.client
    whole = client.chat.completions.create(model=MODEL, messages=MESSAGES, extra_body=body(fixture, chunk))
    choice = whole.choices[0]
    assert_message(as_dict(choice.message), expected["message"])
    assert choice.finish_reason == expected["finish_reason"]
    assert choice.model_extra["stop_reason"] == expected.get("stop_reason")
    logprobs = choice.logprobs.model_dump()["content"] if choice.logprobs else None
    assert logprobs == expected.get("logprobs")

    with client.chat.completions.stream(
        model=MODEL,
        messages=MESSAGES,
        extra_body=body(fixture, chunk),
        stream_options={"include_usage": True},
    ) as stream:
        chunks = [event.chunk for event in stream if event.type == "chunk"]
        # what the helper assembled (get_final_completion refuses a "length" answer)
        final = stream.current_completion_snapshot
    streamed = final.choices[0]
    # the stream's first chunk says content "" (as OpenAI's and vLLM's do), and a stream
    # with no reasoning never names it: "" and absent are the whole answer's null
    assert _nulls_dropped({**as_dict(streamed.message), "content": streamed.message.content or None}) == (
        _nulls_dropped(as_dict(choice.message) | _same_ids(choice.message, streamed.message))
    )
    assert streamed.finish_reason == choice.finish_reason
    assert chunks[-2].choices[0].model_extra["stop_reason"] == expected.get("stop_reason")
    assert final.usage.completion_tokens == whole.usage.completion_tokens
    _check_tool_call_chunks(chunks)
    if expected.get("logprobs"):
        assert [
            e
            for c in chunks
            if c.choices and c.choices[0].logprobs
            for e in c.choices[0].logprobs.model_dump()["content"]
        ] == expected["logprobs"]


def _nulls_dropped(message: dict) -> dict:
    return {key: value for key, value in message.items() if value is not None}


def _same_ids(whole, streamed) -> dict:
    """Ids are random per request: the streamed answer's own ids in the whole one's place."""
    if not whole.tool_calls:
        return {}
    calls = as_dict(whole)["tool_calls"]
    for call, other in zip(calls, streamed.tool_calls, strict=True):
        call["id"] = other.id
    return {"tool_calls": calls}


def _check_tool_call_chunks(chunks) -> None:
    """As OpenAI streams a call: a chunk with its index, id, type and name (arguments
    empty), then chunks that only add to its arguments."""
    seen = set()
    for chunk in chunks:
        for call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            if call.index not in seen:
                assert (
                    call.id
                    and call.type == "function"
                    and call.function.name
                    and call.function.arguments == ""
                )
                seen.add(call.index)
            else:
                assert call.id is None and call.function.name is None and call.function.arguments


def test_a_calls_arguments_reach_the_openai_client_as_they_are_written(servers):
    """With --stream-partial-tool-calls, on the wire, a token at a time: the call's arguments
    come in a chunk per parameter as each one closes, and the official client's helper
    assembles the whole call."""
    fixture = load("tool_call_qwen3_coder")
    with servers.get(fixture, partial=True).client.chat.completions.stream(
        model=MODEL, messages=MESSAGES, extra_body=body(fixture, 1)
    ) as stream:
        pieces = [
            call.function.arguments
            for event in stream
            if event.type == "chunk" and event.chunk.choices
            for call in event.chunk.choices[0].delta.tool_calls or []
            if call.function.arguments
        ]
        [streamed] = stream.current_completion_snapshot.choices[0].message.tool_calls
    assert pieces == ['{"city": "São Paulo"', ', "days": 5', ', "metric": true', "}"]
    assert streamed.function.arguments == '{"city": "São Paulo", "days": 5, "metric": true}'


def test_a_stop_closes_the_engines_generation(servers):
    fixture = load("stop_string")
    server = servers.get(fixture)
    before = server.engine.closed
    for stream in (False, True):
        response = post(server, {"model": MODEL, "messages": MESSAGES, "stream": stream, **body(fixture, 1)})
        assert response.status_code == 200
    assert server.engine.closed == before + 2


def test_logprobs_from_an_engine_that_cannot_give_them_are_a_400_naming_the_field():
    class NoLogprobs(EchoEngine):
        gives_logprobs = False

    model = Derendering(derendering(load("logprobs")).model)
    # with a tokenizer and without (the default server, `mmprep serve` alone): the same 400
    for engine, derender in ((NoLogprobs(), model), (EchoEngine(), model), (EchoEngine(), Derendering())):
        service = Service(Settings(), engine, derendering=derender)
        with ThreadServer(create_app(service=service)) as server:
            for stream in (False, True):
                refused = post(
                    server, {"model": "mmprep-echo", "messages": MESSAGES, "logprobs": True, "stream": stream}
                )
                assert_error(refused, 400, "unsupported_field", "logprobs")


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
        ({"min_tokens": 9, "max_tokens": 4}, "min_tokens"),
        ({"stop_token_ids": [-3]}, "stop_token_ids"),
        ({"tool_choice": "sometimes"}, "tool_choice"),
        ({"tool_choice": "required"}, "tool_choice"),
        (
            {
                "tools": [{"type": "function", "function": {"name": "f"}}],
                "tool_choice": {"type": "function", "function": {"name": "g"}},
            },
            "tool_choice",
        ),
        ({"tools": [{"type": "function"}]}, "tools[0].function"),
        ({"skip_special_tokens": "often"}, "skip_special_tokens"),
    ],
)
def test_bad_answer_fields_are_a_400_naming_them(servers, fields, param):
    server = servers.get(load("plain_multibyte"))
    assert_error(
        post(server, {"model": MODEL, "messages": MESSAGES, **fields}), 400, "invalid_request", param
    )


TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


def test_tools_under_auto_without_the_parser_flags_are_refused_as_vllm_refuses_them(servers):
    server = servers.get(load("plain_multibyte"))  # a model, no tool-call parser
    for choice in ({}, {"tool_choice": "auto"}):
        refused = post(server, {"model": MODEL, "messages": MESSAGES, "tools": TOOLS, **choice})
        assert_error(refused, 400, "unsupported_field", "tool_choice")
        assert "--enable-auto-tool-choice" in refused.json()["error"]["message"]


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
def test_a_forced_tool_choice_is_refused_not_ignored(servers, choice):
    server = servers.get(load("tool_call_after_reasoning"))  # with the hermes parser
    refused = post(server, {"model": MODEL, "messages": MESSAGES, "tools": TOOLS, "tool_choice": choice})
    assert_error(refused, 400, "unsupported_field", "tool_choice")


def test_token_ids_with_no_tokenizer_are_an_error_not_a_crash():
    with ThreadServer(
        create_app(service=Service(Settings(served_model_name=[MODEL]), TokenReplayEngine()))
    ) as server:
        response = httpx.post(
            f"{server.url}/v1/chat/completions",
            timeout=30,
            json={"model": MODEL, "messages": MESSAGES, "replay": {"token_ids": [1, 2]}},
        )
    assert_error(response, 500, "engine_error")
    assert "no tokenizer" in response.json()["error"]["message"]


def test_a_text_engines_answer_is_cut_at_max_completion_tokens_without_a_model():
    """No tokenizer: each text piece is one token, so 3 asked give 3 pieces and "length"."""
    pieces = ["one ", "two ", "three ", "four ", "five "]
    service = Service(Settings(served_model_name=[MODEL]), TokenReplayEngine())
    with ThreadServer(create_app(service=service)) as server:
        client = openai_client(server)
        cases = [
            ({"texts": pieces}, 3, "one two three ", "length"),
            ({"texts": pieces}, None, "".join(pieces), "stop"),
            ({"texts": ["a ", "b "], "repeat": 3}, 5, "a b a b a ", "length"),  # a long answer, short request
            ({"texts": ["a ", "b "], "repeat": 3}, 6, "a b a b a b ", "stop"),
        ]
        for replay, limit, text, finish in cases:
            request = {
                "model": MODEL,
                "messages": MESSAGES,
                "max_completion_tokens": limit,
                "extra_body": {"replay": replay},
            }
            whole = client.chat.completions.create(**request)
            assert (whole.choices[0].message.content, whole.choices[0].finish_reason) == (text, finish)
            assert whole.usage.completion_tokens == len(text.split())
            chunks = list(client.chat.completions.create(**request, stream=True))
            streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            assert (streamed, chunks[-1].choices[0].finish_reason) == (text, finish)


# -- mmprep serve --model with the parser flags, as an operator runs it --------------------


@pytest.mark.slow  # a `mmprep serve` process
def test_mmprep_serve_with_a_model_folder_and_parsers(tmp_path):
    from tests.support.model_folder import make_model_folder
    from tests.support.servers import REPO, AppProcess

    folder = make_model_folder("qwen3_vl", tmp_path / "Qwen3-VL-Test")
    fixture = load("tool_call_after_reasoning")
    flags = (
        "--model",
        str(folder),
        "--reasoning-parser",
        "qwen3",
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "hermes",
        "--engine-class",
        "tests.support.engines:TokenReplayEngine",
    )
    with AppProcess("serve", *flags, import_from=[REPO]) as app:
        client = openai_client(app)
        answer = client.chat.completions.create(
            model="Qwen3-VL-Test", messages=MESSAGES, extra_body=body(fixture, 3)
        )
        with client.chat.completions.stream(
            model="Qwen3-VL-Test", messages=MESSAGES, extra_body=body(fixture, 3)
        ) as stream:
            for _ in stream:
                pass
            streamed = stream.current_completion_snapshot.choices[0].message
    message = answer.choices[0].message
    assert message.model_extra["reasoning"] == "\nI need the weather.\n"
    [call] = message.tool_calls
    assert (call.function.name, call.function.arguments) == ("get_weather", '{"city": "Paris", "days": 3}')
    assert answer.choices[0].finish_reason == "tool_calls"
    assert [(c.function.name, c.function.arguments) for c in streamed.tool_calls] == [
        ("get_weather", '{"city": "Paris", "days": 3}')
    ]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"reasoning_parser": "qwq"}, "unknown reasoning parser 'qwq'"),
        (
            {"tool_call_parser": "nonesuch", "enable_auto_tool_choice": True},
            "unknown tool call parser 'nonesuch'",
        ),
        ({"enable_auto_tool_choice": True}, "--enable-auto-tool-choice needs --tool-call-parser"),
        (
            {"stream_partial_tool_calls": True},
            "--stream-partial-tool-calls needs --enable-auto-tool-choice --tool-call-parser",
        ),
        (
            {
                "engine": "openai",
                "upstream_url": "http://127.0.0.1:9",
                "upstream_model": "m",
                "reasoning_parser": "qwen3",
            },
            "the upstream parses its own answers",
        ),
    ],
)
def test_parser_flags_that_mean_nothing_stop_the_server(flags, message):
    with pytest.raises(ValueError, match=message):
        Serve(**flags)  # the command's settings: the names checked against derender's registries


@pytest.mark.parametrize("partial", [False, True])
def test_a_service_streams_partial_tool_calls_only_when_told(partial):
    """--stream-partial-tool-calls reaches the pipeline: a call cut after its first argument
    is the model's text by default (vLLM's answer), the call shown so far when told."""
    settings = Settings(
        served_model_name=[MODEL],
        enable_auto_tool_choice=True,
        tool_call_parser="hermes",
        **({"stream_partial_tool_calls": True} if partial else {}),
    )
    setup = Service(settings, TokenReplayEngine()).derendering
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days'
    derender = setup.start(SamplingParams(), OutputOptions(tools=({"type": "function", "function": {}},)))
    deltas = [derender.feed(EngineOutput(text=text[at : at + 4])) for at in range(0, len(text), 4)]
    deltas += [derender.feed(EngineOutput(finish_reason="length")), derender.finish()]
    calls = [(call.name, call.arguments) for delta in deltas for call in delta.tool_calls]
    content = "".join(delta.content for delta in deltas)
    if partial:  # the call was shown from its first whole argument: closed with it, text kept
        assert calls == [("get_weather", ""), (None, '{"city": "Paris"'), (None, "}")] and content == text
    else:
        assert calls == [] and content == text
    assert derender.finish_reason == "length"


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ({"reasoning_parser": "qwq"}, "unknown reasoning parser 'qwq': choose one of deepseek_r1, .*qwen3"),
        ({"tool_call_parser": "nonesuch"}, "unknown tool call parser 'nonesuch': choose one of .*hermes"),
    ],
)
def test_a_service_built_with_an_unknown_parser_stops_naming_the_choices(setup, message):
    with pytest.raises(ValueError, match=message):
        Service(Settings(served_model_name=[MODEL], **setup), TokenReplayEngine())


def test_the_commands_help_names_the_registered_parsers():
    from mmprep.derender import REASONING_PARSERS, TOOL_PARSERS

    help_text = " ".join(Mmprep.__doc__.split())
    for registry in (REASONING_PARSERS, TOOL_PARSERS):
        assert registry.names() and all(name in help_text for name in registry.names())
    assert f"{', '.join(TOOL_PARSERS.names()[:-1])} or {TOOL_PARSERS.names()[-1]}" in help_text
