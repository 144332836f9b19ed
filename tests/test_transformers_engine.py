"""The transformers engine (app/engines/transformers_engine.py) on a tiny Qwen2-VL with random
weights, on CPU: for the same frames, its greedy token ids are transformers' own (its
processor, then model.generate), in process and behind a real `mmprep worker`.

The model folder is built here, nothing downloaded: a Qwen2VLConfig with tiny text and
vision sizes but the real vocabulary size and special token ids, random weights from a
fixed seed, a small word-level tokenizer that knows Qwen's special tokens at their ids,
and a processor config. The frames are sized so that no resize applies: our processor's
tensors then equal transformers' to the bit, and random weights leave greedy decoding no
margin for anything less. Skipped without torch (mmprep does not depend on it).
"""

from __future__ import annotations

import asyncio
import logging

import numpy as np
import pytest

REASON = "needs torch and transformers (pip install mmprep[transformers])"
torch = pytest.importorskip("torch", reason=REASON)
transformers = pytest.importorskip("transformers", reason=REASON)

from app.engines import EngineHTTPError
from app.engines.prepared import MediaItem, Placeholder, PreparedRequest, SamplingParams, TokenPrompt
from app.engines.transformers_engine import MODEL_VARIABLE, TransformersEngine
from app.testing.servers import WorkerProcess
from app.workers.remote import RemoteWorkersEngine
from processors import load_processor

pytestmark = pytest.mark.slow  # torch models generating, and a worker process

ENGINE_CLASS = "app.engines.transformers_engine:TransformersEngine"
SPECIAL_TOKENS = {  # Qwen2-VL's, at their ids
    "<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645, "<|vision_start|>": 151652,
    "<|vision_end|>": 151653, "<|vision_pad|>": 151654, "<|image_pad|>": 151655, "<|video_pad|>": 151656,
}
VIDEO_TOKEN = SPECIAL_TOKENS["<|video_pad|>"]
PROMPT = (
    "<|im_start|>user\n<|vision_start|><|video_pad|><|vision_end|>describe this video<|im_end|>\n"
    "<|im_start|>assistant\n"
)
NEW_TOKENS = 16
# 4 frames of 56 x 84: a multiple of the 28-pixel merge block within the pixel bounds, so not resized
FRAMES = np.random.default_rng(1).integers(0, 256, (4, 56, 84, 3), dtype=np.uint8)
# every other frame of 1 s at 8 fps: 4 frames a second, so Qwen2.5-VL's second_per_grid_ts is 2 / 4
HF_METADATA = {"total_num_frames": 8, "fps": 8.0, "width": 84, "height": 56, "duration": 1.0,
               "video_backend": "pyav", "frames_indices": [0, 2, 4, 6]}
TEXT_CONFIG = {  # the real vocabulary size; the special token ids are the configs' defaults, the real ones
    "vocab_size": 151936, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 4096,
    "rope_parameters": {"rope_type": "default", "mrope_section": [1, 1, 2], "rope_theta": 1e6},
}


