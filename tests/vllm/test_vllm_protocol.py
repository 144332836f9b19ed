"""vLLM's token-in protocol as mmprep writes it (app/mmprep/vllm), checked against what vLLM
0.33.0 itself makes of the same items: the stored goldens (tests/data/vllm/goldens.json,
made by make_goldens.py with vLLM's own encoder, decoder, hasher and pydantic models) byte
for byte, and, where vLLM imports, vLLM live."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import replace
from pathlib import Path

import msgpack
import numpy as np
import pytest

from mmprep.interface.engine import EngineHTTPError
from mmprep.interface.prepared import (
    Placeholder,
    SamplingParams,
    TokenPrompt,
)
from mmprep.vllm.hashing import mm_hash, run_hash
from mmprep.vllm.items import kwargs_items
from mmprep.vllm.request import generate_request, generate_request_body
from mmprep.vllm.sampling import generation_defaults, sampling_params
from mmprep.vllm.serde import ItemFormatError, decode_item, encode_item, ext_header
from tests.support.vllm_cases import (
    CASES,
    MERGE,
    VIDEO_PAD,
    VISION_END,
    VISION_START,
    build_case,
    digest,
)

GOLDENS = Path(__file__).parents[1] / "data" / "vllm" / "goldens.json"


def load_make_goldens():
    from tests.data.vllm import make_goldens  # vLLM's own modules, imported at its top

    return make_goldens


@pytest.fixture(scope="module")
def goldens() -> dict:
    return json.loads(GOLDENS.read_text())


@pytest.mark.parametrize("name", CASES)
def test_items_are_vllms_bytes(name, goldens):
    """Each processed image and video is encoded exactly as vLLM's encode_mm_kwargs_item
    encodes the MultiModalKwargsItem its renderer makes of it."""
    case = build_case(name)
    body = generate_request(case.prepared, case.options)
    ours = {
        modality: [digest(text) for text in texts]
        for modality, texts in body["features"]["kwargs_data"].items()
    }
    assert ours == goldens["cases"][name]["kwargs_data"]


@pytest.mark.parametrize("name", CASES)
def test_mm_hashes_are_vllms(name, goldens):
    case = build_case(name)
    body = generate_request(case.prepared, case.options)
    assert body["features"]["mm_hashes"] == goldens["cases"][name]["mm_hashes"]
    assert all(
        len(h) == 64 for hashes in body["features"]["mm_hashes"].values() for h in hashes
    )  # blake3, full width


@pytest.mark.parametrize("name", CASES)
def test_request_is_what_vllm_dumps(name, goldens):
    """Every field (names, nesting, defaults) as vLLM's GenerateRequest model dumps it."""
    case = build_case(name)
    body = generate_request(case.prepared, case.options)
    del body["features"]["kwargs_data"], body["features"]["mm_metadata"]
    assert body == goldens["cases"][name]["request"]
    assert goldens["vllm"] == "0.33.0"


@pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None, reason="vLLM is not installed (see make_goldens.py)"
)
def test_live_vllm_agrees():
    """With vLLM importable: its decoder, encoder, hasher and pydantic models, live."""
    make_goldens = load_make_goldens()
    for name in CASES:
        case = build_case(name)
        body = generate_request(case.prepared, case.options)
        hf = make_goldens.hf_outputs(case)
        items = make_goldens.MultiModalKwargsItems.from_hf_inputs(
            hf, make_goldens.field_config(case.family, hf)
        )
        for modality, texts in body["features"]["kwargs_data"].items():
            for text, item in zip(texts, items[modality], strict=True):
                make_goldens.same_item(make_goldens.decode_mm_kwargs_item(text), item)
            media = [
                case.media[p.media_index] for p in case.prepared.prompt.placeholders if p.modality == modality
            ]
            assert [make_goldens.vllm_hash(m, case) for m in media] == body["features"]["mm_hashes"][modality]
        make_goldens.same_model_inputs(body["features"]["kwargs_data"], items)
        assert make_goldens.vllm_dump(body) == make_goldens.as_vllm_dumps(body)


