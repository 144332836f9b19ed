"""`mmprep serve --processor`: every image and video processed into the model's tensors
after decoding, through HTTP with the openai client, with the echo engine and with real
`mmprep worker` processes; the tensors equal what `processors` makes from the same frames."""

from __future__ import annotations

import base64
import json
import math

import httpx
import numpy as np
import pytest
import xxhash

from mmprep import families
from mmprep.core.config import Settings
from mmprep.decoders import decode_image, decode_video
from mmprep.decoders.errors import InvalidArgumentError
from mmprep.processors import FAMILIES, ProcessorInputError, load_processor
from tests.support.chat import (
    ask,
    assert_error,
    chat,
    data_url,
    image,
    openai_client,
    png_data_url,
    post,
    video,
)
from tests.support.cli import run_mmprep
from tests.support.media import MEDIA
from tests.support.metrics import metric
from tests.support.servers import LiveServer, WorkerProcess

WEBM = MEDIA / "224p_6_vp9.webm"
ROTATED = MEDIA / "rotated_90_h264.mp4"  # stored 160x96, shown 96x160
PROCESSOR = "Qwen/Qwen2.5-VL-7B-Instruct"
PNG = png_data_url(80, 60, noise=True)


def video_part(path=WEBM, **sampling) -> dict:
    return video(data_url(path, "video/mp4" if path.suffix == ".mp4" else "video/webm"), **sampling)


def account(server, content, **kwargs) -> tuple[dict, object]:
    text, _, usage = ask(openai_client(server), content, **kwargs)
    return json.loads(text), usage


def expected(processed) -> dict:
    """What the echo account says of a ProcessedMedia."""
    return {
        "num_tokens": processed.num_tokens,
        "tensors": {
            name: {"shape": list(t.shape), "dtype": str(t.dtype), "xxh3": xxhash.xxh3_64_hexdigest(t.data)}
            for name, t in processed.tensors.items()
        },
    }


@pytest.fixture(scope="module")
def exact_server():
    with LiveServer(processor=PROCESSOR) as live:
        yield live


@pytest.fixture(scope="module")
def ffmpeg_server():
    with LiveServer(processor="qwen3_vl", processor_resize="ffmpeg") as live:
        yield live


def test_the_echo_engine_gets_the_tensors_processors_makes_from_the_same_frames(exact_server):
    content = [{"type": "text", "text": "What happens?"}, video_part(num_frames=4), image(PNG)]
    answer, usage = account(exact_server, content)
    processor = load_processor(PROCESSOR)
    frames = decode_video(WEBM.read_bytes(), num_frames=4, max_pixels=Settings().max_pixels).frames
    pixels = decode_image(_png_bytes(PNG)).pixels
    made = [processor.process_video(frames), processor.process_image(pixels)]
    assert [item["processed"] for item in answer["media"]] == [expected(m) for m in made]
    names = [list(item["processed"]["tensors"]) for item in answer["media"]]
    assert names == [["pixel_values_videos", "video_grid_thw"], ["pixel_values", "image_grid_thw"]]
    assert answer["media"][0]["shape"] == [
        4,
        224,
        224,
        3,
    ]  # the frames as decoded: the processor resized them
    # usage counts the placeholder tokens, not a token per frame
    assert usage.prompt_tokens == math.ceil(len(answer["text"]) / 8) + sum(m.num_tokens for m in made)


def test_ffmpeg_resize_decodes_straight_to_the_processors_size(ffmpeg_server):
    processor = load_processor("qwen3_vl")
    answer, _ = account(ffmpeg_server, [video_part(ROTATED, num_frames=4)])
    item = answer["media"][0]
    height, width = processor.video_size(4, 160, 96)  # upright
    assert item["shape"] == [4, height, width, 3]
    frames = decode_video(ROTATED.read_bytes(), num_frames=4, frame_size=processor.video_size).frames
    assert frames.shape == (4, height, width, 3)
    assert item["xxh3"] == xxhash.xxh3_64_hexdigest(frames.data)
    # frames already at the model's size are only normalized: bit-equal to processing them
    assert item["processed"] == expected(processor.process_video(frames))


def test_ffmpeg_resize_uses_the_kernel_of_the_processors_resize():
    """FFmpeg's scaler with torchvision's bicubic kernel (a = -0.5) lands within a level of
    processors/' own resize nearly everywhere; with swscale's default kernel (0.6), 1.7% of
    these values (painted digits, upscaled to the model's minimum size) were further off."""
    from mmprep.processors.resize import resize_bicubic

    processor = load_processor("qwen3_vl")
    path = MEDIA / "cfr_25fps_h264.mp4"
    full = decode_video(path, num_frames=4).frames
    height, width = processor.video_size(4, *full.shape[1:3])
    scaled = decode_video(path, num_frames=4, frame_size=processor.video_size).frames
    theirs = np.stack([resize_bicubic(frame, height, width) for frame in full])
    off = np.abs(scaled.astype(np.int16) - theirs)
    assert (off <= 1).mean() >= 0.995, f"{(off > 1).mean():.2%} of values more than one level off"


@pytest.mark.slow  # a `mmprep worker` process
def test_a_worker_gets_the_same_tensors_as_the_embedded_engine(exact_server):
    content = [
        {"type": "text", "text": "Compare."},
        video_part(num_frames=4),
        image(PNG),
        video_part(num_frames=4),
    ]
    worker = WorkerProcess()
    with worker:
        worker.wait_ready()
        settings = Settings(
            engine="workers", worker_url=[worker.url], allow_private_networks=True, processor=PROCESSOR
        )
        with LiveServer(settings) as front:
            remote = ask(openai_client(front), content, stream=True)
    local = ask(openai_client(exact_server), content, stream=True)
    assert remote == local
    assert [item["processed"]["num_tokens"] for item in json.loads(remote[0])["media"]] == [
        load_processor(PROCESSOR).video_tokens(4, 224, 224),
        load_processor(PROCESSOR).image_tokens(60, 80),
        load_processor(PROCESSOR).video_tokens(4, 224, 224),
    ]


