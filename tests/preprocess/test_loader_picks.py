"""The frames a video gets where the model's own rule applies (app/mmprep/preprocess/
loader_picks.py) against what vLLM 0.33's own Qwen-VL loaders take of every video fixture
(tests/data/vllm_real/loader_picks.json, recorded by scripts/vllm_loader_picks.py in vLLM's
venv): the same frame indices, transformers' metadata as the loader writes it (its count,
rate and duration), and the same RGB bytes frame for frame (OpenCV's decode and PyAV's).

What differs is on purpose and named here. The live check (slow) reruns vLLM's loaders and
holds the recording to them."""

from __future__ import annotations

import hashlib
import json
import subprocess

import httpx
import pytest

from mmprep import families
from mmprep.decoders import MediaError, decode_video, probe_video
from mmprep.preprocess.loader_picks import LoaderPicks
from tests.support.media import MEDIA
from tests.vllm_real.real_vllm import RENDER_VENV, REPO, missing_venv

RECORDED_FILE = REPO / "tests" / "data" / "vllm_real" / "loader_picks.json"
RECORDED = json.loads(RECORDED_FILE.read_text())
# each loader, a family vLLM gives it, and what the recording asked of it: the Qwen-VL ones
# 2 fps, the plain one nothing (its 32 frames)
LOADERS = {
    "qwen2_vl": ("qwen2_vl", families.FramesAsked(RECORDED["fps"], None, 768, RECORDED["fps"])),
    "qwen3_vl": ("qwen3_vl", families.FramesAsked(RECORDED["fps"], None, 768, RECORDED["fps"])),
    "opencv": ("internvl", families.FramesAsked(None, None, 768, RECORDED["fps"])),
}
CASES = [(name, loader) for name in sorted(RECORDED["files"]) for loader in LOADERS]
# The same frames by index and metadata, other pixels, on purpose
OTHER_PIXELS = {
    # OpenCV takes the file's first video stream (a 160x90 preview); mmprep FFmpeg's best
    # one (the 320x180 film), as torchcodec and FFmpeg's own tools do
    "two_video_streams_h264.mp4": "OpenCV decodes the preview stream, mmprep the film",
    # the frames after the size change: OpenCV's come at the new size into vLLM's array of
    # the first size; mmprep scales them back to the header's size
    "size_change_vp9.webm": "a mid-stream size change is scaled back to the header's size",
}


def mmprep_answer(name: str, loader: str) -> dict:
    """What mmprep takes of the file where the family's rule applies, in the loader's terms."""
    family, asked = LOADERS[loader]
    picks = LoaderPicks(families.get(family), asked, 768)
    video = decode_video(MEDIA / name, frame_picks=picks)
    metadata = picks.hf_metadata(video)
    return {
        "indices": video.indices.tolist(),
        "total_num_frames": metadata["total_num_frames"],
        "fps": metadata["fps"],
        "duration": metadata["duration"],
        "frames": [hashlib.sha256(frame.tobytes()).hexdigest()[:16] for frame in video.frames],
        **picks.account(video),
    }


@pytest.mark.parametrize(("name", "loader"), CASES, ids=[f"{name}-{loader}" for name, loader in CASES])
def test_a_video_gets_the_frames_vllms_loader_takes(name, loader):
    theirs = dict(RECORDED["files"][name][loader])
    if "error" in theirs:  # neither opens it (no video stream, an unknown codec)
        with pytest.raises(MediaError):
            mmprep_answer(name, loader)
        return
    ours = mmprep_answer(name, loader)
    if ours["picks"] == "presentation-time":
        pytest.skip("vLLM's loader cannot grab a frame it picks here: test_a_header_that_claims_a_frame_...")
    assert ours.pop("picks") == f"vllm:{loader}"
    if name in OTHER_PIXELS:
        assert ours.pop("frames") != theirs.pop("frames"), OTHER_PIXELS[name]  # still so: else drop the note
    assert ours == theirs


OPENCV = sorted(name for name, answer in RECORDED["opencv"].items() if "error" not in answer)


