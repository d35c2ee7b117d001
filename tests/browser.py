"""A headless Chromium for the tests that check a page in a real browser: the page is loaded once with a probe
that records, after the load event, each image's decoded size and place on the page, then shot whole.

scripts/bootstrap.sh installs Chromium (Debian's ``chromium``) with g++; where it is absent the browser tests fail
and say so, unless ``HETERO_DSE_NO_BROWSER=1`` opts out (they are skipped then, with that reason).
Each run has its own profile (two runs at once never hand a page to each other) and a deadline, after which its
whole process group is killed: a hung browser costs the test, never the suite.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
NO_BROWSER_ENV = "HETERO_DSE_NO_BROWSER"
WIDTH = 1200  # CSS pixels; the report's body is at most 1,100 wide
_FLAGS = ("--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars", "--force-device-scale-factor=1",
          "--no-first-run", "--disable-extensions")
# after the load event (every data-URI image decoded or failed): each image's state and box, and the page height
_PROBE = """<script>addEventListener("load", () => { document.body.dataset.probe = JSON.stringify({
  height: document.documentElement.scrollHeight,
  images: [...document.images].map(i => { const r = i.getBoundingClientRect();
    return {complete: i.complete, natural: [i.naturalWidth, i.naturalHeight],
            box: [r.left + scrollX, r.top + scrollY, r.width, r.height]}; })}); });</script>"""


@dataclass(frozen=True)
class PageImage:
    """One <img> of the page as the browser laid it out: its decoded size and its box (CSS pixels)."""

    complete: bool
    natural: tuple[int, int]
    box: tuple[float, float, float, float]  # left, top, width, height


def browser() -> str:
    """The headless browser's path; the test fails where none is installed, or is skipped where the user opted
    out."""
    if os.environ.get(NO_BROWSER_ENV):
        pytest.skip(f"{NO_BROWSER_ENV} is set: the page is checked by parsing it alone")
    found = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    if found is None:
        pytest.fail(f"no headless browser ({', '.join(BROWSERS)}): run scripts/bootstrap.sh, which installs "
                    f"Debian's chromium, or set {NO_BROWSER_ENV}=1 to skip this check")
    return found


def _run(binary: str, args: list[str], timeout_s: float) -> str:
    with tempfile.TemporaryDirectory(prefix="hetero_dse_chromium_") as profile:
        proc = subprocess.Popen([binary, *_FLAGS, f"--user-data-dir={profile}", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the renderer and GPU processes too, not the launcher alone
            proc.communicate()
            pytest.fail(f"{binary} did not finish in {timeout_s:.0f} s: {' '.join(args[-2:])}")
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # a helper it left behind (crash handler) would hold the profile
        except ProcessLookupError:
            pass
    assert proc.returncode == 0, f"{binary} failed ({proc.returncode}): {err[-2000:]}"
    return out


def load(binary: str, page: Path, timeout_s: float = 60) -> tuple[list[PageImage], int]:
    """The page's images as laid out after its load event, and its height (CSS pixels)."""
    probed = page.with_name(page.stem + ".probe.html")
    probed.write_text(page.read_text().replace("</body>", _PROBE + "</body>", 1))
    dom = _run(binary, [f"--window-size={WIDTH},2000", "--dump-dom", probed.as_uri()], timeout_s)
    found = re.search(r'data-probe="([^"]*)"', dom)
    assert found, "the page's load event never came (no probe in the DOM)"
    probe = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    images = [PageImage(i["complete"], tuple(i["natural"]), tuple(i["box"])) for i in probe["images"]]
    return images, int(probe["height"])


def screenshot(binary: str, page: Path, png: Path, height: int, timeout_s: float = 60) -> None:
    """A PNG of the whole page: a window as tall as the page."""
    _run(binary, [f"--window-size={WIDTH},{height}", f"--screenshot={png}", page.as_uri()], timeout_s)
    assert png.is_file(), f"no screenshot written to {png}"
