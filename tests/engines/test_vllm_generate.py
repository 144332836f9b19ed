"""mmprep's --engine vllm-generate against a vLLM-like /inference/v1/generate
(tests/support/vllm_like.py's VllmGenerateLike, a real uvicorn server on loopback that checks
each request as vLLM 0.33.0 does and answers token ids), streamed and not."""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import itertools
import json
from dataclasses import replace

import httpx
import numpy as np
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from mmprep.core.config import Settings
from mmprep.engines.loading import build_engine
from mmprep.engines.vllm_generate import VllmGenerateEngine, root_url
from mmprep.interface.engine import EngineHTTPError, EngineOutput
from mmprep.interface.prepared import SamplingParams
from mmprep.service import load_resources
from mmprep.vllm.sampling import generation_defaults
from tests.support.chat import chat, data_url, image, openai_client, png_data_url, post, video
from tests.support.media import MEDIA
from tests.support.model_folder import make_model_folder
from tests.support.servers import LiveServer, ThreadServer, free_port
from tests.support.vllm_cases import VIDEO_PAD, build_case
from tests.support.vllm_like import ANSWER_IDS, VllmGenerateLike

MODEL = "test-vlm"


@pytest.fixture(scope="module")
def upstream():
    server = VllmGenerateLike(model=MODEL, max_model_len=4096)
    with ThreadServer(server.app) as running:
        server.url = running.url
        yield server


def run(engine: VllmGenerateEngine, prepared) -> list[EngineOutput]:
    async def go():
        await engine.start()
        try:
            return [output async for output in engine.generate(prepared)]
        finally:
            await engine.stop()

    return asyncio.run(go())


def engine_for(url: str, case) -> VllmGenerateEngine:
    return VllmGenerateEngine(url, case.options, connect_timeout=1.0, read_timeout=10.0)


@pytest.mark.parametrize("stream", [False, True])
def test_token_ids_come_back(upstream, stream):
    case = build_case("qwen2_vl_video_image")
    prepared = replace(case.prepared, stream=stream)
    outputs = run(engine_for(f"{upstream.url}/v1", case), prepared)
    assert [t for output in outputs for t in output.token_ids] == list(ANSWER_IDS)
    assert all(output.text == "" for output in outputs)
    last = outputs[-1]
    assert last.finish_reason == "stop"
    assert last.prompt_tokens == len(prepared.prompt.token_ids) and last.completion_tokens == len(ANSWER_IDS)
    # logprobs: one per token, the top 2 best first (the client's top_logprobs)
    logprobs = [entry for output in outputs for entry in output.logprobs]
    assert [entry.token_id for entry in logprobs] == list(ANSWER_IDS)
    assert all(len(entry.top) == 2 and entry.top[0][1] >= entry.top[1][1] for entry in logprobs)


def test_the_upstream_gets_the_processors_tensors_unchanged(upstream):
    """Lossless: the items vLLM decodes are the float32 tensors mmprep's processor made."""
    case = build_case("qwen2_5_vl_two_videos")
    run(engine_for(upstream.url, case), case.prepared)
    received = upstream.received[-1]
    body, items = received["body"], received["items"]
    assert body["token_ids"] == list(case.prepared.prompt.token_ids)
    assert body["stream"] is True and body["stream_options"]["include_usage"] is True
    assert "stop" not in body["sampling_params"] or body["sampling_params"]["stop"] == []
    assert body["sampling_params"]["detokenize"] is False
    videos = [item for item in case.media if item.kind == "video"]
    for item, media in zip(items["video"], videos, strict=True):
        np.testing.assert_array_equal(
            item["pixel_values_videos"].data, media.processed.tensors["pixel_values_videos"]
        )
    (image,) = [item for item in case.media if item.kind == "image"]
    np.testing.assert_array_equal(
        items["image"][0]["pixel_values"].data, image.processed.tensors["pixel_values"]
    )


@pytest.mark.parametrize("stream", [False, True])
def test_max_tokens_cuts_with_length(upstream, stream):
    case = build_case("qwen3_vl_image")
    prepared = replace(case.prepared, stream=stream, sampling=SamplingParams(max_tokens=2))
    outputs = run(engine_for(upstream.url, case), prepared)
    assert [t for output in outputs for t in output.token_ids] == list(ANSWER_IDS[:2])
    assert outputs[-1].finish_reason == "length" and outputs[-1].completion_tokens == 2


