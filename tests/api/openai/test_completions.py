"""POST /v1/completions through real servers on loopback and the official openai client's
completions API: text prompts on the echo engine (mmprep's default: its account of what it
got), the derender fixtures' token ids on the token-replaying engine (stop strings, logprobs
in OpenAI's completions shape), token-id and text prompts to a vLLM-like
/inference/v1/generate (`--engine vllm-generate`, --model: the render route's ids) and to an
OpenAI-compatible upstream's own /v1/completions (`--engine openai`); each streamed answer
adds up to the whole one; a stop or a client that leaves closes every prompt's generation, a
failure mid-stream is an error event; bad input a 4xx naming the field, the server healthy
after."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator

import httpx
import openai
import pytest

from mmprep.api.app import create_app
from mmprep.core.config import Settings
from mmprep.interface.engine import EngineError, EngineHTTPError, EngineOutput, NothingToStart
from mmprep.interface.prepared import PreparedRequest
from mmprep.model import load_model_folder
from mmprep.service import Service
from tests.support.chat import MODEL, assert_error, openai_client
from tests.support.derender_fixtures import derendering, load
from tests.support.engines import TokenReplayEngine
from tests.support.model_folder import make_model_folder
from tests.support.replay_servers import REPLAY_MODEL, replay
from tests.support.servers import LiveServer, ThreadServer
from tests.support.vllm_like import ANSWER_IDS, VllmGenerateLike, VllmLike


def streamed(client: openai.OpenAI, **request) -> tuple[dict[int, str], dict[int, str], list]:
    """A streamed completion's texts and finish reasons by choice index, and its chunks."""
    chunks = list(client.completions.create(stream=True, **request))
    texts: dict[int, str] = {}
    finishes: dict[int, str] = {}
    for chunk in chunks:
        assert chunk.object == "text_completion"
        for choice in chunk.choices:
            texts[choice.index] = texts.get(choice.index, "") + choice.text
            if choice.finish_reason is not None:
                finishes[choice.index] = choice.finish_reason
    return texts, finishes, chunks


# -- the echo engine: text prompts, no model folder ---------------------------------------


