"""device="cuda": the same frames as the CPU, whether NVDEC does the work (on a machine with
a GPU: the device runs) or the CPU does after all (here and in CI: no GPU), with a log line
saying which. And the one step the two paths differ in, NVDEC's NV12 frames, converted to
exactly the CPU path's colours."""

from __future__ import annotations

import logging

import av
import numpy as np
import pytest

from mmprep.decoders import InvalidArgumentError, decode_video, gpu
from mmprep.decoders.frames import FrameConverter
from mmprep.testing.chat import chat, data_url, post, video
from mmprep.testing.servers import LiveServer
from tests.helpers import MEDIA, painted

REQUESTS = [{"num_frames": 5}, {"fps": 2.0}, {"num_frames": 3, "max_pixels": 64 * 48}]


@pytest.mark.parametrize("clip", ["h264_bframes.mp4", "hevc.mp4", "vp9.webm", "av1.mkv"])
@pytest.mark.parametrize("request_", REQUESTS, ids=repr)
def test_cuda_gives_the_cpu_frames(long_clips, clip, request_):
    cpu = decode_video(long_clips[clip], **request_)
    cuda = decode_video(long_clips[clip], device="cuda", **request_)
    assert cuda.indices.tolist() == cpu.indices.tolist()
    assert cuda.timestamps.tolist() == cpu.timestamps.tolist()
    assert painted(cuda.frames) == painted(cpu.frames)
    assert np.array_equal(cuda.frames, cpu.frames)


def test_without_a_gpu_the_cpu_decodes_and_says_so_once(caplog):
    if gpu.cuda_usable():
        pytest.skip("this machine has a GPU: test_cuda_gives_the_cpu_frames covers NVDEC here")
    gpu.cuda_usable.cache_clear()  # so the warning is said again, for this test
    caplog.set_level(logging.INFO, logger="mmprep.decoders")
    for _ in range(2):
        decode_video(MEDIA / "bframes_h264.mp4", num_frames=2, device="cuda")
    said = [r.getMessage() for r in caplog.records if r.name == "mmprep.decoders"]
    assert len(said) == 1 and said[0].startswith("CUDA decoding is not available here")


def test_a_device_that_does_not_exist_is_refused_by_name():
    with pytest.raises(InvalidArgumentError, match="device must be one of cpu, cuda, got 'tpu'"):
        decode_video(MEDIA / "bframes_h264.mp4", device="tpu")


def test_av1_through_libdav1d_and_huge_h264_frames_are_not_for_nvdec():
    assert not gpu.decodes("libdav1d", "av1", (640, 360))
    assert not gpu.decodes("h264", "h264", (8192, 4320))
    assert gpu.decodes("h264", "h264", (1920, 1080)) and gpu.decodes("hevc", "hevc", (7680, 4320))


@pytest.mark.parametrize("name", ["bt709_720p_h264.mp4", "full_range_bt601_h264.mp4", "rotated_90_h264.mp4"])
def test_nvdec_frames_nv12_convert_to_the_cpu_paths_colours(name):
    with av.open(str(MEDIA / name)) as container:
        frame = next(container.decode(video=0))
    interleaved = frame.reformat(format="nv12")  # NVDEC's layout, same samples
    size = (frame.width // 2 * 2, frame.height // 2 * 2)
    assert np.array_equal(FrameConverter(size)(interleaved), FrameConverter(size)(frame))


def test_the_service_decodes_with_the_device_setting(long_clips):
    body = chat(video(data_url(long_clips["h264_bframes.mp4"], "video/mp4"), num_frames=4))
    answers = []
    for device in ("cpu", "cuda"):
        with LiveServer(decode_device=device) as live:
            response = post(live, body)
        assert response.status_code == 200, response.text
        answers.append(response.json()["choices"][0]["message"]["content"])
    assert answers[0] == answers[1]  # the echo account: shapes, fingerprints, times, indices
