"""Generate the media fixtures in this folder with PyAV's bundled encoders.

    python tests/data/media/make_fixtures.py [BUILDER ...]

Every frame paints its own index into its pixels (see `paint`), so a test can read
back which frame the decoder returned (see `read_painted_index`). Each fixture is
named after the real-world trouble it reproduces. The files are checked in: the
encoders are not bit-exact across FFmpeg builds, and a regression test must keep
feeding the decoder the very bytes that once broke something.
"""

from __future__ import annotations

import io
import struct
import sys
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

HERE = Path(__file__).resolve().parent
BITS = 8  # indices 0..255: plenty for fixtures


def paint(index: int, width: int, height: int, corner: bool = False) -> np.ndarray:
    """An RGB frame that shows `index` as 8 black/white cells across its top quarter.

    The rest is mid grey; `corner` adds a red square in the top-left of the bottom
    half so a test can tell which way up a frame came out.
    """
    img = np.full((height, width, 3), 128, np.uint8)
    band = height // 4
    for bit in range(BITS):
        x0, x1 = bit * width // BITS, (bit + 1) * width // BITS
        img[:band, x0:x1] = 255 if (index >> bit) & 1 else 0
    if corner:
        side = min(width, height) // 4
        img[band * 2 : band * 2 + side, :side] = (220, 20, 20)
    return img