def test_max_vision_tokens_refuses_a_video_before_decoding_it():
    processor = load_processor(PROCESSOR)
    tokens = processor.video_tokens(4, 224, 224)
    with LiveServer(processor=PROCESSOR, max_vision_tokens=tokens - 1) as server:
        response = post(server, chat(video_part(num_frames=4)))
        error = assert_error(response, 400, "too_many_vision_tokens", "messages[0].content[0].video_url")
        assert f"comes to {tokens} vision tokens, more than the {tokens - 1} allowed" in error["message"]
        decoded = metric(httpx.get(f"{server.url}/metrics").text, "mmprep_frames_decoded_total", kind="video")
        assert decoded == 0  # refused from the plan, before a frame was decoded
        assert post(server, chat(video_part(num_frames=2))).status_code == 200


def test_max_vision_tokens_counts_the_whole_request():
    tokens = load_processor(PROCESSOR).video_tokens(4, 224, 224)
    with LiveServer(processor=PROCESSOR, max_vision_tokens=tokens) as server:
        assert post(server, chat(video_part(num_frames=4))).status_code == 200
        response = post(server, chat(video_part(num_frames=4), video_part(num_frames=4)))
        assert_error(response, 400, "too_many_vision_tokens", "messages")


def test_without_a_processor_nothing_is_processed():
    with LiveServer() as server:
        answer, usage = account(server, [video_part(num_frames=4)])
    assert "processed" not in answer["media"][0]
    assert usage.prompt_tokens == math.ceil(len(answer["text"]) / 8) + 4


@pytest.mark.slow  # `python -m mmprep serve` as a process, per case
@pytest.mark.parametrize(
    "args, says",
    [
        (["--processor", "qwen9_vl"], "'qwen9_vl' is neither a processor family"),
        (["--processor", "qwen2_vl", "--processor-resize", "pillow"], "processor_resize"),
        (["--max-vision-tokens", "100"], "--max-vision-tokens only apply with --processor"),
        (["--processor-resize", "ffmpeg"], "--processor-resize only apply with --processor"),
    ],
)
def test_a_bad_processor_setting_stops_serve_with_a_message(args, says):
    result = run_mmprep("serve", *args)
    assert result.returncode == 2
    assert says in result.stderr


# -- the decoder's frame_size rule -----------------------------------------------------------


def test_frame_size_is_planned_once_from_the_count_and_the_stored_size():
    seen = []

    def rule(num_frames, height, width):
        seen.append((num_frames, height, width))
        return 50, 70

    video = decode_video(ROTATED.read_bytes(), num_frames=3, frame_size=rule)
    assert seen == [(3, 96, 160)]  # as stored: the rotation is not known before decoding
    assert video.frames.shape == (3, 70, 50, 3)  # turned upright after scaling


def test_a_frame_size_rule_may_refuse_and_must_give_a_size():
    def refuse(*_):
        raise LookupError("too big")

    with pytest.raises(LookupError, match="too big"):
        decode_video(WEBM.read_bytes(), num_frames=2, frame_size=refuse)
    with pytest.raises(InvalidArgumentError, match="frame_size must give"):
        decode_video(WEBM.read_bytes(), num_frames=2, frame_size=lambda *_: (0, 10))


@pytest.mark.parametrize("family", FAMILIES)
def test_the_processors_sizes_treat_height_and_width_alike(family):
    """What decode_video's frame_size rule must satisfy (the rotation comes after it); a
    family that takes no video (Gemma 3) sizes none."""
    processor = load_processor(family)
    if not families.get(family).takes("video"):
        with pytest.raises(ProcessorInputError, match=f"{family} models take no video"):
            processor.video_size(4, 720, 1280)
        return
    for frames, height, width in [(1, 96, 160), (4, 720, 1280), (7, 33, 901), (32, 1080, 1920), (2, 10, 600)]:
        assert (
            processor.video_size(frames, width, height) == processor.video_size(frames, height, width)[::-1]
        )


def _png_bytes(url: str) -> bytes:
    return base64.b64decode(url.split(",", 1)[1])


def test_processed_tensors_cross_the_wire_as_views():
    from mmprep.interface.prepared import MediaItem, PreparedRequest
    from mmprep.workers.wire import decode_request, encode_request

    processor = load_processor("qwen2_vl")
    frames = np.zeros((2, 56, 56, 3), np.uint8)
    item = MediaItem("video", frames, {}, "p", np.zeros(2), np.arange(2), {}, processor.process_video(frames))
    body = encode_request(PreparedRequest("r", "m", [], [item, item]))
    raw = bytearray(body.header + b"".join(t.tobytes() for t in body.tensors))
    received = decode_request(raw).media
    assert received[0].processed.num_tokens == item.processed.num_tokens
    for name, tensor in item.processed.tensors.items():
        assert np.array_equal(received[0].processed.tensors[name], tensor)
        assert received[0].processed.tensors[name].dtype == tensor.dtype
        assert np.shares_memory(received[0].processed.tensors[name], np.frombuffer(raw, np.uint8))
    assert len(body.tensors) == 3  # the shared item's frames and tensors went once
