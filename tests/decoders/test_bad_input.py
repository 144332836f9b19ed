"""Bad input gets a MediaError with a stable code and a message a user can act on:
never another exception, never a crash, never a hang."""

import io
import random
import re
import threading

import av
import numpy as np
import pytest
from PIL import Image

from mmprep.decoders import (
    CorruptMediaError,
    DecodeCancelledError,
    DecodeTimeoutError,
    MediaError,
    MediaNotFoundError,
    NoVideoStreamError,
    UnsupportedCodecError,
    decode_image,
    decode_video,
    probe_video,
)
from tests.support.media import MEDIA

VIDEOS = ["224p_6_vp9.webm", "bframes_h264.mp4", "hevc.mp4", "av1.webm", "bframes_mpeg4.avi", "vfr_h264.mkv"]


@pytest.mark.parametrize("source", [b"", bytearray(), io.BytesIO(b"")], ids=["bytes", "bytearray", "file"])
def test_empty_input_is_corrupt_media(source):
    with pytest.raises(CorruptMediaError, match="empty|cannot read"):
        decode_video(source)


def test_empty_file_on_disk_is_corrupt_media(tmp_path):
    (tmp_path / "empty.mp4").write_bytes(b"")
    with pytest.raises(CorruptMediaError, match="empty"):
        decode_video(tmp_path / "empty.mp4")


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(MediaNotFoundError, match="nope.mp4") as caught:
        decode_video(tmp_path / "nope.mp4")
    assert caught.value.code == "media_not_found"


def test_a_directory_is_not_a_video(tmp_path):
    with pytest.raises(MediaError):
        decode_video(tmp_path)


@pytest.mark.parametrize(
    "data",
    [b"hello, this is not a video\n" * 40, bytes(random.Random(7).randbytes(50_000)), b"\x00" * 4096],
    ids=["text", "noise", "zeros"],
)
def test_bytes_that_are_no_media_are_refused(data):
    with pytest.raises(CorruptMediaError) as caught:
        decode_video(data)
    assert caught.value.code == "corrupt_media"


def test_audio_only_has_no_video_stream():
    with pytest.raises(NoVideoStreamError, match="audio") as caught:
        decode_video(MEDIA / "audio_only_opus.webm")
    assert caught.value.code == "no_video_stream"


@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_a_still_image_is_not_a_video(fmt):
    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), (10, 200, 30)).save(buffer, fmt)
    with pytest.raises(NoVideoStreamError, match="still image .*, not a video: send it as an image_url part"):
        decode_video(buffer.getvalue())


