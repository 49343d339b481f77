"""Headless Chromium for the browser tests: Debian's package driven by Selenium through
Debian's chromedriver (what `.ci/run` installs).

`chromium()` is skipped, saying why, only where no browser is installed and CI is not
set; under CI=true a missing browser fails.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
WAIT = 20.0
"""Seconds a page may take to show what is waited for."""


def _browser() -> tuple[str, str] | None:
    browser = next((p for p in map(shutil.which, BROWSERS) if p), None)
    driver = shutil.which("chromedriver") or (
        "/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists() else None)
    return (browser, driver) if browser and driver else None


@contextmanager
def chromium(what: str, *, resolve: dict[str, str] | None = None) -> Iterator[WebDriver]:
    """A headless Chromium; `what` says what the skip leaves untested. `resolve` maps
    host names to addresses (a page of another site served on loopback)."""
    found = _browser()
    try:
        import selenium  # noqa: F401
    except ImportError:
        found = None
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true: no Chromium and chromedriver (apt-get install chromium "
                        "chromium-driver) or no selenium (the dev extra)")
        pytest.skip("no headless browser here: install chromium and chromium-driver "
                    f"(Debian) and selenium to run {what} in a browser")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, chromedriver = found
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--disable-gpu", "--window-size=1200,800"):
        options.add_argument(arg)
    if resolve:
        rules = ", ".join(f"MAP {name} {address}" for name, address in resolve.items())
        options.add_argument(f"--host-resolver-rules={rules}")
    d = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
    d.set_page_load_timeout(WAIT)
    try:
        yield d
    finally:
        d.quit()


def wait_for(d: WebDriver, css: str) -> None:
    """Wait until an element matching `css` is on the page."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(d, WAIT).until(ec.presence_of_element_located((By.CSS_SELECTOR, css)))


@contextmanager
def serve_page(html: str) -> Iterator[int]:
    """`html` served at / on 127.0.0.1 (a port of its own, returned): another site's page,
    once a host name is `resolve`d to loopback."""
    body = html.encode()

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(httpd.server_address[1])
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(WAIT)