def test_a_text_prompt_whole_and_streamed(echo_server):
    client = openai_client(echo_server)
    request = {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 200, "temperature": 0.5, "seed": 7}
    whole = client.completions.create(**request)
    assert whole.object == "text_completion" and whole.id.startswith("cmpl-")
    (choice,) = whole.choices
    seen = json.loads(choice.text)
    assert seen["text"] == "Once upon a time"
    assert seen["sampling"] == {"max_tokens": 200, "temperature": 0.5, "top_p": None, "seed": 7, "stop": []}
    assert (choice.index, choice.finish_reason) == (0, "stop")
    assert whole.usage.completion_tokens == -(-len(choice.text) // 8)  # the echo engine's pieces
    texts, finishes, chunks = streamed(client, **request, stream_options={"include_usage": True})
    assert texts == {0: choice.text} and finishes == {0: "stop"}
    assert chunks[-1].choices == [] and chunks[-1].usage == whole.usage


def test_max_tokens_defaults_to_16_as_vllm(echo_server):
    whole = openai_client(echo_server).completions.create(model=MODEL, prompt="Hi")
    assert whole.choices[0].finish_reason == "length" and whole.usage.completion_tokens == 16


def test_one_choice_per_prompt_in_order(echo_server):
    client = openai_client(echo_server)
    whole = client.completions.create(model=MODEL, prompt=["first", "second", "third"], max_tokens=500)
    assert [c.index for c in whole.choices] == [0, 1, 2]
    assert [json.loads(c.text)["text"] for c in whole.choices] == ["first", "second", "third"]
    texts, finishes, _ = streamed(client, model=MODEL, prompt=["first", "second", "third"], max_tokens=500)
    assert texts == {c.index: c.text for c in whole.choices} and finishes == {0: "stop", 1: "stop", 2: "stop"}


def test_echo_puts_the_prompt_before_the_answer(echo_server):
    client = openai_client(echo_server)
    whole = client.completions.create(model=MODEL, prompt="Say: ", echo=True, max_tokens=500)
    text = whole.choices[0].text
    assert text.startswith("Say: {") and json.loads(text.removeprefix("Say: "))["text"] == "Say: "
    texts, _, _ = streamed(client, model=MODEL, prompt="Say: ", echo=True, max_tokens=500)
    assert texts == {0: text}


def test_stop_strings_end_the_answer(echo_server):
    whole = openai_client(echo_server).completions.create(
        model=MODEL, prompt="abc", stop=['"sampling"'], max_tokens=500
    )
    assert whole.choices[0].text.endswith('"media":[],') and whole.choices[0].finish_reason == "stop"


# -- token ids through the derender pipeline (the replaying engine) -----------------------


def test_token_ids_derendered_with_stop_strings(plain_server):
    client = openai_client(plain_server)
    fixture = load("stop_string")
    request = {"model": REPLAY_MODEL, "prompt": "Q:", "stop": ["END"], "max_tokens": 100}
    extra = replay("stop_string", chunk=3)
    whole = client.completions.create(**request, extra_body=extra)
    (choice,) = whole.choices
    assert choice.text == fixture["expected"]["message"]["content"]
    assert (choice.finish_reason, choice.model_extra["stop_reason"]) == ("stop", "END")
    texts, finishes, _ = streamed(client, **request, extra_body=extra)
    assert texts == {0: choice.text} and finishes == {0: "stop"}


def test_no_reasoning_parser_on_a_completion(parsing_server):
    """vLLM parses no reasoning or tool calls on completions: the think markup stays text."""
    fixture = load("reasoning_then_answer")
    whole = openai_client(parsing_server).completions.create(
        model=REPLAY_MODEL, prompt="Q:", max_tokens=200, extra_body=replay("reasoning_then_answer")
    )
    assert whole.choices[0].text == fixture["text"].removesuffix("<|im_end|>")
    assert "<think>" in whole.choices[0].text or "</think>" in whole.choices[0].text


def test_logprobs_in_the_completions_shape(plain_server):
    fixture = load("logprobs")
    extra = {
        "replay": {
            "token_ids": fixture["token_ids"],
            "logprobs": fixture["logprobs"],
            "chunk": 2,
            "finish_reason": "stop",
        }
    }
    client = openai_client(plain_server)
    request = {"model": REPLAY_MODEL, "prompt": "Q:", "logprobs": 2, "max_tokens": 50}
    whole = client.completions.create(**request, extra_body=extra)
    logprobs = whole.choices[0].logprobs
    assert whole.choices[0].text == "Hi 🎉"
    expected = fixture["expected"]["logprobs"]  # the EOS's too, as vLLM's
    assert logprobs.tokens == [entry["token"] for entry in expected]
    assert logprobs.token_logprobs == [entry["logprob"] for entry in expected]
    # the sampled token first, then the best others: here it is the best, so 2 in all (vLLM's
    # dict of the sampled token and the top 2, by id)
    assert logprobs.top_logprobs == [
        {e["token"]: e["logprob"] for e in entry["top_logprobs"]} for entry in expected
    ]
    assert logprobs.text_offset == [0, 2, 4, 5, 6]  # each token's offset: the lengths before it
    chunks = list(client.completions.create(stream=True, **request, extra_body=extra))
    tokens = [t for c in chunks for ch in c.choices if ch.logprobs for t in ch.logprobs.tokens]
    offsets = [t for c in chunks for ch in c.choices if ch.logprobs for t in ch.logprobs.text_offset]
    assert (tokens, offsets) == (logprobs.tokens, logprobs.text_offset)
    for asked in (0, 1):  # the sampled token alone: it is the best one
        fewer = (
            client.completions.create(**{**request, "logprobs": asked}, extra_body=extra).choices[0].logprobs
        )
        assert fewer.top_logprobs == [{entry["token"]: entry["logprob"]} for entry in expected]


@pytest.fixture(scope="module")
def replaying():
    """A replay server whose engine the test can see (how many generations were closed)."""
    engine = TokenReplayEngine()
    service = Service(
        Settings(served_model_name=[REPLAY_MODEL]), engine, derendering=derendering({"server": {}})
    )
    with ThreadServer(create_app(service=service)) as server:
        yield server, engine


def test_a_stop_closes_the_engines_generation(replaying):
    server, engine = replaying
    before = engine.closed
    body = {"model": REPLAY_MODEL, "prompt": ["a", "b"], "stop": ["END"], "max_tokens": 100}
    for stream in (False, True):
        answer = httpx.post(
            f"{server.url}/v1/completions",
            json={**body, "stream": stream, **replay("stop_string", 1)},
            timeout=30,
        )
        assert answer.status_code == 200
    assert engine.closed == before + 4  # both prompts' generations, whole and streamed


def test_a_client_leaving_mid_stream_stops_every_prompts_generation(replaying):
    server, engine = replaying
    before = engine.closed
    slow = {"replay": {"token_ids": [9707] * 200, "chunk": 1, "interval": 0.02}}
    body = {"model": REPLAY_MODEL, "prompt": ["a", "b"], "max_tokens": 200, "stream": True, **slow}
    with httpx.stream("POST", f"{server.url}/v1/completions", json=body, timeout=30) as response:
        lines = response.iter_lines()
        assert next(line for line in lines if line.startswith("data: "))
    deadline = time.monotonic() + 10
    while engine.closed < before + 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert engine.closed == before + 2
    assert httpx.get(f"{server.url}/health").status_code == 200


def test_the_prompts_stream_as_their_engines_give_them(replaying):
    """As vLLM merges its prompts' generators: the second prompt's chunks come while the
    first's are still coming, not after them."""
    server, _ = replaying
    slow = {"replay": {"token_ids": [9707] * 10, "chunk": 1, "interval": 0.03}}
    body = {"model": REPLAY_MODEL, "prompt": ["a", "b"], "max_tokens": 20, "stream": True, **slow}
    with httpx.stream("POST", f"{server.url}/v1/completions", json=body, timeout=30) as response:
        data = [line.removeprefix("data: ") for line in response.iter_lines() if line.startswith("data: ")]
    indices = [choice["index"] for chunk in data[:-1] for choice in json.loads(chunk)["choices"]]
    assert sorted(set(indices)) == [0, 1] and indices.index(1) < len(indices) - 1 - indices[::-1].index(0)
    texts = {
        i: "".join(c["text"] for d in data[:-1] for c in json.loads(d)["choices"] if c["index"] == i)
        for i in (0, 1)
    }
    assert texts == {0: "Hello" * 10, 1: "Hello" * 10}


class BreaksMidway(NothingToStart):
    """Answers a first piece of text, then fails: the 200 is out, so the failure is an event."""

    async def generate(self, request: PreparedRequest) -> AsyncGenerator[EngineOutput, None]:
        yield EngineOutput(text="Half an ")
        raise EngineError("the engine broke after its first output")


class FailsOnBad(NothingToStart):
    """Refuses the prompt "bad" at once; answers any other slowly."""

    def __init__(self) -> None:
        self.closed = 0

    async def generate(self, request: PreparedRequest) -> AsyncGenerator[EngineOutput, None]:
        if request.completion == "bad":
            raise EngineHTTPError("this engine refuses the prompt", 422, "refused", "prompt")
        try:
            await asyncio.sleep(0.5)
            yield EngineOutput(text="fine")
            yield EngineOutput(finish_reason="stop", prompt_tokens=1, completion_tokens=1)
        finally:
            self.closed += 1


@pytest.mark.parametrize("stream", [False, True])
def test_one_prompt_refused_at_once_is_the_http_error_and_stops_the_others(stream):
    engine = FailsOnBad()
    with LiveServer(Settings(served_model_name=[MODEL]), engine=engine) as front:
        body = {"model": MODEL, "prompt": ["good", "bad"], "stream": stream}
        assert_error(
            httpx.post(f"{front.url}/v1/completions", json=body, timeout=30), 422, "refused", "prompt"
        )
        assert engine.closed == 1  # the other prompt's generation stopped, not left running
        assert httpx.get(f"{front.url}/health").status_code == 200


def test_a_failure_mid_stream_is_an_error_event_then_done():
    with LiveServer(Settings(served_model_name=[MODEL]), engine=BreaksMidway()) as front:
        body = {"model": MODEL, "prompt": "hi", "stream": True}
        with httpx.stream("POST", f"{front.url}/v1/completions", json=body, timeout=30) as response:
            data = [
                line.removeprefix("data: ") for line in response.iter_lines() if line.startswith("data: ")
            ]
        assert json.loads(data[0])["choices"][0]["text"] == "Half an "
        assert json.loads(data[1])["error"]["code"] == "engine_error" and data[2:] == ["[DONE]"]
        assert httpx.get(f"{front.url}/health").status_code == 200


# -- vLLM's token-in endpoint (--engine vllm-generate, --model) ---------------------------


@pytest.fixture(scope="module")
def generate_upstream(tmp_path_factory):
    folder = make_model_folder("qwen2_vl", tmp_path_factory.mktemp("models") / "Qwen2-VL-2B-Instruct")
    upstream = VllmGenerateLike(model=MODEL, max_model_len=4096)
    with ThreadServer(upstream.app) as server:
        settings = Settings(
            engine="vllm-generate",
            upstream_url=f"{server.url}/v1",
            upstream_model=MODEL,
            model=folder,
            served_model_name=[MODEL],
            max_model_len=4096,
            allow_private_networks=True,
        )
        with LiveServer(settings) as front:
            yield front, upstream, load_model_folder(str(folder))


def test_token_ids_and_text_to_vllm_generate(generate_upstream):
    front, upstream, folder = generate_upstream
    client = openai_client(front)
    whole = client.completions.create(model=MODEL, prompt=[[1, 2, 3], [4, 5]], max_tokens=3)
    sent = [item["body"] for item in upstream.received[-2:]]
    assert sorted(body["token_ids"] for body in sent) == [[1, 2, 3], [4, 5]]
    assert {body["sampling_params"]["max_tokens"] for body in sent} == {3}
    assert all(body["parse_context"] is None and body["request_id"].startswith("cmpl-") for body in sent)
    assert [c.text for c in whole.choices] == ["Hello, world"] * 2
    assert [c.finish_reason for c in whole.choices] == ["length"] * 2
    assert (whole.usage.prompt_tokens, whole.usage.completion_tokens) == (5, 6)
    whole = client.completions.create(model=MODEL, prompt="Hello there", echo=True)
    assert upstream.received[-1]["body"]["token_ids"] == folder.encode("Hello there")
    assert whole.choices[0].text == "Hello there" + "Hello, world!"
    texts, finishes, _ = streamed(client, model=MODEL, prompt=[[1, 2, 3], [151644]], echo=True)
    decoded = folder.tokenizer.decode([1, 2, 3]) + "Hello, world!"
    assert texts == {0: decoded, 1: "<|im_start|>Hello, world!"}  # as vLLM decodes a prompt
    assert finishes == {0: "stop", 1: "stop"}
    logprobs = client.completions.create(model=MODEL, prompt="Hi", logprobs=2).choices[0].logprobs
    assert len(logprobs.tokens) == len(ANSWER_IDS) - 1 or len(logprobs.tokens) == len(ANSWER_IDS)
    assert all(len(top) == 2 for top in logprobs.top_logprobs)


# -- an OpenAI-compatible upstream's own /v1/completions (--engine openai) ----------------


@pytest.fixture(scope="module")
def completions_upstream():
    upstream = VllmLike(model=MODEL)
    with ThreadServer(upstream.app) as server:
        settings = Settings(engine="openai", upstream_url=f"{server.url}/v1", upstream_model=MODEL)
        with LiveServer(settings) as front:
            yield front, upstream


def test_forwarded_to_the_upstreams_completions(completions_upstream):
    front, upstream = completions_upstream
    client = openai_client(front)
    request = {
        "model": MODEL,
        "prompt": "Tell me",
        "max_tokens": 100,
        "stop": ["zzz"],
        "extra_body": {"top_k": 5},
    }
    whole = client.completions.create(**request, echo=True)
    sent = upstream.received[-1]["body"]
    assert (
        sent["prompt"] == "Tell me" and "echo" not in sent and (sent["top_k"], sent["stop"]) == (5, ["zzz"])
    )
    text = whole.choices[0].text
    assert text.startswith("Tell me") and json.loads(text.removeprefix("Tell me"))["prompt"] == "Tell me"
    texts, finishes, chunks = streamed(client, **request, echo=True, stream_options={"include_usage": True})
    assert texts == {0: text} and finishes == {0: "stop"} and chunks[-1].usage == whole.usage


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "status", "param"),
    [
        ({"suffix": "end"}, 400, "suffix"),
        ({"best_of": 2}, 400, "best_of"),
        ({"n": 2}, 400, "n"),
        ({"use_beam_search": True}, 400, "use_beam_search"),
        ({"echo": True, "logprobs": 1}, 400, "echo"),
        ({"logprobs": 1}, 400, "logprobs"),  # the echo engine gives none
        ({"prompt": [1, 2, 3]}, 400, "prompt"),  # token ids need --model
        ({"prompt": [[1, 2], [3]]}, 400, "prompt[0]"),
        ({"prompt": ["a", [1]]}, 400, "prompt"),
        ({"prompt": ""}, 400, "prompt"),
        ({"prompt": []}, 400, "prompt"),
        ({"prompt": None}, 400, "prompt"),
        ({"stream_options": {"include_usage": True}}, 400, "stream_options"),
        ({"max_tokens": 0}, 400, "max_tokens"),
        ({"min_tokens": 20, "max_tokens": 10}, 400, "min_tokens"),
        ({"temperature": 3}, 400, "temperature"),
        ({"logprobs": 21}, 400, "logprobs"),
        ({"skip_special_tokens": "maybe"}, 400, "skip_special_tokens"),
        ({"model": "other"}, 404, "model"),
    ],
)
def test_bad_input_is_a_4xx_naming_the_field(echo_server, change, status, param):
    body = {"model": MODEL, "prompt": "Hi", **change}
    error = assert_error(httpx.post(f"{echo_server.url}/v1/completions", json=body, timeout=30), status)
    assert error["param"] == param, error
    assert httpx.get(f"{echo_server.url}/health").status_code == 200


