"""decode_video on real files: which frames, at which times, how many, what shape."""

import io

import av
import numpy as np
import pytest

from mmprep.decoders import MediaTooLargeError, decode_video, probe_video
from tests.data.media.make_fixtures import CFR_CLIPS, paint
from tests.support.media import MEDIA, on_screen, painted, reference_decode, reference_targets

VP9_224P = MEDIA / "224p_6_vp9.webm"


# -- the regression this project exists for: VP9/WebM without duration or frame count --


def test_vp9_webm_without_stream_duration_returns_every_frame():
    video = decode_video(VP9_224P)
    assert video.frames.shape == (6, 224, 224, 3)
    assert painted(video.frames) == [0, 1, 2, 3, 4, 5]
    assert video.timestamps.tolist() == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]


def test_vp9_webm_metadata_falls_back_to_the_container():
    meta = decode_video(VP9_224P).metadata
    assert (meta.duration, meta.duration_source, meta.num_frames, meta.fps) == (3.0, "container", 6, 2.0)
    assert (meta.width, meta.height, meta.codec, meta.rotation) == (224, 224, "vp9", 0)
    assert "webm" in meta.container


def test_vp9_webm_at_one_fps_gives_three_frames():
    video = decode_video(VP9_224P, fps=1)
    assert painted(video.frames) == [0, 2, 4]
    assert video.timestamps.tolist() == [0.0, 1.0, 2.0]


def test_vp9_webm_two_frames_are_the_first_and_the_last():
    video = decode_video(VP9_224P, num_frames=2)
    assert video.timestamps.tolist() == [0.0, 2.5]
    assert painted(video.frames) == [0, 5]


def test_probe_agrees_with_decode():
    assert probe_video(VP9_224P) == decode_video(VP9_224P, num_frames=1).metadata


# -- the duration fallback, step by step ------------------------------------------------


def test_a_late_first_frame_counts_as_time_zero():
    video = decode_video(MEDIA / "start_offset_1500ms_vp9.webm", fps=1)
    assert video.timestamps.tolist() == [0.0, 1.0, 2.0]
    assert painted(video.frames) == [0, 2, 4]
    meta = video.metadata
    assert (meta.start_time, meta.duration, meta.duration_source) == (1.5, 3.0, "container")


def test_audio_that_outlasts_the_video_does_not_stretch_it():
    video = decode_video(MEDIA / "audio_outlasts_video_vp9.webm", num_frames=2)
    assert (video.metadata.duration, video.metadata.duration_source) == (2.0, "packets")
    assert painted(video.frames) == [0, 3]


def test_a_webm_with_no_duration_anywhere_uses_packet_timestamps():
    video = decode_video(MEDIA / "live_no_duration_vp9.webm", fps=1)
    meta = video.metadata
    assert (meta.duration, meta.duration_source, meta.num_frames) == (4.0, "packets", 20)
    assert painted(video.frames) == [0, 5, 10, 15]


def test_an_avi_header_claiming_1000_frames_is_not_believed():
    video = decode_video(MEDIA / "lying_header_mpeg4.avi", num_frames=3)
    meta = video.metadata
    assert (meta.duration, meta.duration_source, meta.num_frames) == (2.0, "packets", 20)
    assert painted(video.frames) == [0, 9, 19]  # targets 0, 0.95 and 1.9 s


def test_an_honest_avi_keeps_its_stream_duration():
    meta = probe_video(MEDIA / "bframes_mpeg4.avi")
    assert (meta.duration, meta.duration_source, meta.num_frames, meta.fps) == (2.0, "stream", 20, 10.0)


def test_an_edit_list_trim_hides_the_frames_before_it():
    video = decode_video(MEDIA / "edit_list_h264.mp4")
    assert painted(video.frames) == list(range(4, 16))  # 16 stored, 12 shown
    assert video.metadata.num_frames == 12
    assert video.metadata.duration == 1.5
    assert video.timestamps[0] == 0.0


def test_variable_frame_rate_samples_by_presentation_time():
    video = decode_video(MEDIA / "vfr_h264.mkv", fps=2)
    # Targets 0, .5, 1, 1.5, 2 s: the frame at 1.0 s is still on screen at 1.5 s (once),
    # and at 2.0 s the frame shown is the one that started at 1.98 s.
    assert painted(video.frames) == [0, 4, 6, 9]
    assert video.timestamps.tolist() == pytest.approx([0.0, 0.5, 1.0, 1.98])


# -- which frames: the frame on screen at t, in the stream's own ticks -------------------


