"""What vLLM 0.33.0 itself makes of mmprep's items, stored for tests/vllm/test_vllm_protocol.py,
which checks mmprep's encoding and hashes against it byte for byte without vLLM.

    /work/venvs/vllm/bin/python tests/data/vllm/make_goldens.py

The venv: `python3 -m venv /work/venvs/vllm && /work/venvs/vllm/bin/pip install vllm==0.33.0
--no-deps`, then (also --no-deps) msgspec blake3 pybase64 pyzmq cloudpickle cbor2 psutil
openai_harmony cachetools py-cpuinfo, and a .pth file that adds mmprep's own site-packages
(torch 2.14.1 on the CPU, transformers, numpy, mmprep's editable install) with the line
`import site; site.addsitedir("<checkout>/.venv/lib/python3.11/site-packages")`. vLLM's
serial_utils, mm_serde, hasher, parser, image loader and protocol then import; its model
files do not (they pull in xgrammar and tvm_ffi), so each model's field config is written
out below from vllm/model_executor/models/qwen2_vl.py (_create_qwen2vl_field_factory),
qwen2_5_vl.py (+ second_per_grid_ts) and qwen3_vl.py (+ timestamps), with vLLM's own
MultiModalFieldConfig.

For each case (cases in tests/support/vllm_cases.py's CASES, made by `build_case`), vLLM:
1. builds the MultiModalKwargsItems its renderer makes from the HF processor's batched
   output (MultiModalKwargsItems.from_hf_inputs with the model's field config);
2. encodes each item with encode_mm_kwargs_item (keys in mmprep's order: vLLM's own
   order comes from a set) -> compared here with mmprep's string, stored as its sha256;
3. decodes mmprep's string with decode_mm_kwargs_item and compares the item with (1):
   keys, field types and values, dtypes, shapes, data;
4. hashes each media item with MultiModalHasher.hash_kwargs as get_mm_hashes does, the
   item as vLLM's own loader (an image file's bytes) and parser (a video's metadata kept or
   dropped per family) make it -> stored, and compared here with mmprep's hash; an image
   keyed by its file's bytes must decode to mmprep's very pixels;
5. batches both sets of items as vLLM batches them for the model (get_data) and compares;
6. validates mmprep's whole GenerateRequest with vLLM's pydantic model and checks that
   vLLM dumps it back unchanged (goldens.json keeps vLLM's dump of the request less its
   kwargs_data, which (2) covers).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from vllm.entrypoints.scale_out.token_in_token_out.mm_serde import (
    decode_mm_kwargs_item,
    encode_mm_kwargs_item,
)
from vllm.entrypoints.scale_out.token_in_token_out.protocol import GenerateRequest
from vllm.multimodal.hasher import MultiModalHasher
from vllm.multimodal.inputs import MultiModalFieldConfig, MultiModalKwargsItem, MultiModalKwargsItems
from vllm.multimodal.media.image import ImageMediaIO
from vllm.multimodal.parse import MultiModalDataParser
from vllm.version import __version__

from mmprep.modalities import modality_of
from mmprep.vllm import hashing
from mmprep.vllm.request import generate_request

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
# The cases of tests/support/vllm_cases.py, from the repository's root as pytest finds them.
sys.path.insert(0, str(ROOT))

from tests.support.vllm_cases import CASES, MERGE, build_case, digest  # noqa: E402 (on sys.path from here)


def field_config(family: str, hf: dict) -> dict:
    """The model's _get_mm_fields_config for these batched HF outputs."""
    image_sizes = hf.get("image_grid_thw", torch.empty((0, 3))).prod(-1)
    video_sizes = hf.get("video_grid_thw", torch.empty((0, 3))).prod(-1)
    config = {
        "pixel_values": MultiModalFieldConfig.flat_from_sizes("image", image_sizes),
        "image_embeds": MultiModalFieldConfig.flat_from_sizes("image", image_sizes // MERGE // MERGE),
        "image_grid_thw": MultiModalFieldConfig.batched("image", keep_on_cpu=True),
        "pixel_values_videos": MultiModalFieldConfig.flat_from_sizes("video", video_sizes),
        "video_embeds": MultiModalFieldConfig.flat_from_sizes("video", video_sizes // MERGE // MERGE),
        "video_grid_thw": MultiModalFieldConfig.batched("video", keep_on_cpu=True),
        "timestamps": MultiModalFieldConfig.batched("video", keep_on_cpu=True),
    }
    if family == "qwen2_5_vl":
        config["second_per_grid_ts"] = MultiModalFieldConfig.batched("video", keep_on_cpu=True)
    return config


def hf_outputs(case) -> dict:
    """The HF processor's batched output for the case's media, as vLLM's renderer holds it."""
    hf: dict = {}
    for modality, pixels_key, grid_key in (
        ("image", "pixel_values", "image_grid_thw"),
        ("video", "pixel_values_videos", "video_grid_thw"),
    ):
        media = [item for item in case.media if item.kind == modality]
        if media:
            hf[pixels_key] = torch.cat([torch.from_numpy(m.processed.tensors[pixels_key]) for m in media])
            hf[grid_key] = torch.cat([torch.from_numpy(m.processed.tensors[grid_key]) for m in media])
    videos = [item for item in case.media if item.kind == "video"]
    if videos and case.family == "qwen2_5_vl":
        # transformers' Qwen2_5_VLProcessor: temporal_patch_size / sampled fps, a float32 tensor.
        fps = [
            len(m.hf_metadata["frames_indices"]) / m.hf_metadata["total_num_frames"] * m.hf_metadata["fps"]
            for m in videos
        ]
        hf["second_per_grid_ts"] = torch.tensor([case.temporal / f for f in fps])
    if videos and case.family == "qwen3_vl":
        hf["timestamps"] = [_qwen3_timestamps(m.hf_metadata, case.temporal) for m in videos]
    return hf


def _qwen3_timestamps(meta: dict, merge_size: int) -> list[float]:
    """vLLM's Qwen3VLProcessingInfo._calculate_timestamps (do_sample_frames false)."""
    indices = list(meta["frames_indices"])
    if len(indices) % merge_size != 0:
        indices = indices + [indices[-1]] * (merge_size - len(indices) % merge_size)
    timestamps = [idx / meta["fps"] for idx in indices]
    return [
        (timestamps[i] + timestamps[i + merge_size - 1]) / 2 for i in range(0, len(timestamps), merge_size)
    ]


def same_item(ours: MultiModalKwargsItem, theirs: MultiModalKwargsItem) -> None:
    assert set(ours) == set(theirs), (set(ours), set(theirs))
    for key in theirs:
        a, b = ours[key], theirs[key]
        assert type(a.field) is type(b.field), key
        # vLLM's own field holds tuples and 0-d tensors (flat_from_sizes); on the wire they
        # are lists and ints: compare with vLLM's field as its own encoder round-trips it.
        wired = decode_mm_kwargs_item(encode_mm_kwargs_item(MultiModalKwargsItem({key: b})))[key]
        assert a.field == wired.field, (key, a.field, b.field)
        if isinstance(b.data, torch.Tensor):
            assert torch.equal(b.data.reshape(-1), a.data.reshape(-1)), key
            b = wired  # a 0-d tensor comes back from vLLM's own round trip 1-d: compare with that
            assert a.data.dtype == b.data.dtype and a.data.shape == b.data.shape, (key, a.data, b.data)
            assert torch.equal(a.data, b.data), key
        else:
            assert a.data == b.data, key


def same_model_inputs(ours: dict, theirs) -> None:
    """What the model is called with: both sets of items batched as vLLM batches them
    (MultiModalKwargsItems.get_data), key by key equal."""
    a = MultiModalKwargsItems(
        {m: [decode_mm_kwargs_item(t) for t in texts] for m, texts in ours.items()}
    ).get_data()
    b = theirs.get_data()
    assert set(a) == set(b), (set(a), set(b))
    for key in b:
        if isinstance(b[key], torch.Tensor):
            assert a[key].dtype == b[key].dtype and torch.equal(a[key], b[key]), key
        else:
            assert a[key] == b[key], key


def vllm_hash(item, case) -> str:
    """ProcessorInputs.get_mm_hashes for one item (blake3, no uuid, no media_io_kwargs), the
    item as vLLM's own loader and parser hand it to the hasher: an image file loaded from
    its bytes (ImageMediaIO: a MediaWithBytes), other pixels as a PIL image, a video's
    frames with their metadata, which the family's parser keeps or drops."""
    kwargs = {
        key: value
        for key, value in (case.mm_processor_kwargs or {}).items()
        if key not in hashing.VLLM_SCOPES or key == modality_of(item).processor_scope
    }
    data: dict[str, list[object]]
    if item.kind == "video":
        data = {"video": [(item.tensor, {**item.hf_metadata, "do_sample_frames": False})]}
    elif item.source is not None:
        loaded = ImageMediaIO().load_bytes(item.source.data)
        # Keyed by its bytes only if the pixels under that key are the same on both sides.
        assert np.array_equal(np.asarray(loaded.media), item.tensor), f"{item.param}: pixels differ"
        data = {"image": [loaded]}
    else:
        data = {"image": [Image.fromarray(item.tensor)]}
    # Qwen2-VL's parser is the base one; Qwen2.5-VL's and Qwen3-VL's keep a video's metadata.
    parser = MultiModalDataParser(video_needs_metadata=case.family in ("qwen2_5_vl", "qwen3_vl"))
    (media,) = parser.parse_mm_data(data)[item.kind].get_all_items_for_hash()
    factors = {"mm_processor_kwargs": kwargs} if kwargs else {}
    return MultiModalHasher.hash_kwargs("blake3", model_id=case.model_id, **{item.kind: media}, **factors)


def vllm_dump(body: dict) -> dict:
    """mmprep's GenerateRequest read by vLLM's pydantic model and dumped back."""
    return GenerateRequest.model_validate(body).model_dump(mode="json")


def as_vllm_dumps(body: dict) -> dict:
    """The body as vLLM's dump must equal it: SamplingParams omits a field at its default,
    so a max_tokens of 16 (sent: left out, it would mean the rest of the context) goes."""
    params = dict(body["sampling_params"])
    if params.get("max_tokens") == 16:
        del params["max_tokens"]
    return {**body, "sampling_params": params}


def main() -> None:
    goldens: dict = {"vllm": __version__, "cases": {}}
    for name in CASES:
        case = build_case(name)
        body = generate_request(case.prepared, case.options)
        prompt = case.prepared.prompt
        assert prompt is not None  # generate_request raised otherwise
        hf = hf_outputs(case)
        items = MultiModalKwargsItems.from_hf_inputs(hf, field_config(case.family, hf))
        golden: dict = {"kwargs_data": {}, "mm_hashes": {}}
        for modality, ours in body["features"]["kwargs_data"].items():
            theirs = items[modality]
            assert len(theirs) == len(ours)
            encoded = []
            for text, item in zip(ours, theirs, strict=True):
                decoded = decode_mm_kwargs_item(text)
                same_item(decoded, item)
                ordered = MultiModalKwargsItem({key: item[key] for key in decoded})  # mmprep's key order
                vllm_text = encode_mm_kwargs_item(ordered)
                assert vllm_text == text, f"{name}: {modality} bytes differ"
                encoded.append(vllm_text)
            golden["kwargs_data"][modality] = [digest(text) for text in encoded]
            for text, item in zip(body["features"]["mm_metadata"][modality], theirs, strict=True):
                on_cpu = MultiModalKwargsItem({k: e for k, e in decode_mm_kwargs_item(text).items()})
                assert all(item[k].field.keep_on_cpu for k in on_cpu) and len(on_cpu) == sum(
                    e.field.keep_on_cpu for e in item.values()
                ), f"{name}: mm_metadata keys"
                assert encode_mm_kwargs_item(MultiModalKwargsItem({k: item[k] for k in on_cpu})) == text
            media = [case.media[p.media_index] for p in prompt.placeholders if p.modality == modality]
            hashes = [vllm_hash(item, case) for item in media]
            assert hashes == body["features"]["mm_hashes"][modality], f"{name}: {modality} hashes differ"
            golden["mm_hashes"][modality] = hashes
        same_model_inputs(body["features"]["kwargs_data"], items)
        dumped = vllm_dump(body)
        differ = {
            key: (body.get(key), dumped.get(key))
            for key in set(body) | set(dumped)
            if key != "features" and body.get(key) != dumped.get(key)
        }
        assert dumped == as_vllm_dumps(body), f"{name}: vLLM dumps the request differently: {differ}"
        dumped["features"].pop("kwargs_data")
        dumped["features"].pop("mm_metadata")
        golden["request"] = {**dumped, "sampling_params": body["sampling_params"]}
        goldens["cases"][name] = golden
        print(name, "ok")
    (HERE / "goldens.json").write_text(json.dumps(goldens, indent=1) + "\n")


if __name__ == "__main__":
    main()