def test_bad_token_ids_with_a_model_folder(generate_upstream):
    front, _, folder = generate_upstream
    size = folder.tokenizer.get_vocab_size(with_added_tokens=True)
    body = {"model": MODEL, "prompt": [[1, size]]}
    assert_error(httpx.post(f"{front.url}/v1/completions", json=body, timeout=30), 400, param="prompt[0][1]")
    body = {"model": MODEL, "prompt": "Hi", "max_tokens": 5000}
    assert_error(httpx.post(f"{front.url}/v1/completions", json=body, timeout=30), 400, param="max_tokens")
    body = {"model": MODEL, "prompt": "Hi", "stream": True, "response_format": {"type": "json_object"}}
    assert_error(
        httpx.post(f"{front.url}/v1/completions", json=body, timeout=30), 400, param="response_format"
    )
    assert httpx.get(f"{front.url}/health").status_code == 200


def test_fields_read_here_are_not_the_engines_to_refuse(generate_upstream):
    """best_of 1, a null suffix, user and skip_special_tokens reach no engine that takes only
    the fields it knows (vllm-generate)."""
    front, upstream, _ = generate_upstream
    body = {
        "model": MODEL,
        "prompt": "Hi",
        "best_of": 1,
        "suffix": None,
        "user": "u1",
        "skip_special_tokens": True,
    }
    answer = httpx.post(f"{front.url}/v1/completions", json=body, timeout=30)
    assert answer.status_code == 200 and answer.json()["choices"][0]["text"] == "Hello, world!"