@pytest.mark.parametrize("name, rate, total", CFR_CLIPS, ids=[name for name, _, _ in CFR_CLIPS])
def test_num_frames_on_constant_rate_video_takes_the_frames_linspace_names(name, rate, total):
    for n in range(1, 65):
        video = decode_video(MEDIA / name, num_frames=n)
        expected = sorted(set(np.linspace(0, total - 1, n, dtype=int).tolist()))  # vLLM's and SGLang's
        assert video.indices.tolist() == expected, f"num_frames={n}"
        assert painted(video.frames) == expected, f"num_frames={n}"


def test_fps_takes_the_frame_on_screen_at_k_over_r():
    # 30000/1001 fps: frame 30 starts at 1.001 s, so at 1 s frame 29 is still on screen.
    video = decode_video(MEDIA / "cfr_29.97fps_h264.mp4", fps=1)
    assert painted(video.frames) == video.indices.tolist() == [0, 29, 59]


def test_a_frame_picks_rule_names_the_frames_from_the_true_count_and_duration():
    seen = []

    def picks(metadata):
        seen.append((metadata.num_frames, metadata.duration, metadata.header_frames))
        return [0, 12, 12, metadata.num_frames + 5]  # twice and past the end: once each, the last frame

    video = decode_video(MEDIA / "cfr_29.97fps_h264.mp4", num_frames=4, frame_picks=picks)
    assert seen == [(90, pytest.approx(90 * 1001 / 30000), 90)]
    assert painted(video.frames) == video.indices.tolist() == [0, 12, 89]
    # None: the sampling as asked
    video = decode_video(MEDIA / "cfr_29.97fps_h264.mp4", fps=1, frame_picks=lambda metadata: None)
    assert video.indices.tolist() == [0, 29, 59]


@pytest.mark.parametrize(
    ("name", "claimed", "plays"),
    [
        ("lying_header_mpeg4.avi", 1000, 20),  # the AVI's frame count
        ("edit_list_h264.mp4", 16, 12),  # the MP4's samples, 4 hidden by its edit list
        ("start_offset_1500ms_vp9.webm", 9, 6),  # no count: the container's 4.5 s x 2 fps
        ("vfr_h264.mkv", 71, 12),  # no count: 2.84 s x the 25 fps claimed
        ("live_no_duration_vp9.webm", 0, 20),  # neither a count nor a duration
    ],
)
def test_the_metadata_keeps_the_frame_count_the_header_claims(name, claimed, plays):
    """What OpenCV's CAP_PROP_FRAME_COUNT reads of the file (vLLM's loader picks frames by it),
    beside the frames that play."""
    metadata = probe_video(MEDIA / name)
    assert (metadata.header_frames, metadata.num_frames) == (claimed, plays)


# -- which stream: FFmpeg's best, not the first -------------------------------------------

TWO_STREAMS = MEDIA / "two_video_streams_h264.mp4"


def test_the_best_video_stream_is_decoded_not_the_first():
    video = decode_video(TWO_STREAMS, num_frames=3)
    assert video.frames.shape == (3, 180, 320, 3)
    assert painted(video.frames) == [0, 4, 9]  # the 160x90 preview paints 100 + i
    assert (video.metadata.width, video.metadata.height, video.metadata.num_frames) == (320, 180, 10)
    assert probe_video(TWO_STREAMS) == video.metadata


def test_limits_before_decoding_are_checked_on_the_best_stream():
    for call in (decode_video, probe_video):
        with pytest.raises(MediaTooLargeError, match="320x180"):
            call(TWO_STREAMS, max_source_pixels=160 * 90)
    with pytest.raises(MediaTooLargeError, match="2 frames of 320x180"):
        decode_video(TWO_STREAMS, num_frames=2, max_bytes=2 * 160 * 90 * 3)


# -- codecs and containers, against an independent reference --------------------------

FIXTURES = [
    "224p_6_vp9.webm",
    "start_offset_1500ms_vp9.webm",
    "audio_outlasts_video_vp9.webm",
    "vfr_h264.mkv",
    "bframes_h264.mp4",
    "hevc.mp4",
    "av1.webm",
    "vp8.webm",
    "bframes_mpeg4.avi",
    "lying_header_mpeg4.avi",
    "edit_list_h264.mp4",
    "live_no_duration_vp9.webm",
    "rotated_90_h264.mp4",
    "size_change_vp9.webm",
    "two_video_streams_h264.mp4",
    *(name for name, _, _ in CFR_CLIPS),
]
REQUESTS = [
    {},
    {"fps": 1.0},
    {"fps": 3.0},
    {"fps": 30.0},
    {"num_frames": 1},
    {"num_frames": 3},
    {"num_frames": 7},
    {"num_frames": 1000},
    {"fps": 4.0, "max_frames": 3},
    {"max_frames": 5},
]