def read_painted_index(rgb: np.ndarray) -> int:
    """The index `paint` drew into `rgb` (H, W, 3), read from the cell centres."""
    height, width = rgb.shape[:2]
    band = rgb[: height // 4]
    index = 0
    for bit in range(BITS):
        x0, x1 = bit * width // BITS, (bit + 1) * width // BITS
        pad = max(1, (x1 - x0) // 4)
        cell = band[band.shape[0] // 4 : -band.shape[0] // 4 or None, x0 + pad : x1 - pad]
        if cell.mean() > 128:
            index |= 1 << bit
    return index


def _video_stream(container, codec, rate, width, height, pix_fmt="yuv420p", options=None):
    stream = container.add_stream(codec, rate=rate, options=options or {})
    stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
    stream.codec_context.thread_count = 1  # deterministic output
    return stream


def _encode(container, stream, frames):
    """Encode (pts, rgb) pairs into `stream`, pts in the stream's codec time base."""
    for pts, rgb in frames:
        frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
        frame.pts = pts
        container.mux(stream.encode(frame))
    container.mux(stream.encode(None))


def _write(name, fmt, build, container_options=None):
    path = HERE / name
    with av.open(str(path), "w", format=fmt, options=container_options or {}) as container:
        build(container)
    print(f"{name}: {path.stat().st_size} bytes")
    return path


def _painted(count, width, height, start=0, corner=False):
    return [(start + i, paint(i, width, height, corner)) for i in range(count)]


def write_painted_clip(path, fmt, codec, rate, count, width, height, options=None, codec_tag=None):
    """Encode `count` painted frames at `rate` fps into `path`: for tests that need
    longer clips than are worth checking in."""
    with av.open(str(path), "w", format=fmt) as container:
        stream = _video_stream(container, codec, rate, width, height, options=options)
        if codec_tag:
            stream.codec_context.codec_tag = codec_tag
        _encode(container, stream, _painted(count, width, height))
    return path


def write_long_single_keyframe_clip(path, frames, fps=30):
    """A long VP8 WebM (e.g. a screen recording) whose only keyframe is the first frame,
    built in a blink: 30 frames are encoded once and their inter-frame packets repeated.
    Its last frame costs decoding every frame before it."""
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="webm") as out:
        stream = _video_stream(out, "libvpx", fps, 64, 64, options={"g": "100000", "crf": "30", "b": "200k"})
        _encode(out, stream, _painted(30, 64, 64))
    buffer.seek(0)
    with av.open(buffer) as source, av.open(str(path), "w", format="webm") as out:
        template = source.streams.video[0]
        packets = [p for p in source.demux(template) if p.size]
        stream = out.add_stream_from_template(template)
        step = round(1 / (fps * template.time_base))
        for i in range(frames):
            packet = packets[0] if i == 0 else packets[1 + (i - 1) % (len(packets) - 1)]
            packet.stream, packet.time_base = stream, template.time_base
            packet.pts = packet.dts = i * step
            out.mux(packet)
    return path


# -- the fixtures --------------------------------------------------------------------


def vp9_webm_224p_6():
    """VP9 in WebM: no stream duration and no frame count; container says 3.0 s."""

    def build(c):
        s = _video_stream(c, "libvpx-vp9", 2, 224, 224, options={"crf": "20", "b": "0"})
        _encode(c, s, _painted(6, 224, 224))

    _write("224p_6_vp9.webm", "webm", build)


def vp9_webm_start_offset():
    """WebM whose first frame is shown at 1.5 s, not 0 (a cut from a longer recording)."""

    def build(c):
        s = _video_stream(c, "libvpx-vp9", 2, 128, 96, options={"crf": "20", "b": "0"})
        _encode(c, s, _painted(6, 128, 96, start=3))  # pts 3 at 1/2 s = 1.5 s

    _write("start_offset_1500ms_vp9.webm", "webm", build)


def vp9_webm_audio_outlasts_video():
    """2 s of video, 4 s of Opus audio: the container's 4 s must not stretch the video."""

    def build(c):
        v = _video_stream(c, "libvpx-vp9", 2, 128, 96, options={"crf": "20", "b": "0"})
        a = c.add_stream("libopus", rate=48000)
        a.layout, a.bit_rate = "mono", 6000
        packets = []
        for pts, rgb in _painted(4, 128, 96):
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
            frame.pts = pts
            packets += v.encode(frame)
        packets += v.encode(None)
        samples = 960
        for k in range(4 * 48000 // samples):
            tone = (0.1 * np.sin(np.arange(samples) * 0.05)).astype(np.float32)[None, :]
            frame = av.AudioFrame.from_ndarray(tone, format="flt", layout="mono")
            frame.sample_rate, frame.pts = 48000, k * samples
            packets += a.encode(frame)
        packets += a.encode(None)
        # Interleave by time as a real muxer input would be.
        packets.sort(key=lambda p: float(p.pts * p.time_base))
        c.mux(packets)

    _write("audio_outlasts_video_vp9.webm", "webm", build)


# Presentation times (ms) of the variable-frame-rate clip: bursts, gaps and a pause.
VFR_TIMES_MS = [0, 40, 80, 120, 500, 540, 1000, 1900, 1940, 1980, 2400, 2800]


def h264_vfr_mkv():
    """Variable frame rate (a screen recording): frames only when something moved."""

    def build(c):
        s = _video_stream(c, "libx264", 25, 128, 96, options={"crf": "18", "bf": "0"})
        s.codec_context.time_base = Fraction(1, 1000)
        s.time_base = Fraction(1, 1000)
        _encode(c, s, [(t, paint(i, 128, 96)) for i, t in enumerate(VFR_TIMES_MS)])

    _write("vfr_h264.mkv", "matroska", build)


def h264_bframes_mp4():
    """H.264 with B-frames (pyramid) in MP4, 48 frames at 24 fps, a keyframe every 12."""

    def build(c):
        opts = {
            "crf": "18",
            "bf": "3",
            "g": "12",
            "keyint_min": "12",
            "sc_threshold": "0",
            "x264-params": "b-pyramid=normal:open-gop=0",
        }
        s = _video_stream(c, "libx264", 24, 192, 128, options=opts)
        _encode(c, s, _painted(48, 192, 128))

    _write("bframes_h264.mp4", "mp4", build)


def hevc_mp4():
    """HEVC (x265) with B-frames in MP4, 24 frames at 12 fps."""

    def build(c):
        opts = {"crf": "18", "x265-params": "keyint=8:min-keyint=8:bframes=2:log-level=error"}
        s = _video_stream(c, "libx265", 12, 192, 128, options=opts)
        s.codec_context.codec_tag = "hvc1"
        _encode(c, s, _painted(24, 192, 128))

    _write("hevc.mp4", "mp4", build)


def av1_webm():
    """AV1 (SVT-AV1) in WebM, 16 frames at 8 fps."""

    def build(c):
        s = _video_stream(c, "libsvtav1", 8, 192, 128, options={"crf": "20", "g": "8", "preset": "12"})
        _encode(c, s, _painted(16, 192, 128))

    _write("av1.webm", "webm", build)


def vp8_webm():
    """VP8 in WebM, 12 frames at 6 fps, a keyframe every 4."""

    def build(c):
        s = _video_stream(c, "libvpx", 6, 128, 96, options={"crf": "8", "b": "1M", "g": "4"})
        _encode(c, s, _painted(12, 128, 96))

    _write("vp8.webm", "webm", build)


def mpeg4_avi():
    """MPEG-4 Part 2 with B-frames in AVI (a DivX-era file): AVI stores no pts."""

    def build(c):
        s = _video_stream(c, "mpeg4", 10, 128, 96, options={"qscale": "2", "bf": "2", "g": "10"})
        s.codec_context.codec_tag = "XVID"
        _encode(c, s, _painted(20, 128, 96))

    _write("bframes_mpeg4.avi", "avi", build)


def mpeg4_avi_lying_header():
    """The AVI above with headers that claim 1000 frames: the stream duration lies."""
    data = bytearray((HERE / "bframes_mpeg4.avi").read_bytes())
    avih = data.index(b"avih") + 8
    struct.pack_into("<I", data, avih + 16, 1000)  # avih.dwTotalFrames
    strh = data.index(b"strh") + 8
    struct.pack_into("<I", data, strh + 32, 1000)  # strh.dwLength
    (HERE / "lying_header_mpeg4.avi").write_bytes(bytes(data))
    print(f"lying_header_mpeg4.avi: {len(data)} bytes")


def mpeg4_avi_unknown_codec():
    """The AVI above with its codec FourCC replaced by one no decoder knows."""
    data = (HERE / "bframes_mpeg4.avi").read_bytes().replace(b"XVID", b"ZQZQ").replace(b"FMP4", b"ZQZQ")
    (HERE / "unknown_codec.avi").write_bytes(data)
    print(f"unknown_codec.avi: {len(data)} bytes")


def h264_rotated_mp4(degrees):
    """A phone video: pixels stored sideways, a display matrix says how to turn them."""
    upright_w, upright_h = 96, 160  # portrait, as the viewer should see it
    k = {90: -1, 180: 2, 270: 1}[degrees]  # inverse of the turn the player applies

    def build(c):
        stored = [
            (i, np.ascontiguousarray(np.rot90(paint(i, upright_w, upright_h, True), k))) for i in range(6)
        ]
        h, w = stored[0][1].shape[:2]
        s = _video_stream(c, "libx264", 6, w, h, options={"crf": "18"})
        s.set_display_rotation(degrees)  # counter-clockwise, as FFmpeg's display matrix
        _encode(c, s, stored)

    _write(f"rotated_{degrees}_h264.mp4", "mp4", build)


def vp9_size_change_webm():
    """The frame size changes mid-stream (an adaptive-bitrate recording): 192x128 then 96x64."""

    def build(c):
        s = _video_stream(c, "libvpx-vp9", 4, 192, 128, options={"crf": "20", "b": "0"})
        _encode_parts(c, s, Fraction(1, 4), [(192, 128, range(4)), (96, 64, range(4, 8))])

    _write("size_change_vp9.webm", "webm", build)


def _encode_parts(container, stream, time_base, parts):
    """Encode runs of frames at different sizes into one stream (new encoder per run)."""
    for width, height, indices in parts:
        ctx = av.CodecContext.create(stream.codec_context.name, "w")
        ctx.width, ctx.height, ctx.pix_fmt = width, height, "yuv420p"
        ctx.time_base, ctx.framerate = time_base, 1 / time_base
        ctx.options = {"crf": "20", "b": "0"}
        ctx.thread_count = 1
        for i in [*indices, None]:
            frame = None
            if i is not None:
                frame = av.VideoFrame.from_ndarray(paint(i, width, height), format="rgb24")
                frame.pts = i
            for packet in ctx.encode(frame):
                packet.stream, packet.time_base = stream, time_base
                container.mux(packet)


# Colours whose RGB differs by > 10 levels when BT.709 video is read as BT.601.
COLOUR_SWATCHES = [(200, 40, 40), (40, 180, 60), (50, 60, 210)]


# FFmpeg's AVColorSpace and AVColorRange numbers, as the H.264 VUI carries them.
AVCOL_SPC = {"ITU709": 1, "ITU601": 6}
AVCOL_RANGE = {"MPEG": 1, "JPEG": 2}


def h264_colour_mp4(name, width, height, colorspace, color_range):
    """Flat colour frames, the YUV matrix and range tagged in the H.264 stream."""

    def build(c):
        s = _video_stream(c, "libx264", 3, width, height, options={"crf": "10"})
        s.codec_context.colorspace = AVCOL_SPC[colorspace]
        s.codec_context.color_range = AVCOL_RANGE[color_range]
        for i, rgb in enumerate(COLOUR_SWATCHES):
            frame = av.VideoFrame.from_ndarray(np.full((height, width, 3), rgb, np.uint8), "rgb24")
            frame = frame.reformat(format="yuv420p", dst_colorspace=colorspace, dst_color_range=color_range)
            frame.colorspace, frame.color_range = AVCOL_SPC[colorspace], AVCOL_RANGE[color_range]
            frame.pts = i
            c.mux(s.encode(frame))
        c.mux(s.encode(None))

    _write(name, "mp4", build)


def h264_edit_list_mp4():
    """An iPhone-style trim: 4 frames before the edit point are stored but never shown.

    The MP4 holds 16 samples (its frame count says 16); the edit list starts the
    presentation at the 5th, so a player shows 12 frames, painted 4..15.
    """

    def build(c):
        s = _video_stream(c, "libx264", 8, 128, 96, options={"crf": "18", "bf": "0", "g": "16"})
        _encode(c, s, [(i - 4, paint(i, 128, 96)) for i in range(16)])

    _write("edit_list_h264.mp4", "mp4", build, {"use_editlist": "1"})


def vp9_live_webm():
    """A browser MediaRecorder-style WebM: no duration, no cues, nothing to seek by."""
    buf = io.BytesIO()
    with av.open(buf, "w", format="webm", options={"live": "1"}) as c:
        s = _video_stream(c, "libvpx-vp9", 5, 128, 96, options={"crf": "20", "b": "0", "g": "5"})
        _encode(c, s, _painted(20, 128, 96))
    (HERE / "live_no_duration_vp9.webm").write_bytes(buf.getvalue())
    print(f"live_no_duration_vp9.webm: {len(buf.getvalue())} bytes")


# Constant-frame-rate clips for the num_frames rule: (name, rate, frames). MP4's time scale
# is a multiple of the rate, so every frame starts on a whole tick.
CFR_CLIPS = [
    ("cfr_25fps_h264.mp4", Fraction(25), 80),
    ("cfr_29.97fps_h264.mp4", Fraction(30000, 1001), 90),
    ("cfr_60fps_h264.mp4", Fraction(60), 100),
]


def h264_cfr_mp4(name, rate, count):
    """A small constant-rate clip: frame k at k / rate exactly."""

    def build(c):
        s = _video_stream(c, "libx264", rate, 64, 48, options={"crf": "30", "g": "30"})
        _encode(c, s, _painted(count, 64, 48))

    _write(name, "mp4", build)


def h264_ntsc_30s_mp4():
    """890 frames at 30000/1001 fps (29.70 s), 64x48: at fps 1.1 vLLM's Qwen2-VL loader (and
    mmprep, standing in for it) takes 32 frames, 16 temporal blocks of a non-integer
    2 / (32 / 29.70) = 1.85602 s (bfloat16 1.859375), so Qwen2.5-VL's M-RoPE time positions of
    float32 and of the model's dtype part from block 7 on (issue 45). Indices wrap at 256."""
    write_painted_clip(
        HERE / "ntsc_30s_h264.mp4",
        "mp4",
        "libx264",
        Fraction(30000, 1001),
        890,
        64,
        48,
        options={"crf": "30", "g": "30"},
    )
    print(f"ntsc_30s_h264.mp4: {(HERE / 'ntsc_30s_h264.mp4').stat().st_size} bytes")


def h264_two_video_streams_mp4():
    """A small preview stream first (160x90, painted 100 + i), the real video second
    (320x180, painted i), both enabled (default), as in torchcodec's nasa_13013.mp4:
    FFmpeg's best video stream is the second, by its higher bit rate."""

    def build(c):
        preview = _video_stream(c, "libx264", 10, 160, 90, options={"crf": "30"})
        main = _video_stream(c, "libx264", 10, 320, 180, options={"crf": "18"})
        preview.disposition = main.disposition = av.stream.Disposition.default
        packets = []
        for stream, (width, height), offset in ((preview, (160, 90), 100), (main, (320, 180), 0)):
            for i in range(10):
                frame = av.VideoFrame.from_ndarray(paint(offset + i, width, height), format="rgb24")
                frame.pts = i
                packets += stream.encode(frame)
            packets += stream.encode(None)
        packets.sort(key=lambda p: float(p.dts * p.time_base))  # interleaved, as a muxer expects
        c.mux(packets)

    _write("two_video_streams_h264.mp4", "mp4", build)


def opus_audio_only_webm():
    """Audio and nothing else: a video decoder must refuse it by name."""

    def build(c):
        a = c.add_stream("libopus", rate=48000)
        a.layout = "mono"
        for k in range(10):
            frame = av.AudioFrame.from_ndarray(np.zeros((1, 960), np.float32), format="flt", layout="mono")
            frame.sample_rate, frame.pts = 48000, k * 960
            c.mux(a.encode(frame))
        c.mux(a.encode(None))

    _write("audio_only_opus.webm", "webm", build)


# -- a still image and a sound, for the requests the README shows ---------------------------


def jpeg_image():
    """A still JPEG, 320x240 (4:2:0, as cameras write them), painted 7 with the red corner."""

    def build(c):
        s = _video_stream(
            c, "mjpeg", 1, 320, 240, pix_fmt="yuvj420p", options={"q:v": "4", "flags": "+bitexact"}
        )
        _encode(c, s, [(0, paint(7, 320, 240, corner=True))])

    _write("still_320x240.jpg", "image2", build, {"update": "1", "fflags": "+bitexact"})


def wav_tone():
    """Half a second of a 440 Hz tone, 16 kHz mono 16-bit PCM: the rate Gemma 4's audio
    features take, so nothing is resampled."""

    def build(c):
        a = c.add_stream("pcm_s16le", rate=16000, layout="mono")
        t = np.arange(8000) / 16000
        samples = (0.5 * np.sin(2 * np.pi * 440 * t) * 32767).astype(np.int16)[None]
        frame = av.AudioFrame.from_ndarray(samples, format="s16", layout="mono")
        frame.sample_rate, frame.pts = 16000, 0
        c.mux(a.encode(frame))
        c.mux(a.encode(None))

    _write("tone_440hz_16khz.wav", "wav", build, {"fflags": "+bitexact"})


# -- footage as cameras and editors leave it: the frames vLLM's loader picks (issue 50) --------


def mpeg4_avi_23976():
    """A long AVI at 23.976 fps with B-frames (270 frames, painted i % 256): the rate's
    rounding moves a frame-index rule's picks by one where a time-based rule's do not."""

    def build(c):
        s = _video_stream(c, "mpeg4", Fraction(24000, 1001), 64, 48, options={"bf": "2", "qscale": "10"})
        _encode(c, s, [(i, paint(i % 256, 64, 48)) for i in range(270)])

    _write("ntsc_bframes_mpeg4.avi", "avi", build)


def h264_phone_jitter_mp4():
    """A phone-style MP4: 30 fps nominal, every frame's duration jittered by up to 2 ms
    (456 frames, painted i % 256, B-frames), so its average rate is not 30."""
    steps = [2970, 3000, 3000, 3030, 2940, 3060]  # in 1/90000 s

    def build(c):
        s = _video_stream(c, "libx264", 30, 64, 48, options={"crf": "30", "bf": "2"})
        s.codec_context.time_base = Fraction(1, 90000)
        pts, frames = 0, []
        for i in range(456):
            frames.append((pts, paint(i % 256, 64, 48)))
            pts += steps[(i * 7) % len(steps)]
        _encode(c, s, frames)

    _write("phone_jitter_h264.mp4", "mp4", build)


def h264_vfr_mp4():
    """A variable-rate MP4: 60 frames over about 15 s in bursts and pauses; its average rate
    (4 fps) is far from its nominal one, and its span from the count over that average."""
    steps = [1000, 100, 100, 200, 500]  # ms

    def build(c):
        s = _video_stream(c, "libx264", 10, 64, 48, options={"crf": "30"})
        s.codec_context.time_base = Fraction(1, 1000)
        pts, frames = 0, []
        for i in range(60):
            frames.append((pts, paint(i, 64, 48)))
            pts += steps[(i * 3) % len(steps)]
        _encode(c, s, frames)

    _write("vfr_bursts_h264.mp4", "mp4", build)


def h264_trimmed_last_frame_mp4():
    """An MP4 whose edit list hides its last frame: the header counts 20 samples, 19 play
    (OpenCV believes 20; its end-of-stream check forgives one). Made by shortening the one
    edit of a 20-frame, 10 fps clip by a frame's duration in the file's bytes."""

    def build(c):
        s = _video_stream(c, "libx264", 10, 64, 48, options={"crf": "30", "bf": "0", "g": "10"})
        _encode(c, s, _painted(20, 64, 48))

    path = _write("trimmed_last_frame_h264.mp4", "mp4", build, {"use_editlist": "1"})
    data = bytearray(path.read_bytes())
    mvhd = data.find(b"mvhd")
    offset = 24 if data[mvhd + 4] else 16  # the timescale's place in a version 1 or 0 mvhd
    (timescale,) = struct.unpack_from(">I", data, mvhd + offset)
    elst = data.find(b"elst")
    assert data[elst + 4] == 0 and struct.unpack_from(">I", data, elst + 8) == (1,), "one version 0 edit"
    (duration,) = struct.unpack_from(">I", data, elst + 12)
    struct.pack_into(">I", data, elst + 12, duration - timescale // 10)
    path.write_bytes(bytes(data))


def h264_vfr_end_seek_mp4():
    """A variable-rate MP4 whose frames come faster at the start: 30 frames 100 ms apart, then
    30 frames 400 ms apart (15 s, average 4 fps), a keyframe every 12. OpenCV numbers the frame
    its seek to the end lands on by its time, so it stands short of the 60 that play, and
    vLLM's cross-check counts fewer (issue 59's variable-rate MP4)."""

    def build(c):
        s = _video_stream(c, "libx264", 10, 64, 48, options={"crf": "30", "g": "12"})
        s.codec_context.time_base = Fraction(1, 1000)
        times = [100 * i for i in range(30)] + [3000 + 400 * i for i in range(30)]
        _encode(c, s, [(t, paint(i, 64, 48)) for i, t in enumerate(times)])

    _write("vfr_end_seek_h264.mp4", "mp4", build)


def main(names=()):
    """Every fixture, or the builders named (e.g. h264_vfr_mp4): the encoders are not
    bit-exact across FFmpeg builds, so a new fixture is made without remaking the others."""
    if names:
        for name in names:
            globals()[name]()
        return

    vp9_webm_224p_6()
    vp9_webm_start_offset()
    vp9_webm_audio_outlasts_video()
    h264_vfr_mkv()
    h264_bframes_mp4()
    hevc_mp4()
    av1_webm()
    vp8_webm()
    mpeg4_avi()
    mpeg4_avi_lying_header()
    mpeg4_avi_unknown_codec()
    for degrees in (90, 180, 270):
        h264_rotated_mp4(degrees)
    vp9_size_change_webm()
    h264_colour_mp4("bt709_720p_h264.mp4", 1280, 720, "ITU709", "MPEG")
    h264_colour_mp4("full_range_bt601_h264.mp4", 160, 96, "ITU601", "JPEG")
    h264_edit_list_mp4()
    vp9_live_webm()
    opus_audio_only_webm()
    jpeg_image()
    wav_tone()
    for name, rate, count in CFR_CLIPS:
        h264_cfr_mp4(name, rate, count)
    h264_ntsc_30s_mp4()
    h264_two_video_streams_mp4()
    mpeg4_avi_23976()
    h264_phone_jitter_mp4()
    h264_vfr_mp4()
    h264_trimmed_last_frame_mp4()
    h264_vfr_end_seek_mp4()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