@pytest.mark.parametrize("stream", [False, True])
def test_upstream_errors_keep_their_status(upstream, stream):
    case = build_case("qwen3_vl_image")
    wrong_model = replace(case.options, served_model="another-model")
    with pytest.raises(EngineHTTPError) as refused:
        run(VllmGenerateEngine(upstream.url, wrong_model), replace(case.prepared, stream=stream))
    assert refused.value.status == 404 and "another-model" in refused.value.message
    upstream.max_model_len = 8  # shorter than the prompt: vLLM's input processor refuses it
    try:
        with pytest.raises(EngineHTTPError) as refused:
            run(engine_for(upstream.url, case), replace(case.prepared, stream=stream))
    finally:
        upstream.max_model_len = 4096
    assert (
        refused.value.status == 400 and "longer than the maximum model length of 8" in refused.value.message
    )


@pytest.fixture(scope="module")
def broken():
    """A server at /inference/v1/generate that answers what vLLM never would, or fails mid-stream."""
    app = FastAPI()

    @app.post("/inference/v1/generate")
    async def generate(request: Request):
        body = await request.json()
        if not body["stream"]:
            return JSONResponse({"choices": "none"})

        async def events():
            yield 'data: {"request_id": "x", "choices": [{"index": 0, "token_ids": [5]}]}\n\n'
            error = {
                "error": {"message": "Internal server error", "type": "InternalServerError", "code": 500}
            }
            yield f"data: {json.dumps(error)}\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    with ThreadServer(app) as server:
        yield server


@pytest.mark.parametrize("stream", [False, True])
def test_a_broken_upstream_is_a_502_saying_what_came(broken, stream):
    case = build_case("qwen3_vl_image")
    with pytest.raises(EngineHTTPError) as refused:
        run(engine_for(broken.url, case), replace(case.prepared, stream=stream))
    assert refused.value.status == 502
    assert ("none" if not stream else "Internal server error") in refused.value.message


def test_an_unreachable_upstream_is_a_502():
    case = build_case("qwen3_vl_image")
    with pytest.raises(EngineHTTPError) as refused:
        run(engine_for(f"http://127.0.0.1:{free_port()}", case), case.prepared)
    assert refused.value.status == 502 and refused.value.code == "upstream_unreachable"


def test_settings_name_the_engine_and_what_it_needs(tmp_path):
    with pytest.raises(ValueError, match="model"):
        Settings(engine="vllm-generate", upstream_url="http://127.0.0.1:1/v1", upstream_model=MODEL)
    with pytest.raises(ValueError, match="--upstream-model-id only applies with --model"):
        Settings(
            engine="openai", upstream_url="http://127.0.0.1:1/v1", upstream_model=MODEL, upstream_model_id="x"
        )
    folder = make_model_folder("qwen2_5_vl", tmp_path / "Qwen2.5-VL-7B-Instruct")
    settings = Settings(
        engine="vllm-generate",
        upstream_url="http://127.0.0.1:1/v1",
        upstream_model=MODEL,
        model=folder,
        upstream_model_id="Qwen/Qwen2.5-VL-7B-Instruct",
    )
    engine = build_engine(load_resources(settings))
    assert isinstance(engine, VllmGenerateEngine)
    assert engine.options.model_id == "Qwen/Qwen2.5-VL-7B-Instruct" and engine.options.family == "qwen2_5_vl"
    assert engine.options.served_model == MODEL
    assert engine.options.generation_defaults == generation_defaults(folder)  # the folder's sampling defaults
    assert root_url("http://vllm:8000/v1/") == "http://vllm:8000"


# -- through mmprep serve --model, real media --------------------------------------------


@pytest.fixture(scope="module")
def qwen2_folder(tmp_path_factory):
    return make_model_folder("qwen2_vl", tmp_path_factory.mktemp("models") / "Qwen2-VL-2B-Instruct")


@pytest.fixture(scope="module")
def front(upstream, qwen2_folder):
    settings = Settings(
        engine="vllm-generate",
        upstream_url=f"{upstream.url}/v1",
        upstream_model=MODEL,
        model=qwen2_folder,
        served_model_name=[MODEL],
        max_model_len=4096,  # the upstream's, as vllm serve --max-model-len gives it
        allow_private_networks=True,
    )
    with LiveServer(settings) as live:
        yield live


