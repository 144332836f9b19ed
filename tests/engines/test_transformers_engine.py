"""The transformers engine (app/mmprep/engines/transformers_engine.py) on tiny Qwen-VL models with
random weights, on CPU: for the same video, its greedy token ids are transformers' own (its
processor on the chat, then model.generate), given what mmprep's own render and processor
make of the chat request: in process, behind a real `mmprep worker`, and through a real
`mmprep serve --model` with the openai client.

The model folder is built here, nothing downloaded: a family's published configs and the
real Qwen vocabulary (tests/support/model_folder.py), then a config with tiny text and vision
sizes (the real vocabulary size and special token ids) and random weights from a fixed seed
in place of the model. The video is lossless (FFV1) and sized so that no resize applies:
the decoded frames are the frames encoded, and our processor's tensors equal transformers'
to the bit, which random weights, with no margin between their likeliest tokens, need.
Skipped without torch (mmprep does not depend on it).
"""

from __future__ import annotations

import asyncio
import base64
import io
import logging
import warnings

import anthropic
import av
import numpy as np
import pytest
from PIL import Image

from mmprep.core.config import Settings
from mmprep.decoders import decode_video
from mmprep.engines import EngineHTTPError
from mmprep.engines.workers import RemoteWorkersEngine
from mmprep.interface.prepared import MediaItem, PreparedRequest, SamplingParams, TokenPrompt
from mmprep.model import load_model_folder
from mmprep.render import Renderer
from tests.support.chat import openai_client
from tests.support.model_folder import make_model_folder, video_item
from tests.support.servers import LiveServer, WorkerProcess

REASON = "needs torch and transformers (pip install -e '.[transformers]')"
torch = pytest.importorskip("torch", reason=REASON)
transformers = pytest.importorskip("transformers", reason=REASON)

from mmprep.engines.transformers_engine import (  # noqa: E402 (imports torch: after the skip)
    MODEL_VARIABLE,
    TransformersEngine,
)
from tests.support.tiny_model import build_model_folder  # noqa: E402

pytestmark = pytest.mark.slow  # torch models generating, and a worker process

ENGINE_CLASS = "mmprep.engines.transformers_engine:TransformersEngine"
VIDEO_TOKEN = 151656  # <|video_pad|>
NEW_TOKENS = 16
QUESTION = "What happens in this video?"
# 8 frames of 224 x 224 at 8 fps: a multiple of Qwen2's 28-pixel and Qwen3's 32-pixel merge
# blocks within the published pixel bounds, so never resized. The request samples 4 of them:
# frames 0, 2, 4 and 7.
ENCODED = np.random.default_rng(1).integers(0, 256, (8, 224, 224, 3), dtype=np.uint8)
SAMPLED = [0, 2, 4, 7]


def lossless_video() -> bytes:
    """ENCODED as FFV1 in Matroska: decoded, the same pixels."""
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="matroska") as container:
        stream = container.add_stream("ffv1", rate=8)
        stream.width, stream.height, stream.pix_fmt = 224, 224, "bgr0"
        for frame in ENCODED:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        container.mux(stream.encode())
    return buffer.getvalue()


VIDEO = lossless_video()
VIDEO_URL = "data:video/x-matroska;base64," + base64.b64encode(VIDEO).decode()
MESSAGES = [
    {"role": "user", "content": [{"type": "video", "media_index": 0}, {"type": "text", "text": QUESTION}]}
]
CHAT = [
    {
        "role": "user",
        "content": [
            {"type": "video_url", "video_url": {"url": VIDEO_URL, "num_frames": len(SAMPLED)}},
            {"type": "text", "text": QUESTION},
        ],
    }
]


def transformers_inputs(folder):
    """transformers' processor on the same chat and frames: the reference's inputs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        processor = transformers.AutoProcessor.from_pretrained(folder)
        text = processor.apply_chat_template(
            [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": QUESTION}]}],
            add_generation_prompt=True,
        )
        video = decode_video(VIDEO, num_frames=len(SAMPLED))
        metadata = transformers.video_utils.VideoMetadata(**video.to_hf_metadata())
        return processor(
            text=[text],
            videos=[ENCODED[SAMPLED]],
            video_metadata=[metadata],
            do_sample_frames=False,
            return_tensors="pt",
        )


def transformers_generate(folder, inputs, max_new_tokens=NEW_TOKENS, **changed):
    """model.generate, greedy: the new tokens and the log-softmax of each step's raw logits."""
    model = transformers.AutoModelForImageTextToText.from_pretrained(folder).eval()
    out = model.generate(
        **{**inputs, **changed},
        max_new_tokens=max_new_tokens,
        do_sample=False,
        return_dict_in_generate=True,
        output_logits=True,
    )
    tokens = out.sequences[0, inputs["input_ids"].shape[1] :].tolist()
    return tokens, torch.log_softmax(torch.stack(out.logits)[:, 0].float(), dim=-1)