def assert_matches_reference(path, request, threads=0):
    video = decode_video(path, threads=threads, **request)
    ref = reference_decode(path)
    meta = video.metadata
    wanted = on_screen(ref, reference_targets(ref, meta.duration, **request))
    assert painted(video.frames) == [ref.indices[i] for i in wanted]
    assert video.timestamps == pytest.approx(ref.times[wanted], abs=1e-6)
    assert video.indices.tolist() == wanted


@pytest.mark.parametrize("name", FIXTURES)
@pytest.mark.parametrize("request_", REQUESTS, ids=repr)
def test_fixture_frames_match_the_reference(name, request_):
    assert_matches_reference(MEDIA / name, request_)


LONG_REQUESTS = [
    {"num_frames": 1},
    {"num_frames": 4},
    {"num_frames": 9},
    {"fps": 0.5},
    {"fps": 1.7},
    {"num_frames": 32},
    {},
]


@pytest.mark.parametrize(
    "clip", ["h264_bframes.mp4", "h264_bframes.mkv", "hevc.mp4", "vp9.webm", "av1.mkv", "mpeg4.avi"]
)
@pytest.mark.parametrize("request_", LONG_REQUESTS, ids=repr)
@pytest.mark.parametrize("threads", [1, 2], ids=["one decoder", "keyframe intervals side by side"])
def test_seeking_and_skipping_return_the_reference_frames(long_clips, clip, request_, threads):
    assert_matches_reference(long_clips[clip], request_, threads)


def grab_loop_times(path) -> list[float]:
    """Each frame's time in the order the decoder hands frames out from the start, as
    OpenCV's grab loop counts them (seconds from the earliest frame's time)."""
    with av.open(str(path)) as container:
        stream = container.streams.best("video")
        assert isinstance(stream, av.VideoStream)
        pts = []
        for frame in container.decode(stream):
            assert frame.pts is not None, f"{path}: a frame without a time"
            pts.append(frame.pts)
        time_base = stream.time_base  # read before the container closes: the stream goes with it
    return [float((p - min(pts)) * time_base) for p in pts]


ALL_VIDEOS = sorted(
    path.name
    for path in MEDIA.iterdir()
    if path.suffix in {".mp4", ".avi", ".mkv", ".webm"}
    and path.name not in {"audio_only_opus.webm", "unknown_codec.avi"}
)


@pytest.mark.parametrize("name", ALL_VIDEOS)
def test_picked_positions_are_the_frames_the_grab_loop_hands_out(name):
    """A frame_picks rule (a model's own loader) names frames by their place in what the
    decoder hands out from the start. Where that order is the timestamps', mmprep seeks to
    them; where the two may part (packed B-frames in a real AVI, a real MP4 whose times
    follow decode order), it counts the decoder's output: either way, the grab loop's frames."""
    grabbed = grab_loop_times(MEDIA / name)
    positions = list(range(0, len(grabbed), 3))
    video = decode_video(MEDIA / name, frame_picks=lambda metadata: positions)
    assert video.timestamps == pytest.approx([grabbed[i] for i in positions], abs=1e-6)
    assert video.indices.tolist() == positions


@pytest.mark.parametrize("clip", ["h264_bframes.mp4", "vp9.webm"])
@pytest.mark.parametrize("threads", [1, 2], ids=["one decoder", "keyframe intervals side by side"])
def test_on_frame_announces_every_returned_frame_in_its_place(long_clips, clip, threads):
    """What a frame consumer (the vision processor) relies on to start before the decode ends."""
    import threading

    announced, announcers, lock = {}, set(), threading.Lock()

    def on_frame(position, count, frame):
        with lock:
            announced[position] = (count, frame.copy())
            announcers.add(threading.current_thread().name)

    video = decode_video(long_clips[clip], num_frames=32, threads=threads, on_frame=on_frame)
    assert sorted(announced) == list(range(len(video.frames))) and len(video.frames) == 32
    assert {count for count, _ in announced.values()} == {32}
    for position, (_, frame) in announced.items():
        np.testing.assert_array_equal(frame, video.frames[position])
    if threads > 1:  # side by side, the runs announce from their own threads
        assert all(name.startswith("mmprep-gop") for name in announcers)