def build_model_folder(folder, family: str = "qwen2_vl") -> None:
    """A tiny model of `family` (qwen2_vl or qwen2_5_vl) with random weights, its tokenizer
    and its processor's configs, written to `folder`."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import (
        PreTrainedTokenizerFast,
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLProcessor,
        Qwen2VLConfig,
        Qwen2VLForConditionalGeneration,
        Qwen2VLImageProcessor,
        Qwen2VLProcessor,
        Qwen2VLVideoProcessor,
    )

    words = ["<unk>", "user", "assistant", "describe", "this", "video"]
    vocabulary = {word: i for i, word in enumerate(words)} | SPECIAL_TOKENS
    tokenizer = Tokenizer(models.WordLevel(vocabulary, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="<unk>", eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    size = {"shortest_edge": 28 * 28 * 4, "longest_edge": 28 * 28 * 64}
    parts = {"image_processor": Qwen2VLImageProcessor(size=size), "tokenizer": tokenizer,
             "video_processor": Qwen2VLVideoProcessor(size=size, cap_pixels_per_frame=False)}
    if family == "qwen2_vl":
        processor = Qwen2VLProcessor(**parts)
        vision = {"depth": 2, "embed_dim": 32, "hidden_size": 32, "num_heads": 4, "mlp_ratio": 2}
        model = Qwen2VLConfig, Qwen2VLForConditionalGeneration
    else:
        processor = Qwen2_5_VLProcessor(**parts)
        vision = {"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 4, "out_hidden_size": 32,
                  "fullatt_block_indexes": [1], "tokens_per_second": 25}
        model = Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration
    config_class, model_class = model
    torch.manual_seed(0)
    model_class(config_class(text_config=TEXT_CONFIG, vision_config=vision)).save_pretrained(folder)
    processor.save_pretrained(folder)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-qwen2-vl")
    build_model_folder(folder)
    return folder


@pytest.fixture(scope="module")
def reference(folder):
    """transformers alone: its processor on the frames, then greedy model.generate, with
    the raw logits of every step."""
    processor = transformers.AutoProcessor.from_pretrained(folder)
    inputs = processor(text=[PROMPT], videos=[FRAMES], do_sample_frames=False, return_tensors="pt")
    model = transformers.AutoModelForImageTextToText.from_pretrained(folder).eval()
    out = model.generate(**inputs, max_new_tokens=NEW_TOKENS, do_sample=False, return_dict_in_generate=True,
                         output_logits=True)
    prompt_length = inputs["input_ids"].shape[1]
    return {
        "inputs": inputs,
        "tokens": out.sequences[0, prompt_length:].tolist(),
        "logprobs": torch.log_softmax(torch.stack(out.logits)[:, 0].float(), dim=-1),
    }


@pytest.fixture(scope="module")
def engine(folder):
    engine = TransformersEngine(folder, device="cpu")
    asyncio.run(engine.start())
    yield engine
    asyncio.run(engine.stop())


def request(reference, folder, **sampling) -> PreparedRequest:
    """What mmprep hands the engine: the prompt's ids (from transformers' processor until
    mmprep renders prompts itself) and our processor's tensors for the frames."""
    ids = reference["inputs"]["input_ids"][0].tolist()
    processed = load_processor(folder).process_video(FRAMES)
    video = MediaItem("video", FRAMES, {}, "messages[0].content[0].video_url", processed=processed,
                      hf_metadata=HF_METADATA)
    prompt = TokenPrompt(tuple(ids), (Placeholder("video", 0, ids.index(VIDEO_TOKEN), processed.num_tokens),))
    sampling.setdefault("max_tokens", NEW_TOKENS)
    return PreparedRequest("chatcmpl-1", "tiny", [], [video], SamplingParams(**sampling), prompt=prompt)


async def collect(outputs) -> list:
    return [output async for output in outputs]


def generated(outputs) -> list[int]:
    return [token for output in outputs for token in output.token_ids]


def test_our_tensors_are_transformers(folder, reference):
    """The premise of comparing ids: the same pixels reach both models."""
    ours = load_processor(folder).process_video(FRAMES).tensors
    for key in ("pixel_values_videos", "video_grid_thw"):
        np.testing.assert_array_equal(ours[key], reference["inputs"][key].numpy())


def test_greedy_ids_are_transformers_and_come_one_by_one(engine, folder, reference):
    outputs = asyncio.run(collect(engine.generate(request(reference, folder))))
    assert generated(outputs) == reference["tokens"]
    assert [len(output.token_ids) for output in outputs[:-1]] == [1] * NEW_TOKENS  # streamed, a token at a time
    last = outputs[-1]
    prompt_length = reference["inputs"]["input_ids"].shape[1]
    assert (last.finish_reason, last.prompt_tokens, last.completion_tokens) == ("length", prompt_length, NEW_TOKENS)


