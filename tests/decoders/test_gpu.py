"""device="cuda", said for what it is on each machine. Where FFmpeg can make a CUDA device
(a GPU): NVDEC decodes H.264, HEVC and VP9 and gives exactly the CPU's frames, and what it does
not take (AV1 through libdav1d) falls back to the CPU, saying so. Where it cannot (here and in
CI: no GPU): the NVDEC tests skip, saying why, and the fallback is tested as the fallback: the
CPU decodes, the same frames, one log line saying why. And the one step the two paths differ
in, NVDEC's NV12 frames, converted to exactly the CPU path's colours, tested everywhere."""

from __future__ import annotations

import logging

import av
import numpy as np
import pytest

from mmprep.decoders import InvalidArgumentError, decode_video, gpu
from mmprep.decoders.frames import FrameConverter
from tests.support.chat import chat, data_url, post, video
from tests.support.media import MEDIA, painted
from tests.support.servers import LiveServer

REQUESTS = [{"num_frames": 5}, {"fps": 2.0}, {"num_frames": 3, "max_pixels": 64 * 48}]
CLIPS = ["h264_bframes.mp4", "hevc.mp4", "vp9.webm", "av1.mkv"]
# What NVDEC does not decode here: PyAV decodes AV1 with libdav1d, which has no CUDA hwaccel
# (gpu.decodes), so FFmpeg's software fallback does, and the decoder says so.
NOT_NVDECS = {"av1.mkv"}
HAS_NVDEC = gpu.cuda_usable()
nvdec = pytest.mark.skipif(
    not HAS_NVDEC,
    reason="no CUDA device here (gpu.cuda_usable): NVDEC is not exercised on this machine; "
    "the CPU fallback is tested by name (test_without_a_gpu_*); run these where there is a GPU",
)
without_gpu = pytest.mark.skipif(
    HAS_NVDEC, reason="this machine has a GPU: the NVDEC tests cover device='cuda' here"
)


@nvdec
@pytest.mark.parametrize("clip", CLIPS)
@pytest.mark.parametrize("request_", REQUESTS, ids=repr)
def test_nvdec_gives_the_cpu_frames(long_clips, clip, request_, caplog):
    caplog.set_level(logging.INFO, logger="mmprep.decoders")
    cpu = decode_video(long_clips[clip], **request_)
    cuda = decode_video(long_clips[clip], device="cuda", **request_)
    assert cuda.indices.tolist() == cpu.indices.tolist()
    assert cuda.timestamps.tolist() == cpu.timestamps.tolist()
    assert painted(cuda.frames) == painted(cpu.frames)
    assert np.array_equal(cuda.frames, cpu.frames)
    # NVDEC did the work where it takes the codec; where it does not, the fallback said so
    fell_back = [r.getMessage() for r in caplog.records if "decoded on the CPU" in r.getMessage()]
    assert bool(fell_back) == (clip in NOT_NVDECS), fell_back


@without_gpu
@pytest.mark.parametrize("clip", CLIPS)
def test_without_a_gpu_cuda_falls_back_to_the_cpu(long_clips, clip):
    """The fallback, as the fallback: device="cuda" opens no hwaccel here, and the CPU decodes."""
    assert gpu.hwaccel_for("cuda") is None
    cpu = decode_video(long_clips[clip], num_frames=5)
    fallback = decode_video(long_clips[clip], device="cuda", num_frames=5)
    assert fallback.indices.tolist() == cpu.indices.tolist() and np.array_equal(fallback.frames, cpu.frames)


@without_gpu
def test_without_a_gpu_the_cpu_decodes_and_says_so_once(caplog):
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


def _accounts(clip) -> list[str]:
    body = chat(video(data_url(clip, "video/mp4"), num_frames=4))
    answers = []
    for device in ("cpu", "cuda"):
        with LiveServer(decode_device=device) as live:
            response = post(live, body)
        assert response.status_code == 200, response.text
        answers.append(response.json()["choices"][0]["message"]["content"])
    return answers  # the echo accounts: shapes, fingerprints, times, indices


@nvdec
def test_the_service_decodes_on_nvdec_with_the_device_setting(long_clips):
    cpu, cuda = _accounts(long_clips["h264_bframes.mp4"])
    assert cuda == cpu


@without_gpu
def test_without_a_gpu_the_services_cuda_setting_falls_back_to_the_cpu(long_clips):
    cpu, fallback = _accounts(long_clips["h264_bframes.mp4"])
    assert fallback == cpu and not gpu.cuda_usable()