def prepared(folder, **sampling) -> PreparedRequest:
    """What `mmprep serve --model folder` hands its engine for CHAT: the decoded frames,
    our processor's tensors, and the prompt our renderer makes of the chat."""
    model_folder = load_model_folder(str(folder))
    video = decode_video(VIDEO, num_frames=len(SAMPLED))
    item = video_item(video, model_folder.processor, "messages[0].content[0].video_url")
    prompt = Renderer(model_folder).render(MESSAGES, [item])
    sampling.setdefault("max_tokens", NEW_TOKENS)
    return PreparedRequest("chatcmpl-1", "tiny", MESSAGES, [item], SamplingParams(**sampling), prompt=prompt)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return build_model_folder(tmp_path_factory.mktemp("models") / "tiny-qwen2-vl")


@pytest.fixture(scope="module")
def reference(folder):
    inputs = transformers_inputs(folder)
    tokens, logprobs = transformers_generate(folder, inputs)
    return {"inputs": inputs, "tokens": tokens, "logprobs": logprobs}


@pytest.fixture(scope="module")
def engine(folder):
    engine = TransformersEngine(folder, device="cpu")
    asyncio.run(engine.start())
    yield engine
    asyncio.run(engine.stop())


@pytest.fixture(scope="module")
def worker(folder):
    """`mmprep worker --engine-class ...TransformersEngine`, a real process."""
    env = {MODEL_VARIABLE: str(folder), "MMPREP_TRANSFORMERS_DEVICE": "cpu"}
    worker = WorkerProcess("--engine-class", ENGINE_CLASS, env=env).start()
    try:
        worker.wait_ready(timeout=180)  # torch and transformers take a while to import (minutes under load)
        yield worker
    finally:
        worker.close()


async def collect(outputs) -> list:
    return [output async for output in outputs]


def generated(outputs) -> list[int]:
    return [token for output in outputs for token in output.token_ids]


def test_mmprep_gives_the_engine_what_transformers_gives_its_model(folder, reference):
    """The premise of comparing ids: our render's prompt is transformers' prompt, and our
    decode and processor give transformers' pixels for the frames encoded."""
    request = prepared(folder)
    inputs = reference["inputs"]
    assert list(request.prompt.token_ids) == inputs["input_ids"][0].tolist()
    for key in ("pixel_values_videos", "video_grid_thw"):
        np.testing.assert_array_equal(request.media[0].processed.tensors[key], inputs[key].numpy())


def test_greedy_ids_are_transformers_and_come_as_made(engine, folder, reference):
    outputs = asyncio.run(collect(engine.generate(prepared(folder))))
    assert generated(outputs) == reference["tokens"]
    # Streamed as they are made: never an empty step, and not all in one. A reader slower
    # than the model (a loaded machine) takes the tokens made meanwhile together, by design
    # (transformers_engine.py), so one token per step is the idle case, not a promise.
    counts = [len(output.token_ids) for output in outputs[:-1]]
    assert sum(counts) == NEW_TOKENS and min(counts) >= 1 and len(counts) > 1
    last = outputs[-1]
    prompt_length = reference["inputs"]["input_ids"].shape[1]
    assert (last.finish_reason, last.prompt_tokens, last.completion_tokens) == (
        "length",
        prompt_length,
        NEW_TOKENS,
    )


def test_logprobs_are_the_raw_models(engine, folder, reference):
    outputs = asyncio.run(collect(engine.generate(prepared(folder, logprobs=True, top_logprobs=3))))
    logprobs = [lp for output in outputs for lp in output.logprobs]
    assert [lp.token_id for lp in logprobs] == reference["tokens"]
    for step, lp in enumerate(logprobs):
        expected = reference["logprobs"][step]
        assert lp.logprob == pytest.approx(float(expected[lp.token_id]), abs=1e-5)
        values, ids = expected.topk(3)
        assert [token for token, _ in lp.top] == ids.tolist()  # the greedy token first
        assert [value for _, value in lp.top] == pytest.approx(values.tolist(), abs=1e-5)
    assert all(not output.logprobs for output in asyncio.run(collect(engine.generate(prepared(folder)))))