def test_logprobs_are_the_raw_models(engine, folder, reference):
    outputs = asyncio.run(collect(engine.generate(request(reference, folder, logprobs=True, top_logprobs=3))))
    logprobs = [lp for output in outputs for lp in output.logprobs]
    assert [lp.token_id for lp in logprobs] == reference["tokens"]
    for step, lp in enumerate(logprobs):
        expected = reference["logprobs"][step]
        assert lp.logprob == pytest.approx(float(expected[lp.token_id]), abs=1e-5)
        values, ids = expected.topk(3)
        assert [token for token, _ in lp.top] == ids.tolist()  # the greedy token first
        assert [value for _, value in lp.top] == pytest.approx(values.tolist(), abs=1e-5)
    assert all(not output.logprobs for output in asyncio.run(collect(engine.generate(request(reference, folder)))))


def test_sampling_follows_the_seed_and_top_k_1_is_greedy(engine, folder, reference):
    def sample(**sampling):
        return generated(asyncio.run(collect(engine.generate(request(reference, folder, temperature=1.0, **sampling)))))

    first, again, other = sample(seed=7), sample(seed=7), sample(seed=8)
    assert first == again and first != other and first != reference["tokens"]
    assert sample(seed=7, top_k=1) == reference["tokens"]
    assert sample(seed=7, top_p=1e-9) == reference["tokens"]  # the likeliest token alone holds the mass


def test_a_stop_token_ends_generation_unless_min_tokens_holds_it_off(engine, folder, reference):
    stop = reference["tokens"][2]
    outputs = asyncio.run(collect(engine.generate(request(reference, folder, stop_token_ids=(stop,)))))
    assert generated(outputs) == reference["tokens"][:3]  # the stop token is the last one made
    assert (outputs[-1].finish_reason, outputs[-1].completion_tokens) == ("stop", 3)

    held = generated(asyncio.run(collect(engine.generate(
        request(reference, folder, stop_token_ids=(stop,), min_tokens=4, max_tokens=6)
    ))))
    assert held[:2] == reference["tokens"][:2] and stop not in held[:4] and len(held) >= 4


def test_closing_the_generator_stops_generation(engine, folder, reference, caplog):
    async def read_two_and_leave():
        outputs = engine.generate(request(reference, folder, max_tokens=4000))
        await anext(outputs)
        await anext(outputs)
        await outputs.aclose()
        # the engine's one thread is free again once the closed generation has stopped
        return await collect(engine.generate(request(reference, folder, max_tokens=2)))

    with caplog.at_level(logging.INFO, logger="mmprep.transformers"):
        after = asyncio.run(read_two_and_leave())
    assert generated(after) == reference["tokens"][:2]
    stopped = [r for r in caplog.records if "generation stopped after" in r.getMessage()]
    assert len(stopped) == 1
    made = int(stopped[0].getMessage().split()[3])
    assert made < 20, stopped[0].getMessage()  # within a step or so of the close, not 4000


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
    good = request(reference, folder, max_tokens=change.get("max_tokens", NEW_TOKENS))
    prompt, media = good.prompt, good.media
    if change.get("prompt") is None and "prompt" in change:
        prompt = None
    elif "prompt" in change:  # one placeholder token fewer than the video makes
        ids = list(prompt.token_ids)
        ids.remove(VIDEO_TOKEN)
        prompt = TokenPrompt(tuple(ids), prompt.placeholders)
    if change.get("media") == "unprocessed":
        media = [MediaItem("video", FRAMES, {}, media[0].param, hf_metadata=HF_METADATA)]
    bad = PreparedRequest(good.request_id, good.model, [], media, good.sampling, prompt=prompt)
    with pytest.raises(EngineHTTPError) as caught:
        asyncio.run(collect(engine.generate(bad)))
    assert (caught.value.status, caught.value.code, caught.value.param) == (400, code, param)