def test_items_hold_the_processors_tensors():
    """Lossless: each item's data is the processor's output, sliced per item."""
    case = build_case("qwen2_5_vl_two_videos")
    body = generate_request(case.prepared, case.options)
    videos = [decode_item(text) for text in body["features"]["kwargs_data"]["video"]]
    first, second = case.media[0].processed.tensors, case.media[2].processed.tensors
    for item, tensors in zip(videos, (first, second), strict=True):
        assert item["pixel_values_videos"].data.dtype == np.float32
        np.testing.assert_array_equal(item["pixel_values_videos"].data, tensors["pixel_values_videos"])
        np.testing.assert_array_equal(item["video_grid_thw"].data, tensors["video_grid_thw"][0])
        assert item["video_grid_thw"].field.keywords == {"keep_on_cpu": True}
    # One flat field for the batch of videos, as vLLM's renderer makes it.
    rows = len(first["pixel_values_videos"])
    total = rows + len(second["pixel_values_videos"])
    assert videos[1]["pixel_values_videos"].field.keywords["slices"] == [
        ((0, rows, None),),
        ((rows, total, None),),
    ]
    # Qwen2.5-VL's seconds per temporal block: temporal_patch_size / sampled fps (2 / 2.0 here).
    assert (
        videos[0]["second_per_grid_ts"].data.shape == ()
        and float(videos[0]["second_per_grid_ts"].data) == 1.0
    )


def test_qwen3_timestamps_are_block_means():
    case = build_case("qwen3_vl_video")
    (item,) = kwargs_items(case.media, "qwen3_vl", 2)
    # frames 0, 15, 30 of a 30 fps video, the last repeated: blocks (0, 15) and (30, 30).
    assert item["timestamps"].data == [0.25, 1.0]
    assert decode_item(encode_item(item))["timestamps"].data == [0.25, 1.0]