def test_sampling_follows_the_seed_and_top_k_1_is_greedy(engine, folder, reference):
    def sample(**sampling):
        return generated(asyncio.run(collect(engine.generate(prepared(folder, temperature=1.0, **sampling)))))

    first, again, other = sample(seed=7), sample(seed=7), sample(seed=8)
    assert first == again and first != other and first != reference["tokens"]
    assert sample(seed=7, top_k=1) == reference["tokens"]
    assert sample(seed=7, top_p=1e-9) == reference["tokens"]  # the likeliest token alone holds the mass


def test_a_stop_token_ends_generation_unless_min_tokens_holds_it_off(engine, folder, reference):
    stop = reference["tokens"][2]
    outputs = asyncio.run(collect(engine.generate(prepared(folder, stop_token_ids=(stop,)))))
    assert generated(outputs) == reference["tokens"][:3]  # the stop token is the last one made
    assert (outputs[-1].finish_reason, outputs[-1].completion_tokens) == ("stop", 3)

    held = generated(
        asyncio.run(
            collect(engine.generate(prepared(folder, stop_token_ids=(stop,), min_tokens=4, max_tokens=6)))
        )
    )
    assert held[:2] == reference["tokens"][:2] and stop not in held[:4] and len(held) >= 4


def test_closing_the_generator_stops_generation(engine, folder, reference, caplog):
    async def read_two_and_leave():
        outputs = engine.generate(prepared(folder, max_tokens=3000))
        await anext(outputs)
        await anext(outputs)
        await outputs.aclose()
        # the engine's one thread is free again once the closed generation has stopped
        return await collect(engine.generate(prepared(folder, max_tokens=2)))

    with caplog.at_level(logging.DEBUG, logger="mmprep.transformers"):
        after = asyncio.run(read_two_and_leave())
    assert generated(after) == reference["tokens"][:2]
    stopped = [r for r in caplog.records if "generation stopped after" in r.getMessage()]
    assert len(stopped) == 1
    made = int(stopped[0].getMessage().split()[3])
    assert made < 20, stopped[0].getMessage()  # within a step or so of the close, not 3000


@pytest.mark.parametrize(
    "change, code, param",
    [
        ({"prompt": None}, "prompt_required", None),
        ({"media": "unprocessed"}, "unprocessed_media", "messages[0].content[0].video_url"),
        ({"prompt": "one token short"}, "placeholder_mismatch", "messages"),
        ({"max_tokens": 5000}, "context_length_exceeded", "max_tokens"),
    ],
    ids=["no-prompt", "unprocessed", "placeholders", "too-long"],
)
def test_a_request_it_cannot_run_is_a_400_saying_why(engine, folder, reference, change, code, param):
    good = prepared(folder, max_tokens=change.get("max_tokens", NEW_TOKENS))
    prompt, media = good.prompt, good.media
    if change.get("prompt") is None and "prompt" in change:
        prompt = None
    elif "prompt" in change:  # one placeholder token fewer than the video makes
        ids = list(prompt.token_ids)
        ids.remove(VIDEO_TOKEN)
        prompt = TokenPrompt(tuple(ids), prompt.placeholders)
    if change.get("media") == "unprocessed":
        media = [MediaItem("video", media[0].tensor, {}, media[0].param, hf_metadata=media[0].hf_metadata)]
    bad = PreparedRequest(good.request_id, good.model, [], media, good.sampling, prompt=prompt)
    with pytest.raises(EngineHTTPError) as caught:
        asyncio.run(collect(engine.generate(bad)))
    assert (caught.value.status, caught.value.code, caught.value.param) == (400, code, param)


