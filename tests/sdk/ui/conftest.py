"""Fixtures of the page's tests (helpers in :mod:`uiutil`): a running ``ma-submit ui`` and a real browser."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Dict, Iterator

import pytest
from uiutil import CHROMEDRIVER, CHROMIUM, Ui, start_ui, stop_ui


@pytest.fixture
def ui_env(cli_env: Dict[str, str]) -> Dict[str, str]:
    """``ma-submit``'s environment for the page's tests."""
    return dict(cli_env)


@pytest.fixture
def ui(ui_env: Dict[str, str]) -> Iterator[Ui]:
    """A running ``ma-submit ui`` over the test's home."""
    running = start_ui(ui_env)
    try:
        yield running
    finally:
        if running.proc.poll() is None:
            stop_ui(running)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[object]:
    """Headless Chromium (Debian's) through Selenium and Debian's chromedriver."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    assert os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER), "run scripts/setup.sh: it installs chromium"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    arguments = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--window-size=1280,1600", f"--user-data-dir={tmp_path / 'chromium'}")
    for argument in arguments:
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER, log_output=subprocess.DEVNULL), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
