"""Headless Chromium for tests: open a local page, check its images, screenshot it."""
from __future__ import annotations

import tempfile
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1300,2400", "--hide-scrollbars")


def _driver(profile: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        raise RuntimeError("chromium / chromedriver missing: run bash common/setup/install.sh")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        opts.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


def screenshot_page(index: Path, shot: Path) -> list:
    """Open index.html, return [src, complete, naturalWidth] per <img>, save a full-page screenshot."""
    with tempfile.TemporaryDirectory(prefix="chrome-profile-") as profile:
        driver = _driver(profile)
        try:
            driver.get(index.resolve().as_uri())
            states = driver.execute_script(
                "return Array.from(document.images).map(i => [i.getAttribute('src'), i.complete, i.naturalWidth]);")
            height = driver.execute_script("return document.documentElement.scrollHeight")
            driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
                "width": 1300, "height": min(max(height, 800), 10000), "deviceScaleFactor": 1, "mobile": False})
            driver.save_screenshot(str(shot))
        finally:
            driver.quit()
    return states


def image_stats(png: Path) -> tuple[int, float]:
    """(distinct colours, share of non-white pixels) of a screenshot."""
    import matplotlib.image as mpimg
    import numpy as np

    px = (mpimg.imread(str(png))[..., :3] * 255).astype("uint8").reshape(-1, 3)
    colours = len(np.unique(px[:: max(1, len(px) // 200000)], axis=0))
    non_white = float((px.min(axis=1) < 235).mean())
    return colours, non_white


def run_script(index: Path, script: str, shot: Path | None = None):
    """Open a local page, return what ``script`` (a function body ending in return) gives;
    with ``shot``, save a full-page screenshot first."""
    with tempfile.TemporaryDirectory(prefix="chrome-profile-") as profile:
        driver = _driver(profile)
        try:
            driver.get(index.resolve().as_uri())
            if shot is not None:
                height = driver.execute_script("return document.documentElement.scrollHeight")
                driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
                    "width": 1300, "height": min(max(height, 800), 16000), "deviceScaleFactor": 1, "mobile": False})
                driver.save_screenshot(str(shot))
            return driver.execute_script(script)
        finally:
            driver.quit()
