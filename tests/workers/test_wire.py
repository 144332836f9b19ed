"""The tensor request and the delta lines (app/mmprep/workers/wire.py): real safetensors, read
without copying, bad bodies refused with a message that says what is wrong."""

from __future__ import annotations

import asyncio
import json
import struct

import numpy as np
import pytest
import safetensors.numpy

from mmprep.engines import EngineHTTPError, EngineOutput
from mmprep.interface.engine import TokenLogprob
from mmprep.interface.prepared import MediaItem, Placeholder, PreparedRequest, SamplingParams, TokenPrompt
from mmprep.workers.wire import (
    WireError,
    decode_line,
    decode_request,
    encode_error,
    encode_output,
    encode_request,
)

RNG = np.random.default_rng(4)


def prepared() -> PreparedRequest:
    frames = RNG.integers(0, 256, (3, 16, 12, 3), dtype=np.uint8)
    video = MediaItem(
        "video",
        frames,
        {"fps": 2.0, "codec": "vp9"},
        "messages[0].content[1].video_url",
        np.array([0.0, 0.5, 1.25]),
        np.array([0, 1, 3]),
        {"fps": 2.0, "frames_indices": [0, 1, 3]},
    )
    image = MediaItem(
        "image",
        RNG.integers(0, 256, (5, 7, 3), dtype=np.uint8),
        {"format": "PNG"},
        "messages[0].content[2].image_url",
    )
    content = [
        {"type": "text", "text": "Look ünïcode"},
        {"type": "video", "media_index": 0},
        {"type": "image", "media_index": 1},
        {"type": "video", "media_index": 2},
    ]
    return PreparedRequest(
        "chatcmpl-1",
        "m",
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": content}],
        [video, image, video],
        SAMPLING,
        stream=True,
        mm_processor_kwargs={"fps": 1, "max_pixels": 1000},
        extra={"tools": [{"type": "function"}]},
        prompt=PROMPT,
    )


SAMPLING = SamplingParams(
    max_tokens=7,
    temperature=0.5,
    top_p=0.9,
    seed=1,
    stop=("a", "b"),
    stop_token_ids=(7, 151645),
    ignore_eos=True,
    min_tokens=2,
    top_k=20,
    logprobs=True,
    top_logprobs=3,
)
# the rendered prompt, each placeholder expanded (here 3 video, 2 image, 3 video tokens)
PROMPT = TokenPrompt(
    (1, 2, 9, 9, 9, 3, 8, 8, 9, 9, 9, 4),
    (Placeholder("video", 0, 2, 3), Placeholder("image", 1, 6, 2), Placeholder("video", 2, 8, 3)),
    "<video> <image> <video>",
)


def body_bytes(request: PreparedRequest) -> bytes:
    async def collect():
        return b"".join([bytes(chunk) async for chunk in encode_request(request).chunks()])

    return asyncio.run(collect())


def test_a_request_survives_the_wire_and_its_tensors_are_views_of_the_body():
    request = prepared()
    body = bytearray(body_bytes(request))
    assert len(body) == encode_request(request).length
    decoded = decode_request(body)
    assert (decoded.request_id, decoded.model, decoded.messages, decoded.sampling, decoded.stream) == (
        request.request_id,
        request.model,
        request.messages,
        request.sampling,
        True,
    )
    assert (decoded.mm_processor_kwargs, decoded.extra) == (request.mm_processor_kwargs, request.extra)
    assert decoded.prompt == PROMPT and decoded.sampling == SAMPLING  # every field of both
    everything = np.frombuffer(body, np.uint8)
    for got, sent in zip(decoded.media, request.media, strict=True):
        assert (got.kind, got.param, got.metadata, got.hf_metadata) == (
            sent.kind,
            sent.param,
            sent.metadata,
            sent.hf_metadata,
        )
        assert np.array_equal(got.tensor, sent.tensor) and got.tensor.dtype == np.uint8
        assert np.shares_memory(got.tensor, everything)  # a view: not a copy
    assert np.array_equal(decoded.media[0].timestamps, request.media[0].timestamps)
    assert decoded.media[0].tensor is decoded.media[2].tensor  # the shared video went once


def test_the_sender_streams_views_of_the_frames():
    request = prepared()
    chunks = asyncio.run(_chunks(request))
    frames = request.media[0].tensor
    assert any(
        np.shares_memory(np.frombuffer(chunk, np.uint8), frames)
        for chunk in chunks
        if isinstance(chunk, memoryview)
    )


async def _chunks(request):
    return [chunk async for chunk in encode_request(request).chunks()]