@pytest.mark.parametrize("name", OPENCV)
def test_the_count_and_rate_are_what_opencv_reports(name):
    """What vLLM's loader reads of the file through OpenCV: CAP_PROP_FRAME_COUNT, CAP_PROP_FPS,
    and CAP_PROP_POS_FRAMES after its seek to the end (its cross-check), which mmprep works
    out from the index alone (end_seek_frames); where OpenCV has no count, neither."""
    theirs = RECORDED["opencv"][name]
    ours = probe_video(MEDIA / name)
    claimed = max(theirs["frame_count"], 0)
    assert (ours.header_frames, ours.fps) == (claimed, theirs["fps"])
    assert ours.end_seek_frames == (theirs["end_seek_frames"] if claimed else 0)


def test_a_header_that_claims_a_frame_that_does_not_play_is_picked_by_presentation_time():
    """The MP4's edit list hides its 20th frame; OpenCV counts it (its end-of-stream check
    forgives one), so vLLM's Qwen3-VL loader picks index 19, fails to grab it and hands the
    model 3 frames, not the 4 its rule asks for. mmprep takes the rule's 4 over the 19 that
    play, and says so."""
    name = "trimmed_last_frame_h264.mp4"
    theirs = RECORDED["files"][name]["qwen3_vl"]
    assert (theirs["total_num_frames"], theirs["indices"]) == (20, [0, 6, 13])  # 19 was picked, not grabbed
    ours = mmprep_answer(name, "qwen3_vl")
    assert ours["indices"] == [0, 6, 12, 18]  # linspace(0, 18, 4), rounded
    assert (ours["total_num_frames"], ours["duration"]) == (19, 1.9)  # what plays
    assert ours["picks"] == "presentation-time"
    assert "counts 20 frames (the header's count) but 19 play" in ours["picks_reason"]
    assert ours["frames"][:2] == theirs["frames"][:2]  # the frames both take are the same
    # Qwen2-VL's loader picks [0, 5, 10, 15] of the 20: each plays, so mmprep takes them
    assert mmprep_answer(name, "qwen2_vl")["picks"] == "vllm:qwen2_vl"


def test_more_frames_than_the_server_allows_are_a_400_naming_the_limit():
    from mmprep.core.errors import ServiceError

    picks = LoaderPicks(families.get("qwen2_vl"), families.FramesAsked(2.0, None, 768, 2.0), limit=4)
    with pytest.raises(ServiceError, match="--max-frames 4") as refused:
        decode_video(MEDIA / "phone_jitter_h264.mp4", fps=2, frame_picks=picks)
    assert refused.value.code == "too_many_frames"