def test_a_chat_with_a_video_goes_to_vllm_as_tokens(front, upstream):
    clip = MEDIA / "bframes_h264.mp4"
    body = chat(
        video(data_url(clip, "video/mp4"), num_frames=4),
        {"type": "text", "text": "What is shown?"},
        model=MODEL,
    )
    answer = post(front, {**body, "max_tokens": 3})
    assert answer.status_code == 200, answer.text
    assert answer.json()["usage"]["completion_tokens"] == 3
    received = upstream.received[-1]
    sent = received["body"]
    (span,) = sent["features"]["mm_placeholders"]["video"]
    assert answer.json()["usage"]["prompt_tokens"] == len(sent["token_ids"])
    assert set(sent["token_ids"][span["offset"] : span["offset"] + span["length"]]) == {VIDEO_PAD}
    (item,) = received["items"]["video"]
    assert item["video_grid_thw"].data[0] == 2  # 4 frames, 2 per temporal block
    assert sent["sampling_params"]["max_tokens"] == 3 and sent["model"] == MODEL
    assert answer.json()["choices"][0]["message"]["content"] == "Hello, world"  # 3 of ANSWER_IDS, detokenized
    assert answer.json()["choices"][0]["finish_reason"] == "length"


def test_the_openai_client_streams_the_detokenized_answer(front):
    """The user's view: vLLM's token ids back as text, streamed, through the official client."""
    client = openai_client(front)
    clip = MEDIA / "bframes_h264.mp4"
    stream = client.chat.completions.create(
        model=MODEL,
        stream=True,
        stream_options={"include_usage": True},
        messages=[
            {
                "role": "user",
                "content": [video(data_url(clip, "video/mp4"), num_frames=4), {"type": "text", "text": "Hi"}],
            }
        ],
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hello, world!"
    assert chunks[-1].usage.completion_tokens == len(ANSWER_IDS)


def test_render_route_answers_what_generate_takes(front, upstream):
    """/v1/chat/completions/render's GenerateRequest, POSTed unchanged to the generate endpoint."""
    body = chat(image(png_data_url(64, 48)), {"type": "text", "text": "Describe."}, model=MODEL, max_tokens=2)
    rendered = httpx.post(f"{front.url}/v1/chat/completions/render", json=body, timeout=60)
    assert rendered.status_code == 200, rendered.text
    request = rendered.json()
    assert request["token_ids"] and request["features"]["kwargs_data"]["image"][0]
    again = httpx.post(f"{front.url}/v1/chat/completions/render", json=body, timeout=60).json()
    assert again["features"]["mm_hashes"] == request["features"]["mm_hashes"]  # the same image, the same hash
    generated = httpx.post(f"{upstream.url}/inference/v1/generate", json=request, timeout=60)
    assert generated.status_code == 200, generated.text
    assert generated.json()["choices"][0]["token_ids"] == list(ANSWER_IDS[:2])


def test_template_options_are_taken_and_unknown_fields_refused(front, upstream):
    body = chat(
        {"type": "text", "text": "Hi"},
        model=MODEL,
        max_tokens=1,
        top_k=3,
        chat_template_kwargs={"enable_thinking": False},
    )
    answer = post(front, body)
    assert answer.status_code == 200, answer.text
    assert upstream.received[-1]["body"]["sampling_params"]["top_k"] == 3
    refused = post(front, {**body, "tool_choice": "required"})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "tool_choice"


def test_render_route_needs_a_model_folder():
    with LiveServer(Settings()) as live:
        answer = httpx.post(
            f"{live.url}/v1/chat/completions/render", json=chat({"type": "text", "text": "hi"})
        )
    assert answer.status_code == 404 and "--model" in answer.json()["error"]["message"]


def in_front_of(upstream, folder) -> LiveServer:
    return LiveServer(
        Settings(
            engine="vllm-generate",
            upstream_url=upstream.url,
            upstream_model=MODEL,
            model=folder,
            served_model_name=[MODEL],
            allow_private_networks=True,
        )
    )


@pytest.mark.parametrize(
    ("family", "runs"), [("qwen3_vl", 2), ("qwen3_5", 2), ("internvl", 4), ("gemma4", 4)]
)
def test_a_video_split_by_text_goes_as_an_image_per_run(upstream, tmp_path, family, runs):
    """A video whose placeholder holds text between its embeddings (Qwen3-VL's and Qwen3.5's
    time stamp before each temporal block, InternVL's frame labels, Gemma 4's mm:ss stamps),
    which vLLM 0.33.0's protocol cannot mark: it goes as one image item per run (a temporal
    block of two frames, or a frame), each range its embeddings alone (the upstream checks
    each item's embeddings against its range), the text between plain prompt tokens."""
    folder = make_model_folder(family, tmp_path / family)
    with in_front_of(upstream, folder) as live:
        clip = MEDIA / "bframes_h264.mp4"
        answer = post(live, chat(video(data_url(clip, "video/mp4"), num_frames=4), model=MODEL))
    assert answer.status_code == 200, answer.text
    features = upstream.received[-1]["body"]["features"]
    ids = upstream.received[-1]["body"]["token_ids"]
    ranges = features["mm_placeholders"]["image"]
    assert set(features["mm_placeholders"]) == {"image"} and len(ranges) == runs
    for span in ranges:
        (pad,) = set(ids[span["offset"] : span["offset"] + span["length"]])
        assert ids[span["offset"] - 1] != pad and ids[span["offset"] + span["length"]] != pad
    assert len(set(features["mm_hashes"]["image"])) == runs


def test_a_tiled_llama4_image_goes_as_an_image_item_per_tile(upstream, tmp_path):
    """A Llama 4 image of several tiles has separators and <|image|> between its tiles'
    <|patch|> runs; mllama4.py embeds each tile by itself, so it goes as one image item per
    tile in the prompt's order (the global tile last): each range a run of 144 <|patch|>es,
    each item that tile's pixels (patches_per_image 1), each hash derived from the image's
    (the same image twice: the same keys, as vLLM keys a repeated item)."""
    from mmprep.decoders import decode_image
    from mmprep.processors import load_processor, torch_name
    from mmprep.vllm.hashing import run_hash
    from mmprep.vllm.serde import decode_item

    folder = make_model_folder("llama4", tmp_path / "llama4")
    url, other = png_data_url(1000, 300, noise=True), png_data_url(1001, 300, noise=True)  # 1 x 3 tiles + 1
    with in_front_of(upstream, folder) as live:
        assert post(live, chat(image(url), model=MODEL)).status_code == 200
        alone = upstream.received[-1]["body"]
        assert post(live, chat(image(url), image(other), image(url), model=MODEL)).status_code == 200
        three = upstream.received[-1]["body"]["features"]["mm_hashes"]["image"]
        rendered = httpx.post(f"{live.url}/v1/chat/completions/render", json=chat(image(url), model=MODEL))
    (image_hash,) = rendered.json()["features"]["mm_hashes"]["image"]  # the one item vLLM's render has
    features, ids = alone["features"], alone["token_ids"]
    ranges = features["mm_placeholders"]["image"]
    assert [span["length"] for span in ranges] == [144] * 4
    between = [ids[a["offset"] + a["length"] : b["offset"]] for a, b in itertools.pairwise(ranges)]
    assert all(set(ids[span["offset"] : span["offset"] + 144]) == {200092} for span in ranges)  # <|patch|>
    assert [len(tokens) for tokens in between] == [1, 1, 2]  # x, x, then y and <|image|>
    pixels = decode_image(base64.b64decode(url.partition(",")[2])).pixels
    # in the model's dtype, as vLLM's processor casts them (`auto`: bfloat16)
    tiles = load_processor(folder).in_dtype("bfloat16").process_image(pixels).tensors["pixel_values"]
    for tile, text in enumerate(features["kwargs_data"]["image"]):
        item = decode_item(text)
        assert torch_name(item["pixel_values"].data) == "bfloat16"
        assert np.array_equal(item["pixel_values"].data, tiles[tile : tile + 1])
        assert int(item["patches_per_image"].data) == 1
    keys = features["mm_hashes"]["image"]
    assert keys == [run_hash(image_hash, n) for n in range(4)]
    assert three[:4] == keys and three[8:] == keys and not set(three[4:8]) & set(keys)


def test_a_gemma3_image_with_crops_goes_as_an_image_item_per_view(upstream, tmp_path):
    """Gemma 3's pan and scan writes words and markers between the whole image's soft tokens
    and each crop's; gemma3_mm.py embeds each view by itself, so the image goes as one image
    item per view in the prompt's order (the whole image first): each range a run of 256
    <image_soft_token>s, each item that view's pixels (num_patches 1), each hash derived from
    the image's."""
    from mmprep.decoders import decode_image
    from mmprep.processors import load_processor, torch_name
    from mmprep.vllm.hashing import run_hash
    from mmprep.vllm.serde import decode_item

    folder = make_model_folder("gemma3", tmp_path / "gemma3")
    url, pan_and_scan = png_data_url(1000, 300, noise=True), {"do_pan_and_scan": True}  # 3 crops
    body = chat(image(url), model=MODEL, mm_processor_kwargs=pan_and_scan)
    with in_front_of(upstream, folder) as live:
        assert post(live, body).status_code == 200
        rendered = httpx.post(f"{live.url}/v1/chat/completions/render", json=body)
    sent = upstream.received[-1]["body"]
    features, ids = sent["features"], sent["token_ids"]
    ranges = features["mm_placeholders"]["image"]
    assert [span["length"] for span in ranges] == [256] * 4
    assert all(set(ids[span["offset"] : span["offset"] + 256]) == {262144} for span in ranges)
    assert all(ids[span["offset"] - 1] == 255999 for span in ranges)  # each after <start_of_image>
    pixels = decode_image(base64.b64decode(url.partition(",")[2])).pixels
    processor = load_processor(folder, do_pan_and_scan=True).in_dtype("bfloat16")  # the model's, `auto`
    views = processor.process_image(pixels).tensors["pixel_values"]
    for view, text in enumerate(features["kwargs_data"]["image"]):
        item = decode_item(text)
        assert torch_name(item["pixel_values"].data) == "bfloat16"
        assert np.array_equal(item["pixel_values"].data, views[view : view + 1])
        assert int(item["num_patches"].data) == 1
    (image_hash,) = rendered.json()["features"]["mm_hashes"]["image"]  # the one item vLLM's render has
    assert features["mm_hashes"]["image"] == [run_hash(image_hash, n) for n in range(4)]


def test_an_image_between_markers_goes_as_its_embeddings_run(upstream, tmp_path):
    """Gemma 4's image is <|image>, its soft tokens, <image|>: vLLM's generate takes every token
    of a range for an embedding, so the range sent is the soft tokens' run alone (vLLM's runner
    finds the same run in its own render's range; tests/vllm_real checks the greedy ids)."""
    folder = make_model_folder("gemma4", tmp_path / "gemma4")
    with in_front_of(upstream, folder) as live:
        answer = post(live, chat(image(png_data_url(96, 64)), model=MODEL, max_tokens=1))
    assert answer.status_code == 200, answer.text
    sent = upstream.received[-1]["body"]
    (span,) = sent["features"]["mm_placeholders"]["image"]
    ids = sent["token_ids"]
    soft = ids[span["offset"] : span["offset"] + span["length"]]
    assert set(soft) == {258880}  # <|image|>, every one an embedding
    before, after = ids[span["offset"] - 1], ids[span["offset"] + span["length"]]
    assert (before, after) == (255999, 258882)  # <|image>, <image|>


@pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None, reason="vLLM is not installed (see tests/data/vllm)"
)
def test_vllm_reads_the_render_routes_answer(front):
    """With vLLM importable: a request rendered from real media is a valid GenerateRequest
    to vLLM's own pydantic model, and each kwargs_data item decodes with its decoder."""
    from vllm.entrypoints.scale_out.token_in_token_out.mm_serde import decode_mm_kwargs_item
    from vllm.entrypoints.scale_out.token_in_token_out.protocol import GenerateRequest

    clip = MEDIA / "bframes_h264.mp4"
    body = chat(
        video(data_url(clip, "video/mp4"), num_frames=4),
        image(png_data_url(64, 48)),
        {"type": "text", "text": "Compare."},
        model=MODEL,
        max_tokens=8,
        temperature=0.5,
    )
    request = httpx.post(f"{front.url}/v1/chat/completions/render", json=body, timeout=60).json()
    parsed = GenerateRequest.model_validate(request)
    assert parsed.sampling_params.max_tokens == 8 and parsed.sampling_params.detokenize is False
    for modality, texts in request["features"]["kwargs_data"].items():
        for text, span in zip(texts, request["features"]["mm_placeholders"][modality], strict=True):
            item = decode_mm_kwargs_item(text)
            grid = item[f"{modality}_grid_thw"].data
            assert int(grid.prod()) // 4 == span["length"]
