"""`mmprep preview` and the /preview page: the frames the service samples, drawn as a
contact sheet. Each tile is read back by the index the fixture painted into its frame, so
the sheet is checked against an independent decode, not against itself."""

from __future__ import annotations

import base64
import io
import json
import shutil

import httpx
import numpy as np
import pytest
from PIL import Image

from mmprep.api.preview.sheet import SheetLayout
from mmprep.cli import main
from tests.support.chat import chat, data_url, post, video
from tests.support.media import MEDIA, on_screen, painted, reference_decode, reference_targets
from tests.support.servers import LiveServer

HEADER_LINES = 4  # the title, the metadata, the sampling asked, what the engine gets and the times


def tiles(sheet: Image.Image, count: int, width: int, height: int) -> list[np.ndarray]:
    """The sheet's tiles, where the layout puts them; and the sheet is the layout's size."""
    layout = SheetLayout.of(count, width, height, HEADER_LINES)
    assert sheet.size == layout.size
    return [np.asarray(sheet.convert("RGB").crop(layout.tile_box(i))) for i in range(count)]


def test_the_sheet_shows_the_frames_fps_sampling_picks(tmp_path, capsys):
    source = MEDIA / "cfr_25fps_h264.mp4"  # 80 frames of 64x48 at 25 fps
    output = tmp_path / "sheet.png"
    assert main(["preview", str(source), "--fps", "3", "-o", str(output)]) == 0
    ref = reference_decode(source)
    expected = [ref.indices[i] for i in on_screen(ref, reference_targets(ref, 3.2, fps=3))]
    assert len(expected) == 9  # two rows of tiles
    sheet = Image.open(output)
    assert sheet.format == "PNG"
    shown = painted(tiles(sheet, 9, 64, 48))
    assert shown == expected  # each tile is the frame sampled for it, in order: where frames differ, tiles do
    assert len(set(shown)) == 9
    assert f"{output}: 9 frames of cfr_25fps_h264.mp4" in capsys.readouterr().out


def test_large_frames_are_scaled_down_to_a_tile(tmp_path):
    source = MEDIA / "bt709_720p_h264.mp4"  # 3 frames of 1280x720: red, green, blue
    output = tmp_path / "sheet.png"
    assert main(["preview", str(source), "--num-frames", "3", "-o", str(output)]) == 0
    red, green, blue = (tile.reshape(-1, 3).mean(axis=0) for tile in tiles(Image.open(output), 3, 1280, 720))
    assert SheetLayout.of(3, 1280, 720, HEADER_LINES).tile_width == 256
    assert red.argmax() == 0 and green.argmax() == 1 and blue.argmax() == 2


def test_a_folder_gets_one_sheet_per_video_and_a_refused_one_is_named(tmp_path, capsys):
    folder = tmp_path / "videos"
    folder.mkdir()
    for name in ("224p_6_vp9.webm", "lying_header_mpeg4.avi", "audio_only_opus.webm", "make_fixtures.py"):
        shutil.copy(MEDIA / name, folder / name)
    assert main(["preview", str(folder), "--num-frames", "3", "-o", str(tmp_path / "sheets")]) == 1
    assert sorted(p.name for p in (tmp_path / "sheets").iterdir()) == [
        "224p_6_vp9.webm.png",
        "lying_header_mpeg4.avi.png",
    ]
    shown = painted(tiles(Image.open(tmp_path / "sheets" / "224p_6_vp9.webm.png"), 3, 224, 224))
    assert shown == [0, 2, 5]
    err = capsys.readouterr().err
    assert "audio_only_opus.webm: the input has no video stream" in err and "(no_video_stream)" in err
    assert "make_fixtures.py" not in err  # not a video file: not tried
    assert "2 of 3 drawn; not drawn: audio_only_opus.webm (no_video_stream)" in err


def test_a_url_is_fetched_under_the_service_rules(tmp_path, capsys, media_server, monkeypatch):
    url = f"{media_server.url}/224p_6_vp9.webm"
    output = tmp_path / "sheet.png"
    assert main(["preview", url, "-o", str(output)]) == 1  # loopback: refused, as for a chat request
    assert "(media_forbidden)" in capsys.readouterr().err
    assert not output.exists()
    # the flag the refusal names is preview's too
    assert main(["preview", url, "--max-frames", "4", "--allow-private-networks", "-o", str(output)]) == 0
    # the server's default (2 fps) capped at the part's max_frames, spread over the video
    assert painted(tiles(Image.open(output), 4, 224, 224)) == [0, 1, 3, 4]
    output.unlink()
    monkeypatch.setenv("MMPREP_ALLOW_PRIVATE_NETWORKS", "true")  # or the service's variable
    assert main(["preview", url, "--max-frames", "4", "-o", str(output)]) == 0
    assert main(["preview", url, "--allowed-media-domains", "example.com", "-o", str(output)]) == 1
    assert "(media_forbidden)" in capsys.readouterr().err