@pytest.mark.slow
def test_the_recording_is_what_vllms_loaders_take_now():
    """scripts/vllm_loader_picks.py, run live in vLLM's venv, answers what the file holds."""
    if reason := missing_venv(RENDER_VENV):
        pytest.skip(reason)
    live = subprocess.run(
        [RENDER_VENV / "bin" / "python", REPO / "scripts" / "vllm_loader_picks.py"],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    assert json.loads(live.stdout) == RECORDED


@pytest.fixture(scope="module")
def qwen2_server(tmp_path_factory):
    """`mmprep serve --model` a Qwen2-VL folder, on the echo engine, with the defaults."""
    from mmprep.core.config import Settings
    from tests.support.model_folder import make_model_folder
    from tests.support.servers import LiveServer

    folder = make_model_folder("qwen2_vl", tmp_path_factory.mktemp("qwen2_vl") / "Qwen2-VL-2B-Instruct")
    with LiveServer(Settings(model=folder)) as live:
        yield live


def test_no_default_shrinks_what_the_model_gets(qwen2_server, tmp_path):
    """A 20 s, 10 fps clip that asks nothing gets vLLM's 40 frames (2 a second), not
    --default-max-frames' 32; a 2100x1200 photo reaches the processor whole, not scaled to
    --max-pixels' 1920x1080 first: Qwen2-VL's grid of it is vLLM's 86 x 150 (3225 tokens)."""
    import base64
    import io

    from PIL import Image

    from tests.data.media.make_fixtures import write_painted_clip
    from tests.support.chat import chat, data_url, image, openai_client, video

    clip = write_painted_clip(tmp_path / "clip.mp4", "mp4", "libx264", 10, 200, 64, 48)
    photo = io.BytesIO()
    Image.effect_noise((2100, 1200), 40).convert("RGB").save(photo, "JPEG")
    photo_url = "data:image/jpeg;base64," + base64.b64encode(photo.getvalue()).decode()
    body = chat(video(data_url(clip, "video/mp4")), image(photo_url), model="Qwen2-VL-2B-Instruct")
    answer = openai_client(qwen2_server).chat.completions.create(**body)
    clip_item, photo_item = json.loads(answer.choices[0].message.content)["media"]
    assert len(clip_item["indices"]) == 40
    assert clip_item["metadata"]["picks"] == "vllm:qwen2_vl"
    assert photo_item["shape"] == [1200, 2100, 3]
    assert photo_item["processed"]["tensors"]["pixel_values"]["shape"][0] == 86 * 150
    assert photo_item["processed"]["num_tokens"] == 3225


def test_a_video_past_the_models_context_is_refused_before_it_is_decoded(tmp_path):
    """vLLM decodes a whole video before it finds the prompt too long (a 2-minute 1080p clip
    at 2 fps: 30 CPU-s for a 400); mmprep counts the tokens of the frames it plans and
    refuses at once, with vLLM's code, naming the video and the model's context."""
    from mmprep.core.config import Settings
    from tests.support.chat import chat, data_url, video
    from tests.support.model_folder import make_model_folder
    from tests.support.servers import LiveServer

    folder = make_model_folder("qwen2_vl", tmp_path / "Qwen2-VL-2B-Instruct")
    clip = data_url(MEDIA / "224p_6_vp9.webm", "video/webm")
    with LiveServer(Settings(model=folder, max_model_len=100)) as live:
        body = chat(video(clip, fps=2), model="Qwen2-VL-2B-Instruct")
        answer = httpx.post(f"{live.url}/v1/chat/completions", json=body, timeout=60)
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert error["code"] == "context_length_exceeded"
        assert "this video alone comes to" in error["message"] and "(100)" in error["message"]
        assert error["param"] == "messages[0].content[0].video_url"
        metrics = httpx.get(f"{live.url}/metrics").text
        assert 'mmprep_frames_decoded_total{kind="video"}' not in metrics  # not a frame decoded


REAL_FILES = ("real_packed_bframes_mpeg4.avi", "real_damaged_idr_h264.mp4")


@pytest.mark.parametrize("name", REAL_FILES)
def test_a_real_file_whose_timestamps_disagree_with_the_decoder_gets_the_grab_loops_frames(name):
    """Cut from real files (tests/data/media/REAL_FILES.md): packed B-frames in a DivX-style
    AVI, and an H.264 MP4 with a damaged IDR whose timestamps follow decode order. The
    decoder hands out frames in an order their timestamps do not, so the i-th frame by
    timestamp is not the i-th OpenCV grabs: mmprep counts as the grab loop does, and gets
    vLLM's frames, pixel for pixel (the parametrized test above checks each loader)."""
    for loader in LOADERS:
        theirs = RECORDED["files"][name][loader]
        ours = mmprep_answer(name, loader)
        assert ours["picks"] == f"vllm:{loader}"
        assert (ours["indices"], ours["frames"]) == (theirs["indices"], theirs["frames"])
    # what makes the file hard: the frames' own timestamps are out of order
    times = decode_video(MEDIA / name, frame_picks=lambda metadata: list(range(40))).timestamps
    assert list(times) != sorted(times), "the decoder's order agrees with the timestamps: not a hard case"


def test_a_real_file_with_dropped_frames_is_picked_by_presentation_time_and_says_why():
    """Cinepak from a real AVI with dropped frames: 30 frames play over a 185-frame timeline.
    OpenCV's seek to the end lands on 165, so vLLM's loaders count 165 frames, pick past the
    30 that play and hand the model fewer than their rule asks; mmprep picks over the 30."""
    name = "real_dropped_frames_cinepak.avi"
    for loader in LOADERS:
        theirs = RECORDED["files"][name][loader]
        assert theirs["total_num_frames"] == 165 and max(theirs["indices"]) <= 29
        ours = mmprep_answer(name, loader)
        assert ours["picks"] == "presentation-time"
        assert "counts 165 frames (where OpenCV's seek to the end lands) but 30 play" in ours["picks_reason"]
        assert ours["frames"][0] == theirs["frames"][0]