def test_options_come_from_the_environment_and_a_bad_one_is_named(folder, monkeypatch, tmp_path):
    monkeypatch.delenv(MODEL_VARIABLE, raising=False)
    with pytest.raises(ValueError, match=MODEL_VARIABLE):
        TransformersEngine()
    monkeypatch.setenv(MODEL_VARIABLE, str(folder / "missing"))
    with pytest.raises(ValueError, match=f"{MODEL_VARIABLE}=.*no such model folder"):
        TransformersEngine()
    monkeypatch.setenv(MODEL_VARIABLE, str(make_model_folder("qwen2_vl", tmp_path / "configs-only")))
    with pytest.raises(ValueError, match=f"{MODEL_VARIABLE}=.*no weights"):
        TransformersEngine()
    monkeypatch.setenv(MODEL_VARIABLE, str(folder))
    monkeypatch.setenv("MMPREP_TRANSFORMERS_DTYPE", "float64")
    with pytest.raises(ValueError, match="MMPREP_TRANSFORMERS_DTYPE=float64: choose one of"):
        TransformersEngine()
    monkeypatch.setenv("MMPREP_TRANSFORMERS_DTYPE", "bfloat16")
    monkeypatch.setenv("MMPREP_TRANSFORMERS_DEVICE", "gpu")
    with pytest.raises(ValueError, match="MMPREP_TRANSFORMERS_DEVICE=gpu: not a torch device"):
        TransformersEngine()
    monkeypatch.setenv("MMPREP_TRANSFORMERS_DEVICE", "cpu")
    monkeypatch.setenv("MMPREP_TRANSFORMERS_DTPYE", "float16")
    with pytest.raises(ValueError, match="unknown setting.*MMPREP_TRANSFORMERS_DTPYE"):
        TransformersEngine()
    monkeypatch.delenv("MMPREP_TRANSFORMERS_DTPYE")
    engine = TransformersEngine()
    assert (engine.folder, str(engine.device), engine.dtype) == (folder, "cpu", "bfloat16")


def test_behind_a_worker_the_ids_and_logprobs_are_the_same(engine, folder, reference, worker):
    """A real worker and the frontend's RemoteWorkersEngine: the prompt goes over the wire,
    the same ids, logprobs, finish reason and counts come back as in process."""
    sampling = {"logprobs": True, "top_logprobs": 2}
    local = asyncio.run(collect(engine.generate(prepared(folder, **sampling))))

    async def through(url):
        remote = RemoteWorkersEngine([url])
        await remote.start()
        try:
            outputs = await collect(remote.generate(prepared(folder, **sampling)))
            with pytest.raises(EngineHTTPError) as refused:
                await collect(remote.generate(PreparedRequest("chatcmpl-2", "tiny", [], [])))
            return outputs, refused.value
        finally:
            await remote.stop()

    outputs, refused = asyncio.run(through(worker.url))
    assert generated(outputs) == reference["tokens"]
    assert [lp for o in outputs for lp in o.logprobs] == [lp for o in local for lp in o.logprobs]
    assert outputs[-1] == local[-1] and outputs[-1].finish_reason == "length"
    assert (refused.status, refused.code) == (400, "prompt_required")
    assert "--model" in refused.message


def ask(server, folder, stream: bool):
    """CHAT through the openai client, asking for logprobs: the answer's text, its finish
    reason, its tokens' logprobs and its usage."""
    client = openai_client(server)
    options = {
        "model": folder.name,
        "messages": CHAT,
        "max_tokens": NEW_TOKENS,
        "logprobs": True,
        "top_logprobs": 2,
    }
    if not stream:
        choice = (answer := client.chat.completions.create(**options)).choices[0]
        return (
            choice.message.content,
            choice.finish_reason,
            [lp.logprob for lp in choice.logprobs.content],
            answer.usage,
        )
    chunks = list(
        client.chat.completions.create(**options, stream=True, stream_options={"include_usage": True})
    )
    choices = [chunk.choices[0] for chunk in chunks if chunk.choices]
    text = "".join(choice.delta.content or "" for choice in choices)
    logprobs = [lp.logprob for choice in choices if choice.logprobs for lp in choice.logprobs.content]
    return text, choices[-1].finish_reason, logprobs, chunks[-1].usage


def expected_answer(folder, reference):
    """transformers' tokens as the client should read them: decoded by the folder's
    tokenizer (special tokens skipped, as vLLM does), their logprobs, the usage."""
    tokenizer = load_model_folder(str(folder)).tokenizer
    logprobs = [float(reference["logprobs"][step][token]) for step, token in enumerate(reference["tokens"])]
    usage = (reference["inputs"]["input_ids"].shape[1], NEW_TOKENS)
    return tokenizer.decode(reference["tokens"], skip_special_tokens=True), "length", logprobs, usage