def test_the_body_is_a_safetensors_file_the_package_reads():
    request = prepared()
    tensors = safetensors.numpy.load(body_bytes(request))
    assert sorted(tensors) == ["media_0", "media_1"]
    assert np.array_equal(tensors["media_0"], request.media[0].tensor)
    assert np.array_equal(tensors["media_1"], request.media[1].tensor)


def test_a_file_the_package_writes_is_read():
    request = prepared()
    raw = body_bytes(request)
    metadata = json.loads(raw[8 : 8 + struct.unpack("<Q", raw[:8])[0]])["__metadata__"]
    written = safetensors.numpy.save(
        {"media_0": request.media[0].tensor, "media_1": request.media[1].tensor}, metadata=metadata
    )
    decoded = decode_request(written)
    assert np.array_equal(decoded.media[1].tensor, request.media[1].tensor)


def header(entries: dict, metadata: dict | None = None) -> bytes:
    raw = json.dumps({"__metadata__": metadata or {"format": "mmprep.tensor-request.v1"}, **entries}).encode()
    return struct.pack("<Q", len(raw)) + raw


@pytest.mark.parametrize(
    "body, says",
    [
        (b"\x01\x00", "8-byte header length"),
        (struct.pack("<Q", 10**12) + b"{}", "header claims"),
        (struct.pack("<Q", 4) + b"\xff\xfe{}", "not JSON"),
        (header({}, {"format": "something-else"}), "format"),
        (header({"t": {"dtype": "X9", "shape": [1], "data_offsets": [0, 1]}}) + b"\x00", "needs a dtype"),
        (header({"t": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 1]}}) + b"\x00", "non-negative"),
        (
            header({"t": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}}) + b"\x00",
            "within the 1 data bytes",
        ),
        (
            header({"t": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}}) + b"\x00\x00",
            "gap or overlap",
        ),
        (header({"t": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}) + b"\x00\x00", "cover 1 bytes"),
        (header({}), "malformed __metadata__"),
    ],
    ids=[
        "short",
        "huge-header",
        "not-json",
        "format",
        "dtype",
        "shape",
        "too-short",
        "gap",
        "trailing",
        "no-fields",
    ],
)
def test_a_bad_body_says_what_is_wrong(body, says):
    with pytest.raises(WireError, match=says):
        decode_request(body)


def test_a_media_item_must_name_a_tensor_the_body_has():
    raw = body_bytes(prepared())
    size = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8 : 8 + size])
    media = json.loads(head["__metadata__"]["media"])
    media[0]["tensor"] = "media_9"
    head["__metadata__"]["media"] = json.dumps(media)
    new = json.dumps(head).encode()
    with pytest.raises(WireError, match="media_9"):
        decode_request(struct.pack("<Q", len(new)) + new + raw[8 + size :])


def test_a_request_without_a_prompt_has_none_after_the_wire():
    request = prepared()
    request = PreparedRequest(request.request_id, request.model, request.messages, request.media)
    assert decode_request(body_bytes(request)).prompt is None
    assert decode_request(body_bytes(request)).completion is None


@pytest.mark.parametrize("completion", ["Once upon a time", (1, 2, 3)])
def test_a_completions_prompt_survives_the_wire(completion):
    """/v1/completions: the prompt as the client gave it, text or token ids."""
    request = PreparedRequest("cmpl-1-0", "m", [], [], prompt=TokenPrompt((1, 2, 3)), completion=completion)
    decoded = decode_request(body_bytes(request))
    assert (decoded.completion, decoded.prompt, decoded.text()) == (
        completion,
        request.prompt,
        request.text(),
    )


def test_outputs_and_errors_as_lines():
    output = EngineOutput(text="hé\n", finish_reason="length", prompt_tokens=3, completion_tokens=4)
    assert decode_line(encode_output(output).decode()) == output
    tokens = EngineOutput(
        token_ids=(151645, 3),
        logprobs=(TokenLogprob(151645, -0.25, ((151645, -0.25), (7, -1.5))), TokenLogprob(3, float("-inf"))),
    )
    assert decode_line(encode_output(tokens).decode()) == tokens  # a token-out engine's ids and logprobs
    assert encode_output(EngineOutput(text="x")).count(b"\n") == 1  # one line, whatever the text
    with pytest.raises(EngineHTTPError) as caught:
        decode_line(
            encode_error(EngineHTTPError("too long", 400, "context_length_exceeded", "messages")).decode()
        )
    assert (caught.value.status, caught.value.code, caught.value.param) == (
        400,
        "context_length_exceeded",
        "messages",
    )
    for garbage in ("not json", "[1]", '{"error": {}}', '{"logprobs": [[1, 0.5]]}'):
        with pytest.raises(WireError):
            decode_line(garbage)