def test_help_says_what_the_exit_status_means(capsys):
    assert main(["preview", "--help"]) == 0
    words = " ".join(capsys.readouterr().out.split())
    assert "Exit status: 0 when every sheet was drawn; 1 when some videos could not be (each named" in words


@pytest.mark.parametrize(
    "args, status, says",
    [
        (["--fps", "1", "--num-frames", "3"], 2, "give --fps or --num-frames, not both"),  # the flags
        (["--num-frames", "0"], 1, "(invalid_sampling)"),  # the service, as for a chat request
    ],
)
def test_bad_sampling_is_refused_with_a_reason(tmp_path, capsys, args, status, says):
    assert main(["preview", str(MEDIA / "vp8.webm"), *args, "-o", str(tmp_path / "s.png")]) == status
    assert says in capsys.readouterr().err
    assert not (tmp_path / "s.png").exists()


def test_with_a_processor_the_tiles_are_at_its_size_and_its_tokens_are_said(tmp_path):
    from mmprep.processors import load_processor

    source = MEDIA / "cfr_25fps_h264.mp4"  # 64x48: the processor scales it up to its smallest grid
    output = tmp_path / "sheet.png"
    assert (
        main(["preview", str(source), "--num-frames", "4", "--processor", "qwen2_vl", "-o", str(output)]) == 0
    )
    processor = load_processor("qwen2_vl")
    height, width = processor.video_size(4, 48, 64)
    tokens = processor.video_tokens(4, 48, 64)
    assert (width, height) != (64, 48)
    sheet = Image.open(output)
    layout = SheetLayout.of(4, width, height, HEADER_LINES + 1)  # one more line: the processor's tokens
    assert sheet.size == layout.size and tokens > 0
    shown = painted([np.asarray(sheet.convert("RGB").crop(layout.tile_box(i))) for i in range(4)])
    ref = reference_decode(source)
    assert shown == [ref.indices[i] for i in on_screen(ref, reference_targets(ref, 3.2, num_frames=4))]


def test_a_processor_that_does_not_load_is_named(tmp_path, capsys):
    assert (
        main(["preview", str(MEDIA / "vp8.webm"), "--processor", "nope", "-o", str(tmp_path / "s.png")]) == 2
    )
    assert "processor: 'nope' is neither a processor family" in capsys.readouterr().err


def test_a_missing_source_is_refused(tmp_path, capsys):
    assert main(["preview", str(tmp_path / "nothing.mp4")]) == 2
    assert "is neither a file, a folder nor a URL" in capsys.readouterr().err


# -- the page's endpoints, over HTTP ------------------------------------------------------------


def test_the_page_is_off_unless_enabled():
    with LiveServer() as server:
        for response in (
            httpx.get(f"{server.url}/preview"),
            httpx.post(f"{server.url}/preview", json={"url": "x"}),
        ):
            assert response.status_code == 404
            assert response.json()["error"]["code"] == "preview_disabled"
            assert "--enable-preview" in response.json()["error"]["message"]


def test_the_preview_reports_what_a_chat_request_gets(media_server):
    """The account beside the sheet is the echo engine's answer to the equivalent chat request."""
    url = f"{media_server.url}/vfr_h264.mkv"
    with LiveServer(enable_preview=True) as server:
        reply = httpx.post(f"{server.url}/preview", json={"url": url, "sampling": {"fps": 4}}, timeout=60)
        assert reply.status_code == 200, reply.text
        chat_reply = post(server, chat(video(url, fps=4))).json()
    account = reply.json()["account"]
    assert account["media"] == json.loads(chat_reply["choices"][0]["message"]["content"])["media"]
    sheet = Image.open(io.BytesIO(_png(reply.json()["sheet"])))
    count = len(account["media"][0]["timestamps"])
    assert painted(tiles(sheet, count, 128, 96)) == account["media"][0]["indices"]


def test_the_preview_refuses_as_a_chat_request_would(media_server):
    with LiveServer(enable_preview=True, allow_private_networks=False, max_request_bytes=4096) as server:
        refusals = {
            "media_forbidden": {"url": f"{media_server.url}/vp8.webm"},
            "invalid_sampling": {"url": "https://example.com/v.mp4", "sampling": {"num_frames": 3, "fps": 1}},
            "invalid_request": {"sampling": {"fps": 1}},
            "request_too_large": {"url": data_url(MEDIA / "audio_outlasts_video_vp9.webm", "video/webm")},
        }
        for code, form in refusals.items():
            response = httpx.post(f"{server.url}/preview", json=form, timeout=60)
            assert response.status_code == (413 if code == "request_too_large" else 400), response.text
            assert response.json()["error"]["code"] == code


def _png(url: str) -> bytes:
    assert url.startswith("data:image/png;base64,")
    return base64.b64decode(url.split(",", 1)[1])