def _two_block_prompt(video_pad_runs: int = 2) -> tuple:
    """A Qwen3-VL video of two temporal blocks as its prompt writes it: a time stamp, then
    <|vision_start|>, the block's pads, <|vision_end|>, per block; `video_pad_runs` runs of
    pads (2: the video's own layout)."""
    case = build_case("qwen3_vl_video")
    (video,) = case.media
    assert video.processed is not None
    per_block = video.processed.num_tokens // 2
    blocks = [[VISION_START, *[VIDEO_PAD] * (per_block * 2 // video_pad_runs), VISION_END]] * video_pad_runs
    ids = [1, 15, *blocks[0], 15, 13, *[token for block in blocks[1:] for token in block]]
    prompt = TokenPrompt(tuple(ids), (Placeholder("video", 0, 1, len(ids) - 1),))
    case = replace(case, options=replace(case.options, vision_token_ids={"video_token_id": VIDEO_PAD}))
    return case, replace(case.prepared, prompt=prompt), per_block


def test_a_video_split_by_time_stamps_goes_as_one_image_per_block():
    """Qwen3-VL's video prompt has a time stamp and vision start/end around each temporal
    block: vLLM 0.33.0's generate carries no is_embed mask, so each block goes as an image
    item (its rows of the video's pixels, grid (1, h, w)) whose range is its run of pads, the
    time stamps plain prompt tokens; each its own hash, derived from the video's."""
    case, prepared, per_block = _two_block_prompt()
    (video,) = case.media
    features = generate_request(prepared, case.options)["features"]
    ids = prepared.prompt.token_ids
    starts = [i for i, token in enumerate(ids) if token == VIDEO_PAD and ids[i - 1] != VIDEO_PAD]
    assert set(features["mm_placeholders"]) == {"image"}
    assert features["mm_placeholders"]["image"] == [
        {"offset": start, "length": per_block} for start in starts
    ]
    items = [decode_item(text) for text in features["kwargs_data"]["image"]]
    (t, h, w), pixels = (
        video.processed.tensors["video_grid_thw"][0],
        video.processed.tensors["pixel_values_videos"],
    )
    assert t == 2
    for block, item in enumerate(items):
        assert item["image_grid_thw"].data.tolist() == [1, h, w]
        assert np.array_equal(item["pixel_values"].data, pixels[block * h * w : (block + 1) * h * w])
    assert [decode_item(text) for text in features["mm_metadata"]["image"]][1].keys() == {"image_grid_thw"}
    video_hash = mm_hash(video, case.options.model_id, None, case.options.hash_algorithm, "qwen3_vl")
    hashes = features["mm_hashes"]["image"]
    assert hashes == [run_hash(video_hash, 0), run_hash(video_hash, 1)]
    assert len(set(hashes)) == 2 and video_hash not in hashes
    # the same video again: the same keys; another video: others
    assert generate_request(prepared, case.options)["features"]["mm_hashes"]["image"] == hashes
    other = replace(video, tensor=video.tensor[::-1].copy())
    again = generate_request(replace(prepared, media=[other]), case.options)["features"]["mm_hashes"]["image"]
    assert not set(again) & set(hashes)


def test_the_render_route_writes_the_one_video_item():
    """What vLLM's render answers for the same video: one video item, its whole range."""
    case, prepared, _ = _two_block_prompt()
    options = replace(case.options, for_generate=False)
    features = generate_request(prepared, options)["features"]
    assert features["mm_placeholders"] == {
        "video": [{"offset": 1, "length": len(prepared.prompt.token_ids) - 1}]
    }
    (item,) = [decode_item(text) for text in features["kwargs_data"]["video"]]
    assert item["video_grid_thw"].data.tolist()[0] == 2


def test_a_split_range_unlike_the_videos_blocks_is_refused_naming_the_part():
    """Pads in more runs than the video has blocks: no layout vLLM takes, a 400."""
    case, prepared, _ = _two_block_prompt(video_pad_runs=4)
    with pytest.raises(EngineHTTPError) as refused:
        generate_request(prepared, case.options)
    assert refused.value.status == 400 and refused.value.param == "messages[0].content[0].video_url"
    assert "is_embed" in refused.value.message


def test_text_only_prompt_has_no_features():
    case = build_case("qwen3_vl_image")
    prepared = replace(case.prepared, media=[], prompt=TokenPrompt((1, 2, 3)))
    body = generate_request(prepared, case.options)
    assert body["features"] is None and body["token_ids"] == [1, 2, 3]


def test_same_video_same_hash_and_what_changes_it():
    case = build_case("qwen2_5_vl_two_videos")
    video = case.media[0]
    again = replace(video, tensor=video.tensor.copy())
    assert mm_hash(video, "m") == mm_hash(again, "m")  # a video sent again hits vLLM's caches
    assert mm_hash(video, "m") != mm_hash(video, "other-model")
    assert mm_hash(video, "m", {"videos_kwargs": {"fps": 1}}) != mm_hash(video, "m")
    # Another modality's scoped options do not change a video's hash (vLLM's scoping).
    assert mm_hash(video, "m", {"images_kwargs": {"max_pixels": 1}}) == mm_hash(video, "m")
    assert mm_hash(video, "m", algorithm="sha256") != mm_hash(video, "m")


def test_sampling_params_sent():
    sampling = SamplingParams(
        max_tokens=16, temperature=0.0, top_p=1.0, stop=("END",), logprobs=True, top_logprobs=0
    )
    params = sampling_params(sampling, stream=True)
    # stop strings stay with mmprep (no detokenization upstream); 16 is sent though it is
    # vLLM's default, since a max_tokens left out means "the rest of the context".
    assert params == {
        "temperature": 0.0,
        "stop": [],
        "stop_token_ids": [],
        "max_tokens": 16,
        "logprobs": 0,
        "detokenize": False,
        "output_kind": 1,
        "skip_clone": True,
        "bad_words": [],
        "skip_reading_prefix_cache": False,
    }
    assert "max_tokens" not in sampling_params(SamplingParams(), stream=False)


def test_model_defaults_apply_where_the_client_is_silent(tmp_path):
    (tmp_path / "generation_config.json").write_text(
        json.dumps({"temperature": 0.7, "top_k": 20, "max_new_tokens": 512, "eos_token_id": [1, 2]})
    )
    defaults = generation_defaults(tmp_path)
    assert defaults == {"temperature": 0.7, "top_k": 20, "max_tokens": 512}
    params = sampling_params(SamplingParams(temperature=0.2), stream=False, defaults=defaults)
    assert params["temperature"] == 0.2 and params["top_k"] == 20
    assert generation_defaults(tmp_path / "missing") == {}


def test_a_bad_penalty_is_a_400_naming_it():
    with pytest.raises(EngineHTTPError) as refused:
        sampling_params(SamplingParams(), stream=False, extra={"presence_penalty": "high"})
    assert refused.value.status == 400 and refused.value.param == "presence_penalty"


def test_a_bad_cache_salt_is_a_400():
    case = build_case("qwen3_vl_image")
    with pytest.raises(EngineHTTPError) as refused:
        generate_request(replace(case.prepared, extra={"cache_salt": "a/b"}), case.options)
    assert refused.value.param == "cache_salt"


def test_decoder_refuses_what_is_not_an_item():
    with pytest.raises(ItemFormatError):
        decode_item("not base64!")
    with pytest.raises(ItemFormatError):
        decode_item("kQ==")  # a msgpack array, not a map


def test_embedding_count_matches_placeholder():
    case = build_case("qwen2_vl_video_image")
    body = generate_request(case.prepared, case.options)
    for modality, texts in body["features"]["kwargs_data"].items():
        for text, span in zip(texts, body["features"]["mm_placeholders"][modality], strict=True):
            grid = decode_item(text)[f"{modality}_grid_thw"].data
            assert int(np.prod(grid)) // MERGE**2 == span["length"]


def test_token_fields_left_in_extra_are_taken_not_dropped():
    extra = {"top_k": 5, "logprobs": True, "top_logprobs": 3, "ignore_eos": True, "stop_token_ids": [7, 7, 8]}
    params = sampling_params(SamplingParams(temperature=0.5), stream=False, extra=extra)
    assert params["top_k"] == 5 and params["logprobs"] == 3 and params["ignore_eos"] is True
    assert params["stop_token_ids"] == [7, 8]  # deduplicated, as vLLM's __post_init__
    with pytest.raises(EngineHTTPError) as refused:
        sampling_params(SamplingParams(), stream=False, extra={"top_logprobs": 50})
    assert refused.value.param == "top_logprobs"


@pytest.mark.parametrize("name", CASES)
def test_the_body_in_pieces_is_the_same_json(name):
    """What the engine sends: the same document, the items spliced in as bytes."""
    case = build_case(name)
    pieces = generate_request_body(case.prepared, case.options)
    assert json.loads(b"".join(pieces)) == generate_request(case.prepared, case.options)


def test_the_body_is_written_as_vllms_render_writes_it():
    """orjson, as vLLM 0.33's render writes its answer (create_json_response): text as UTF-8,
    not \\u-escaped, a small float and NaN as orjson writes them; an integer past 64 bits,
    which orjson refuses, through the standard library, as vLLM then writes it."""
    case = build_case("qwen3_vl_image")
    kwargs = {"x": "é東😀\u2028\x07", "small": 1e-7, "big": 1e20, "nan": float("nan")}
    prepared = replace(
        case.prepared, media=[], prompt=TokenPrompt((1, 2, 3)), extra={"chat_template_kwargs": kwargs}
    )
    body = b"".join(generate_request_body(prepared, case.options))
    assert b'"token_ids":[1,2,3],' in body
    assert '"x":"é東😀\u2028\\u0007","small":1e-7,"big":1e+20,"nan":null,'.encode() in body
    huge = replace(prepared, extra={"chat_template_kwargs": {"huge": 2**70, "x": "é"}})
    body = b"".join(generate_request_body(huge, case.options))
    assert b'"token_ids":[1,2,3],' in body and '"huge":1180591620717411303424,"x":"é",'.encode() in body


def test_ext_headers_are_msgpacks_smallest():
    for size in (0, 1, 2, 3, 4, 8, 16, 17, 255, 256, 65535, 65536):
        assert ext_header(3, size) + b"x" * size == msgpack.packb(msgpack.ExtType(3, b"x" * size))


def test_base64_in_pieces_is_base64_of_the_whole():
    """The writer's cuts at 3-byte groups leave the encoding as one b64encode of it all."""
    import base64

    from mmprep.vllm.serde import _Base64Writer

    for sizes in ([5, 70000, 1], [3, 65536, 65537, 2], [70001], [1, 2, 1 << 17, 4, 1 << 16]):
        chunks = [bytes(range(256)) * (size // 256) + bytes(size % 256) for size in sizes]
        writer = _Base64Writer()
        for chunk in chunks:
            writer.write(memoryview(chunk))
        assert b"".join(writer.finish()) == base64.b64encode(b"".join(chunks))


def test_a_video_without_metadata_is_timed_as_transformers_times_it():
    """No fps known: transformers' 24 (as the renderer's timestamps), never a crash."""
    case = build_case("qwen2_5_vl_two_videos")
    bare = replace(case.media[0], hf_metadata=None, indices=None)
    (item,) = kwargs_items([bare], "qwen2_5_vl", 2)
    assert float(item["second_per_grid_ts"].data) == np.float32(2 / 24)
    (item,) = kwargs_items(
        [replace(build_case("qwen3_vl_video").media[0], hf_metadata=None, indices=None)], "qwen3_vl", 2
    )
    assert item["timestamps"].data == [(0 + 1 / 24) / 2, (2 / 24 + 2 / 24) / 2]