def test_options_come_from_the_environment_and_a_bad_one_is_named(folder, monkeypatch):
    monkeypatch.delenv(MODEL_VARIABLE, raising=False)
    with pytest.raises(ValueError, match=MODEL_VARIABLE):
        TransformersEngine()
    monkeypatch.setenv(MODEL_VARIABLE, str(folder / "missing"))
    with pytest.raises(ValueError, match=f"{MODEL_VARIABLE}=.*no such model folder"):
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


def test_behind_a_worker_the_ids_and_logprobs_are_the_same(engine, folder, reference):
    """`mmprep worker --engine-class ...TransformersEngine` (a real process) and the
    frontend's RemoteWorkersEngine: the prompt goes over the wire, ids and logprobs come back."""
    env = {MODEL_VARIABLE: str(folder), "MMPREP_TRANSFORMERS_DEVICE": "cpu"}
    sampling = {"logprobs": True, "top_logprobs": 2}
    local = asyncio.run(collect(engine.generate(request(reference, folder, **sampling))))

    async def through(url):
        remote = RemoteWorkersEngine([url])
        await remote.start()
        try:
            outputs = await collect(remote.generate(request(reference, folder, **sampling)))
            with pytest.raises(EngineHTTPError) as refused:
                await collect(remote.generate(PreparedRequest("chatcmpl-2", "tiny", [], [])))
            return outputs, refused.value
        finally:
            await remote.stop()

    worker = WorkerProcess("--engine-class", ENGINE_CLASS, env=env).start()
    try:
        worker.wait_ready(timeout=60)  # torch and transformers take a while to import
        outputs, refused = asyncio.run(through(worker.url))
    finally:
        worker.close()
    assert generated(outputs) == reference["tokens"]
    # the same logprobs, finish reason and counts as in process
    assert [lp for o in outputs for lp in o.logprobs] == [lp for o in local for lp in o.logprobs]
    assert outputs[-1] == local[-1] and outputs[-1].finish_reason == "length"
    assert (refused.status, refused.code) == (400, "prompt_required")
    assert "--model" in refused.message


def test_qwen2_5_vl_gets_the_seconds_per_grid_transformers_computes(tmp_path):
    """Qwen2.5-VL's M-RoPE spaces a video's temporal positions by second_per_grid_ts, which
    transformers' processor computes from the video's metadata (temporal_patch_size over the
    sampled fps): the engine computes the same from the item's hf_metadata."""
    build_model_folder(tmp_path, "qwen2_5_vl")
    processor = transformers.AutoProcessor.from_pretrained(tmp_path)
    inputs = processor(text=[PROMPT], videos=[FRAMES], do_sample_frames=False, video_metadata=[HF_METADATA],
                       return_tensors="pt")
    assert inputs["second_per_grid_ts"].tolist() == [0.5]
    model = transformers.AutoModelForImageTextToText.from_pretrained(tmp_path).eval()

    def logprobs(**changed):
        out = model.generate(**{**inputs, **changed}, max_new_tokens=4, do_sample=False,
                             return_dict_in_generate=True, output_logits=True)
        return torch.log_softmax(torch.stack(out.logits)[:, 0].float(), dim=-1)

    expected, unspaced = logprobs(), logprobs(second_per_grid_ts=torch.tensor([1.0]))
    assert not torch.allclose(expected, unspaced, atol=1e-6)  # the spacing shows in the logits

    engine = TransformersEngine(tmp_path, device="cpu")
    asyncio.run(engine.start())
    try:
        request_ = request({"inputs": inputs}, tmp_path, max_tokens=4, logprobs=True, top_logprobs=1)
        outputs = asyncio.run(collect(engine.generate(request_)))
    finally:
        asyncio.run(engine.stop())
    got = [lp for output in outputs for lp in output.logprobs]
    assert [lp.token_id for lp in got] == expected.argmax(-1).tolist()
    assert [lp.logprob for lp in got] == pytest.approx(expected.max(-1).values.tolist(), abs=1e-5)