@pytest.mark.parametrize("given_as", ["bytes", "path", "file"])
def test_an_mp4_cut_off_before_its_index_says_it_is_incomplete(tmp_path, given_as):
    data = (MEDIA / "cfr_25fps_h264.mp4").read_bytes()  # its moov box is written last, as FFmpeg does
    cut = data[: len(data) // 2]
    (tmp_path / "cut.mp4").write_bytes(cut)
    source = {"bytes": cut, "path": str(tmp_path / "cut.mp4"), "file": io.BytesIO(b"junk" + cut)}[given_as]
    if given_as == "file":
        source.seek(4)  # read from where the caller left the file, as decode_video does
    with pytest.raises(
        CorruptMediaError, match=r"the MP4/MOV file is incomplete: it ends before its index \(the moov box\)"
    ):
        decode_video(source)


@pytest.mark.parametrize(
    ("cut_at", "says"),
    [
        (lambda boxes: boxes[b"moov"] + 200, "inside its index (the moov box)"),
        (lambda boxes: boxes[b"mdat"] + 500, "inside its media data (the mdat box)"),
    ],
    ids=["in-the-index", "before-the-first-frame"],
)
def test_an_mp4_cut_off_elsewhere_says_where(tmp_path, cut_at, says):
    """An index written last and cut into; an index written first (streaming's faststart)
    with the media data cut before the first frame is whole."""
    faststart = "mdat" in says
    data = faststart_mp4(tmp_path) if faststart else (MEDIA / "cfr_25fps_h264.mp4").read_bytes()
    with pytest.raises(CorruptMediaError, match=re.escape(f"the MP4/MOV file is incomplete: it ends {says}")):
        decode_video(data[: cut_at(top_level_boxes(data))])


def faststart_mp4(folder) -> bytes:
    """One second of noise in an MP4 whose index comes before its media data."""
    path = folder / "faststart.mp4"
    with av.open(str(path), "w", options={"movflags": "faststart"}) as out:
        stream = out.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = 160, 120, "yuv420p"
        noise = np.random.default_rng(0).integers(0, 255, (25, 120, 160, 3), dtype=np.uint8)
        for pixels in noise:
            out.mux(stream.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24")))
        out.mux(stream.encode())
    return path.read_bytes()


def top_level_boxes(data: bytes) -> dict[bytes, int]:
    """Where each top-level box of an MP4 starts."""
    offsets, offset = {}, 0
    while offset + 8 <= len(data):
        offsets[data[offset + 4 : offset + 8]] = offset
        offset += int.from_bytes(data[offset : offset + 4], "big")
    return offsets


def test_an_unknown_codec_is_unsupported():
    with pytest.raises(UnsupportedCodecError) as caught:
        decode_video(MEDIA / "unknown_codec.avi")
    assert caught.value.code == "unsupported_codec"


def test_a_passed_deadline_stops_the_decode():
    with pytest.raises(DecodeTimeoutError) as caught:
        decode_video(MEDIA / "bframes_h264.mp4", timeout=0)
    assert caught.value.code == "decode_timeout"


def test_a_cancelled_decode_does_no_work():
    # The service sets the event when the client goes away; a decode still queued then
    # must stop at once rather than decode frames nobody will read.
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(DecodeCancelledError) as caught:
        decode_video(MEDIA / "bframes_h264.mp4", cancel=cancel)
    assert caught.value.code == "cancelled"


def test_a_nonsense_argument_is_named_not_blamed_on_the_video():
    # FFmpeg answers a negative thread count with EINVAL, which read as a damaged video.
    with pytest.raises(ValueError, match="threads") as caught:
        decode_video(MEDIA / "bframes_h264.mp4", threads=-1)
    assert caught.value.code == "invalid_argument"
    with pytest.raises(ValueError, match="max_source_pixels"):
        probe_video(MEDIA / "bframes_h264.mp4", max_source_pixels=0)


def test_probe_refuses_what_decode_refuses():
    with pytest.raises(NoVideoStreamError):
        probe_video(MEDIA / "audio_only_opus.webm")
    with pytest.raises(CorruptMediaError):
        probe_video(b"not a video at all")


def frames_or_media_error(data, **request):
    """What bad input may do: give frames, or raise MediaError. Nothing else."""
    try:
        video = decode_video(data, timeout=20, **request)
    except MediaError as error:
        assert error.code and str(error)
        return None
    assert video.frames.ndim == 4 and video.frames.shape[-1] == 3
    assert len(video.frames) == len(video.timestamps) == len(video.indices) >= 1
    return video


@pytest.mark.parametrize("name", VIDEOS)
def test_truncated_videos_give_frames_or_media_error(name):
    data = (MEDIA / name).read_bytes()
    for cut in sorted({1, 4, 16, 64, 200, 512, *range(0, len(data), max(1, len(data) // 24))}):
        frames_or_media_error(data[:cut], num_frames=4)


@pytest.mark.parametrize("name", VIDEOS)
def test_damaged_videos_give_frames_or_media_error(name):
    data = (MEDIA / name).read_bytes()
    rng = random.Random(name)
    for _ in range(40):
        damaged = bytearray(data)
        for _ in range(rng.randint(1, 12)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        frames_or_media_error(bytes(damaged), fps=2.0)


def test_a_damaged_middle_still_returns_the_frames_around_it():
    data = bytearray((MEDIA / "live_no_duration_vp9.webm").read_bytes())
    middle = len(data) // 2
    data[middle : middle + 40] = bytes(40)
    video = frames_or_media_error(bytes(data))
    assert video is not None and len(video.frames) >= 10


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b"<!doctype html>\n<html lang=en><title>404</title></html>", "an HTML page"),
        (b'{"error": "not found"}', "JSON text"),
        (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n" + b"0" * 200, "a PDF document"),
    ],
    ids=["html", "json", "pdf"],
)
def test_what_is_not_media_is_named_for_what_it_is(data, kind):
    with pytest.raises(CorruptMediaError, match=f"^this is {kind}, not a video$"):
        decode_video(data)
    with pytest.raises(CorruptMediaError, match=f"^this is {kind}, not an image$"):
        decode_image(data)


def test_a_damaged_video_says_what_it_looked_like():
    head = (MEDIA / "224p_6_vp9.webm").read_bytes()[:64]
    with pytest.raises(
        CorruptMediaError, match="starts like a Matroska/WebM file, so it may be damaged"
    ) as caught:
        decode_video(head)
    assert "<none>" not in str(caught.value)