def check_answer(answer, expected) -> None:
    text, finish, logprobs, usage = answer
    assert (text, finish) == expected[:2]  # transformers' greedy tokens, end to end
    assert logprobs == pytest.approx(expected[2], abs=1e-5)
    assert (usage.prompt_tokens, usage.completion_tokens) == expected[3]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_mmprep_serve_with_the_engine_class_answers_as_transformers(folder, reference, monkeypatch, stream):
    """`mmprep serve --model FOLDER --engine-class ...TransformersEngine`, the engine made as
    the flag makes it (no arguments: its folder from the environment), and the openai client."""
    monkeypatch.setenv(MODEL_VARIABLE, str(folder))
    monkeypatch.setenv("MMPREP_TRANSFORMERS_DEVICE", "cpu")
    with LiveServer(Settings(model=folder, engine_class=ENGINE_CLASS)) as server:
        check_answer(ask(server, folder, stream), expected_answer(folder, reference))


def test_a_completion_is_transformers_greedy_continuation_of_the_prompt(folder, monkeypatch):
    """/v1/completions with the engine class: a text prompt tokenized as it is (no chat
    template) and its greedy continuation, transformers' own, whole and streamed; token ids
    the same ids."""
    monkeypatch.setenv(MODEL_VARIABLE, str(folder))
    monkeypatch.setenv("MMPREP_TRANSFORMERS_DEVICE", "cpu")
    model_folder = load_model_folder(str(folder))
    ids = model_folder.encode("Once upon a time")
    inputs = {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long)}
    tokens, logits = transformers_generate(folder, inputs, max_new_tokens=8)
    expected = model_folder.tokenizer.decode(tokens, skip_special_tokens=True)
    with LiveServer(Settings(model=folder, engine_class=ENGINE_CLASS)) as server:
        client = openai_client(server)
        whole = client.completions.create(
            model=folder.name, prompt="Once upon a time", max_tokens=8, logprobs=1
        )
        chunks = list(client.completions.create(model=folder.name, prompt=[ids], max_tokens=8, stream=True))
    (choice,) = whole.choices
    assert (choice.text, choice.finish_reason, whole.usage.prompt_tokens) == (expected, "length", len(ids))
    steps = [float(logits[step][token]) for step, token in enumerate(tokens)]
    assert choice.logprobs.token_logprobs == pytest.approx(steps, abs=1e-5)
    assert "".join(c.choices[0].text for c in chunks if c.choices) == expected