def test_what_on_frame_raises_stops_the_decode_unchanged():
    def on_frame(position, count, frame):
        raise LookupError(f"no room for frame {position}")

    with pytest.raises(LookupError, match="no room for frame 0"):
        decode_video(VP9_224P, on_frame=on_frame)


def keyframe_positions(path) -> list[int]:
    import av

    with av.open(str(path)) as container:
        return [i for i, frame in enumerate(container.decode(video=0)) if frame.key_frame]


@pytest.mark.parametrize("clip", ["h264_bframes.mp4", "h264_bframes.mkv", "hevc.mp4", "vp9.webm", "av1.mkv"])
@pytest.mark.parametrize("request_", [{"num_frames": 5}, {"fps": 0.7}, {"num_frames": 64}], ids=repr)
def test_keyframe_mode_takes_the_keyframe_nearest_each_target(long_clips, clip, request_):
    path = long_clips[clip]
    video = decode_video(path, seek_mode="keyframe", **request_)
    ref = reference_decode(path)
    keys = keyframe_positions(path)
    targets = reference_targets(ref, video.metadata.duration, **request_)
    nearest = sorted({min(keys, key=lambda k: abs(ref.seconds(k) - t)) for t in targets})
    assert video.indices.tolist() == nearest
    assert video.timestamps == pytest.approx(ref.times[nearest], abs=1e-6)  # the keyframes' true times
    assert painted(video.frames) == [ref.indices[k] for k in nearest]


def test_keyframe_mode_is_refused_when_misspelled():
    from mmprep.decoders import InvalidSamplingError

    with pytest.raises(InvalidSamplingError, match="seek_mode"):
        decode_video(VP9_224P, seek_mode="fast")


# -- pictures: upright, right colours, right size --------------------------------------


@pytest.mark.parametrize("degrees", [90, 180, 270])
def test_phone_video_comes_out_upright(degrees):
    video = decode_video(MEDIA / f"rotated_{degrees}_h264.mp4")
    assert video.frames.shape == (6, 160, 96, 3)  # portrait, as the phone showed it
    assert painted(video.frames) == [0, 1, 2, 3, 4, 5]  # the index band is on top
    corner = video.frames[0, 80:100, 0:20].mean(axis=(0, 1))  # red square, left side
    assert corner[0] > 180 and corner[1] < 60
    meta = video.metadata
    assert (meta.width, meta.height, meta.rotation) == (96, 160, degrees)


def test_a_mid_stream_size_change_is_scaled_to_the_first_frame_size():
    video = decode_video(MEDIA / "size_change_vp9.webm")
    assert video.frames.shape == (8, 128, 192, 3)
    assert painted(video.frames) == list(range(8))


SWATCHES = [(200, 40, 40), (40, 180, 60), (50, 60, 210)]


