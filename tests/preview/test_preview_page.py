"""The /preview page in a real browser: Debian's headless Chromium, driven by Playwright
(pointed at the system's executable: Playwright's own browser downloads are not used). One
page load: a fixture is uploaded and its frames checked from the DOM against an independent
decode, then a URL the SSRF rules refuse shows its reason on the page."""

from __future__ import annotations

import shutil

import pytest
from playwright.sync_api import expect, sync_playwright

from mmprep.api.preview.sheet import SheetLayout
from tests.support.media import MEDIA, on_screen, reference_decode, reference_targets
from tests.support.servers import LiveServer

pytestmark = pytest.mark.slow  # a real browser (Chromium through Playwright)

FIXTURE = MEDIA / "vfr_h264.mkv"  # 12 frames of 128x96 at irregular times, 2.84 s
FPS = 4
WAIT_MS = 60_000  # a bound for a slow CI machine, not a timing assertion


@pytest.fixture(scope="module")
def chromium() -> str:
    path = shutil.which("chromium")
    assert path, "the preview page is tested in Debian's Chromium: apt-get install chromium (.ci/run does)"
    return path


def test_the_page_shows_the_sampled_frames_and_readable_errors(chromium, media_server, tmp_path):
    ref = reference_decode(FIXTURE)
    positions = on_screen(ref, reference_targets(ref, 2.84, fps=FPS))
    with (
        LiveServer(enable_preview=True, allow_private_networks=False) as server,
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(f"{server.url}/preview")
            page.set_input_files("#file", FIXTURE)
            page.fill("#fps", str(FPS))
            page.click("#submit")
            expect(page.locator("#result")).to_be_visible(timeout=WAIT_MS)

            frames = page.locator("#frames li")
            expect(frames).to_have_count(len(positions))
            shown = [
                (int(li.get_attribute("data-index")), float(li.get_attribute("data-timestamp")))
                for li in frames.all()
            ]
            assert [index for index, _ in shown] == positions
            assert [t for _, t in shown] == pytest.approx(list(ref.times[positions]), abs=1e-6)
            assert frames.all_inner_texts() == [
                f"#{i} {ref.times[i]:.3f} s" for i in positions
            ]  # as rendered
            assert f"{len(positions)} frames of h264 128x96" in page.inner_text("#summary")
            sheet_size = page.eval_on_selector("#sheet", "img => [img.naturalWidth, img.naturalHeight]")
            assert tuple(sheet_size) == SheetLayout.of(len(positions), 128, 96, 4).size
            assert '"duration_source": "container"' in page.inner_text("#account")
            page.screenshot(path=tmp_path / "preview-page.png", full_page=True)  # the artifact

            page.set_input_files("#file", [])
            page.fill("#url", f"{media_server.url}/vp8.webm")  # loopback: refused by the SSRF rules
            page.click("#submit")
            error = page.locator("#error")
            expect(error).to_be_visible(timeout=WAIT_MS)
            assert "non-public address 127.0.0.1" in error.inner_text()
            assert "(media_forbidden, HTTP 400)" in error.inner_text()
            assert not error.inner_text().startswith("messages[0]")
            expect(page.locator("#result")).to_be_hidden()
            page.screenshot(path=tmp_path / "preview-page-error.png")
        finally:
            browser.close()
    assert (tmp_path / "preview-page.png").stat().st_size > 10_000