def test_the_messages_and_responses_apis_answer_as_transformers(folder, monkeypatch):
    """/v1/messages (the official anthropic client) and /v1/responses (openai's), whole and
    streamed, with an image and a question: the answer is transformers' greedy text for the
    same chat, as the chat route's is. 224 x 224 PNG: never resized, so the pixels are equal."""
    monkeypatch.setenv(MODEL_VARIABLE, str(folder))
    monkeypatch.setenv("MMPREP_TRANSFORMERS_DEVICE", "cpu")
    pixels = np.random.default_rng(2).integers(0, 256, (224, 224, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG")
    png = base64.b64encode(buffer.getvalue()).decode()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        processor = transformers.AutoProcessor.from_pretrained(folder)
        text = processor.apply_chat_template(
            [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": QUESTION}]}],
            add_generation_prompt=True,
        )
        inputs = processor(text=[text], images=[pixels], return_tensors="pt")
    tokens, _ = transformers_generate(folder, inputs)
    expected = load_model_folder(str(folder)).tokenizer.decode(tokens, skip_special_tokens=True)

    block = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}
    messages = [{"role": "user", "content": [block, {"type": "text", "text": QUESTION}]}]
    parts = [
        {"type": "input_image", "image_url": f"data:image/png;base64,{png}"},
        {"type": "input_text", "text": QUESTION},
    ]
    request = {"model": folder.name, "input": [{"role": "user", "content": parts}]}
    with LiveServer(Settings(model=folder, engine_class=ENGINE_CLASS)) as server:
        claude = anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0)
        message = claude.messages.create(model=folder.name, max_tokens=NEW_TOKENS, messages=messages)
        with claude.messages.stream(model=folder.name, max_tokens=NEW_TOKENS, messages=messages) as stream:
            streamed_message = stream.get_final_message()
        response = openai_client(server).responses.create(**request, max_output_tokens=NEW_TOKENS)
        events = list(
            openai_client(server).responses.create(**request, max_output_tokens=NEW_TOKENS, stream=True)
        )
    assert (message.content[0].text, message.stop_reason) == (expected, "max_tokens")
    assert streamed_message.content[0].text == expected
    assert (response.output_text, response.incomplete_details.reason) == (expected, "max_output_tokens")
    assert events[-1].type == "response.incomplete" and events[-1].response.output_text == expected


def test_mmprep_serve_in_front_of_a_worker_answers_as_transformers(folder, reference, worker):
    """`mmprep serve --model FOLDER --engine workers --worker-url` in front of the worker."""
    with LiveServer(Settings(model=folder, engine="workers", worker_url=[worker.url])) as server:
        check_answer(ask(server, folder, stream=True), expected_answer(folder, reference))


def test_qwen2_5_vl_gets_the_seconds_per_grid_transformers_computes(tmp_path):
    """Qwen2.5-VL's M-RoPE spaces a video's temporal positions by second_per_grid_ts, which
    transformers' processor computes from the video's metadata (temporal_patch_size over the
    sampled fps, here 2 / 4): the engine computes the same from the item's hf_metadata. The
    weights are 25 times the usual scale, so that the spacing changes the greedy tokens."""
    folder = build_model_folder(tmp_path / "tiny-qwen2.5-vl", "qwen2_5_vl", initializer_range=0.5)
    inputs = transformers_inputs(folder)
    assert inputs["second_per_grid_ts"].tolist() == [0.5]
    tokens, expected = transformers_generate(folder, inputs, max_new_tokens=4)
    unspaced, _ = transformers_generate(
        folder, inputs, max_new_tokens=4, second_per_grid_ts=torch.tensor([1.0])
    )
    assert unspaced != tokens  # without the spacing, other tokens

    engine = TransformersEngine(folder, device="cpu")
    asyncio.run(engine.start())
    try:
        outputs = asyncio.run(collect(engine.generate(prepared(folder, max_tokens=4, logprobs=True))))
    finally:
        asyncio.run(engine.stop())
    got = [lp for output in outputs for lp in output.logprobs]
    assert [lp.token_id for lp in got] == tokens
    assert [lp.logprob for lp in got] == pytest.approx(expected.max(-1).values.tolist(), abs=1e-5)


@pytest.mark.parametrize("family", ["qwen3_vl", "qwen3_5", "llava_onevision", "gemma4"])
def test_greedy_ids_are_transformers(tmp_path, family):
    """Qwen3-VL: the render puts each temporal block's time before it, and the model's M-RoPE
    takes one grid per block. Qwen3.5: the same prompt and tensors, into a hybrid model
    (linear and full attention) of its own vocabulary. LLaVA-OneVision: whole 384 x 384
    frames (the tiles layout), 14 x 14 pooled tokens a frame and a newline. Gemma 4: each
    frame's patches with their positions, pooled 3 x 3 behind a time stamp. The engine's ids
    on mmprep's prompt and tensors are still transformers' own."""
    folder = build_model_folder(tmp_path / f"tiny-{family}", family, initializer_range=0.2)
    inputs = transformers_inputs(folder)
    request = prepared(folder, max_tokens=8)
    assert list(request.prompt.token_ids) == inputs["input_ids"][0].tolist()
    tokens, _ = transformers_generate(folder, inputs, max_new_tokens=8)

    engine = TransformersEngine(folder, device="cpu")
    asyncio.run(engine.start())
    try:
        assert generated(asyncio.run(collect(engine.generate(request)))) == tokens
    finally:
        asyncio.run(engine.stop())


def test_a_family_it_cannot_feed_stops_the_start_naming_it(tmp_path):
    """InternVL's model takes every tile, images' and videos', as one pixel_values: the engine
    refuses its folder at start rather than hand the model what it does not take."""
    folder = build_model_folder(tmp_path / "tiny-internvl", "internvl")
    engine = TransformersEngine(folder, device="cpu")
    with pytest.raises(ValueError, match="is of the internvl family, which this engine cannot feed yet"):
        asyncio.run(engine.start())
    asyncio.run(engine.stop())