@pytest.mark.parametrize("name", ["bt709_720p_h264.mp4", "full_range_bt601_h264.mp4"])
def test_colours_follow_the_frame_matrix_and_range(name):
    video = decode_video(MEDIA / name)
    centres = video.frames[:, video.frames.shape[1] // 2, video.frames.shape[2] // 2].astype(int)
    # Read with the wrong matrix (BT.601 for BT.709) these are 12 to 23 levels off.
    assert np.abs(centres - np.array(SWATCHES)).max() <= 4


def test_max_pixels_scales_down_keeping_the_aspect_ratio():
    video = decode_video(MEDIA / "bframes_h264.mp4", num_frames=4, max_pixels=5000)
    assert video.frames.shape == (4, 57, 86, 3)  # 192x128 scaled by sqrt(5000 / 24576)
    assert 57 * 86 <= 5000


def test_max_pixels_applies_to_rotated_video_upright():
    video = decode_video(MEDIA / "rotated_90_h264.mp4", max_pixels=96 * 160 // 4)
    assert video.frames.shape == (6, 80, 48, 3)
    assert painted(video.frames) == list(range(6))


def test_small_frames_are_never_scaled_up():
    assert decode_video(VP9_224P, max_pixels=10**6).frames.shape == (6, 224, 224, 3)


# -- the returned object -----------------------------------------------------------------


def test_frames_are_c_contiguous_uint8_rgb():
    video = decode_video(MEDIA / "hevc.mp4", num_frames=5)
    assert video.frames.dtype == np.uint8 and video.frames.flags.c_contiguous
    assert video.timestamps.dtype == np.float64 and video.indices.dtype == np.int64


def test_indices_are_positions_in_presentation_order():
    video = decode_video(MEDIA / "bframes_h264.mp4", fps=3)  # 24 fps: t = k/3 is frame 8k
    assert video.indices.tolist() == [0, 8, 16, 24, 32, 40]


def test_variable_frame_rate_indices_are_unique_positions_not_time_times_fps():
    video = decode_video(MEDIA / "vfr_h264.mkv")  # round(t * fps) gave two frames index 48
    assert video.indices.tolist() == list(range(12)) == painted(video.frames)
    assert decode_video(MEDIA / "vfr_h264.mkv", fps=2).indices.tolist() == [0, 4, 6, 9]


def test_hf_metadata_has_exactly_transformers_fields():
    video = decode_video(VP9_224P, num_frames=2)
    assert video.to_hf_metadata() == {
        "total_num_frames": 6,
        "fps": 2.0,
        "width": 224,
        "height": 224,
        "duration": 3.0,
        "video_backend": "pyav",
        "frames_indices": [0, 5],
    }


@pytest.mark.slow  # imports transformers (and torch), about 3 s
def test_transformers_video_metadata_takes_hf_metadata_as_is():
    video_utils = pytest.importorskip(
        "transformers.video_utils", reason="transformers is not installed (pip install transformers)"
    )
    video = decode_video(MEDIA / "bframes_h264.mp4", fps=3)
    metadata = video_utils.VideoMetadata(**video.to_hf_metadata())
    assert (metadata.total_num_frames, metadata.fps, metadata.width, metadata.height) == (48, 24.0, 192, 128)
    assert metadata.frames_indices == [0, 8, 16, 24, 32, 40]
    # What Qwen-VL-style processors read: the same times the decoder returned.
    assert metadata.timestamps == pytest.approx(video.timestamps.tolist())


def test_asking_for_more_frames_than_exist_returns_them_all():
    assert len(decode_video(VP9_224P, num_frames=50).frames) == 6
    assert len(decode_video(VP9_224P, fps=60).frames) == 6


def test_max_frames_caps_fps_sampling_over_the_whole_video():
    video = decode_video(VP9_224P, fps=2, max_frames=3)
    assert painted(video.frames) == [0, 2, 4]


# -- sources ---------------------------------------------------------------------------


class PipeLike(io.RawIOBase):
    """A binary stream that cannot seek, like a socket or a pipe."""

    def __init__(self, data: bytes):
        self._inner = io.BytesIO(data)

    def readable(self):
        return True

    def readinto(self, buffer):
        return self._inner.readinto(buffer)


@pytest.mark.parametrize(
    "make_source",
    [
        lambda p: p.read_bytes(),
        lambda p: bytearray(p.read_bytes()),
        lambda p: memoryview(p.read_bytes()),
        lambda p: str(p),
        lambda p: p,
        lambda p: open(p, "rb"),  # the test closes it
        lambda p: io.BytesIO(p.read_bytes()),
        lambda p: PipeLike(p.read_bytes()),
    ],
    ids=["bytes", "bytearray", "memoryview", "str", "Path", "file", "BytesIO", "pipe"],
)
def test_every_kind_of_source_gives_the_same_frames(make_source):
    source = make_source(MEDIA / "bframes_h264.mp4")
    video = decode_video(source, num_frames=3)
    assert painted(video.frames) == [0, 23, 47]
    if hasattr(source, "close"):
        source.close()


def test_a_title_tag_that_is_not_utf8_does_not_stop_the_decode(tmp_path):
    # Cameras and old muxers write Latin-1 tags. PyAV before 19 decodes every tag when it
    # opens the file (and fails on these unless told to replace); PyAV 19 decodes them lazily.
    path = tmp_path / "latin1_title.mkv"
    with av.open(str(path), "w", format="matroska") as container:
        container.metadata["title"] = "caf\u00e9 caf\u00e9"
        stream = container.add_stream("libx264", rate=10)
        stream.width, stream.height, stream.pix_fmt = 64, 64, "yuv420p"
        for index in range(3):
            frame = av.VideoFrame.from_ndarray(paint(index, 64, 64), format="rgb24")
            container.mux(stream.encode(frame))
        container.mux(stream.encode())
    utf8 = "caf\u00e9 caf\u00e9".encode()
    latin1_broken = utf8.replace("\u00e9".encode(), b"\xe9\xe9")  # same length, not UTF-8
    data = path.read_bytes()
    assert data.count(utf8) == 1
    video = decode_video(data.replace(utf8, latin1_broken), num_frames=3)
    assert painted(video.frames) == [0, 1, 2]


@pytest.mark.parametrize("threads", [1, 2])  # 2: keyframe intervals side by side, when there are several
def test_a_decode_leaves_nothing_of_its_own_for_the_garbage_collector(threads):
    """A reference cycle once kept the output buffer, the decoder and the container of every
    decode alive until the cyclic collector ran (hundreds of MB for a long request). What a
    decode leaves must go when it returns; only PyAV's own shells of closed containers may
    wait for the collector (PyAV 17 builds cycles inside them; 19 does not)."""
    import gc
    import mmap

    decode_video(MEDIA / "cfr_25fps_h264.mp4", num_frames=4, threads=threads)  # imports, caches
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        video = decode_video(MEDIA / "cfr_25fps_h264.mp4", num_frames=4, threads=threads)
        del video
        gc.collect()
        ours = [
            o
            for o in gc.garbage
            if type(o).__module__.startswith("mmprep.decoders") or isinstance(o, np.ndarray | mmap.mmap)
        ]
        assert not ours, f"{len(ours)} objects of the decode waited for the collector: {ours[:5]}"
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


def test_memory_of_dropped_frames_is_reused_and_of_held_frames_never(monkeypatch):
    """The next decode writes into the pages of frames nobody holds any more (no fresh pages
    for the kernel to fault in), never into frames still held."""
    from mmprep.decoders import memory

    monkeypatch.setattr(memory, "POOL", memory.MappingPool(1 << 30))
    path = MEDIA / "cfr_25fps_h264.mp4"
    held = decode_video(path, num_frames=5).frames
    expected = held.copy()
    dropped = decode_video(path, fps=2, max_frames=5).frames
    assert dropped.shape == held.shape and painted(dropped) != painted(held)
    address = dropped.__array_interface__["data"][0]
    assert memory.POOL.idle_bytes == 0
    del dropped  # its last view: the mapping goes back to the pool
    assert memory.POOL.idle_bytes == expected.nbytes
    again = decode_video(path, fps=2, max_frames=5).frames
    assert again.__array_interface__["data"][0] == address and memory.POOL.idle_bytes == 0
    np.testing.assert_array_equal(held, expected)
    del held, again
    assert memory.POOL.idle_bytes == 2 * expected.nbytes


def test_the_pool_fits_requests_closely_and_keeps_at_most_its_limit():
    import mmap

    from mmprep.decoders.memory import MappingPool

    kib, mib = 1 << 10, 1 << 20
    pool = MappingPool(keep_bytes=3 * mib)
    one, two = pool.take(mib), pool.take(2 * mib)
    pool.give_back(one)
    pool.give_back(two)
    assert pool.idle_bytes == 3 * mib
    assert pool.take(3 * mib) not in (one, two)  # nothing idle is big enough: a new mapping
    assert pool.take(1500 * kib) not in (one, two)  # `two` is more than 5/4 of that
    assert pool.take(900 * kib) is one  # the smallest that fits
    pool.give_back(one)
    pool.give_back(mmap.mmap(-1, mib, flags=mmap.MAP_PRIVATE))  # 4 MiB idle: the oldest (`two`) goes
    assert pool.idle_bytes == 2 * mib
    assert pool.take(mib) is not one  # of equal ones, the newest


def test_a_mapping_given_back_while_the_pool_is_busy_waits_for_no_lock():
    """The garbage collector may free frames (run their finalizer) inside the pool's own
    take(), in the thread that holds its lock: giving back must not wait for that lock."""
    import mmap
    import threading

    from mmprep.decoders.memory import MappingPool

    pool = MappingPool(keep_bytes=1 << 30)
    mapping = mmap.mmap(-1, 1 << 20, flags=mmap.MAP_PRIVATE)

    def finalizer_inside_take():
        with pool._lock:  # where take() holds it
            pool.give_back(mapping)

    thread = threading.Thread(target=finalizer_inside_take, daemon=True)
    thread.start()
    thread.join(5)
    assert not thread.is_alive(), "give_back waited for the lock its own thread held"
    assert pool.take(1 << 20) is mapping  # and the mapping was not lost


def test_frames_are_a_writable_contiguous_array_of_their_own_memory():
    frames = decode_video(MEDIA / "cfr_25fps_h264.mp4", num_frames=3).frames
    assert frames.flags.c_contiguous and frames.flags.writeable
    frames[:] = 7  # the memory is ours to write, and freed with the array
    assert (frames == 7).all()
