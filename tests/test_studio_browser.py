"""The studio in a real browser: headless Chromium (Debian's package) driven by Selenium
through Debian's chromedriver, clicking through a run recorded on the simulator.

Skipped, saying why, only where no browser is installed and CI is not set; under
CI=true a missing browser fails (`.ci/run` installs it). With PIPELINE_STUDIO_SCREENSHOT
set to a path, the run's page is saved there as PNG (the docs' picture).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from interpreters.cli.studio import Studio, StudioServer
from tests.browser import chromium, wait_for
from tests.studio_runs import louder_agent, record_support_run

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

pytestmark = pytest.mark.slow


@pytest.fixture
def driver() -> Iterator[WebDriver]:
    with chromium("the studio") as d:
        yield d


def _kinds(d: WebDriver) -> set[str] | None:
    found = d.execute_script(
        "return [...document.querySelectorAll('#timeline .kind')].map(e => e.textContent)")
    return {str(k) for k in found} if isinstance(found, list) and found else None


def test_a_recorded_run_and_its_replay_in_the_browser(driver: WebDriver, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    journals = tmp_path / "journals"
    journals.mkdir()
    name = record_support_run(journals)
    with StudioServer(Studio(journals, louder_agent()), port=0) as server:
        driver.get(server.url)
        wait_for(driver, "#runs a.run-link")
        link = driver.find_element(By.CSS_SELECTOR, "#runs a.run-link")
        assert link.text == name
        link.click()

        wait_for(driver, "#timeline tr.row")
        page = driver.find_element(By.ID, "main").text
        assert "status:finished" in page.replace(" ", "")
        assert "call openai/gpt-4o-mini (step 1, attempt 0, 4 messages)" in page  # the retry
        assert "redact-card.process_output_stream: Replace (TextDelta)" in page
        assert ("no-short-answers.process_output_step: Abort "
                "(retry: Too short, please elaborate.)") in page
        assert "run tools order_status" in page
        hidden = driver.find_element(By.ID, "timeline").get_attribute("textContent") or ""
        assert "shipped <b>today</b>" in hidden  # the tool result, in its (closed) details
        # The model's markup is shown as text, never run or rendered.
        assert '<script>document.title="pwned"</script>' in page
        assert "<img src=x onerror=" in page
        assert driver.title == "pipeline studio"
        assert not driver.find_elements(By.CSS_SELECTOR, "#main img, #main script, #timeline b")
        shot = os.environ.get("PIPELINE_STUDIO_SCREENSHOT")
        if shot:
            driver.set_window_size(1100, 700)
            driver.save_screenshot(shot)

        # Only the processors' decisions.
        box = driver.find_element(By.CSS_SELECTOR, ".filters input[value='model']")
        box.click()
        # The page is built anew: once the table says it is filtered, read it in one script.
        wait_for(driver, "#timeline:not([data-kinds='all'])")
        kinds = _kinds(driver)
        assert kinds is not None and "model" not in kinds and "effect" in kinds

        driver.find_element(By.CSS_SELECTOR, "a.replay-link").click()
        wait_for(driver, "#verdict")
        verdict = driver.find_element(By.ID, "verdict").text
        assert verdict.startswith("Diverges at command #")
        assert 'recorded "Let me check.", replay "LET ME CHECK."' in verdict
        assert "SHIPPED TODAY" in driver.find_element(By.ID, "replay-text").text
        changes = driver.find_element(By.ID, "changes").text
        assert "shout process_output_stream Replace" in changes
        assert driver.find_elements(By.CSS_SELECTOR, "#diff tr.diverges")
        assert driver.title == "pipeline studio"


def test_a_page_under_another_host_name_cannot_read_the_studio(tmp_path: Path) -> None:
    """DNS rebinding: a site's name made to resolve to 127.0.0.1 gives its page the
    studio's address under the site's origin; what the page fetches there is refused."""
    journals = tmp_path / "journals"
    journals.mkdir()
    name = record_support_run(journals)
    with StudioServer(Studio(journals), port=0) as server, chromium(
            "the studio's host check", resolve={"rebind.test": "127.0.0.1"}) as d:
        port = server.httpd.server_address[1]
        d.get(f"http://rebind.test:{port}/")
        assert d.execute_script("return location.origin") == f"http://rebind.test:{port}"
        got = d.execute_script(
            "return fetch('/api/runs').then(async r => [r.status, await r.text()])")
        assert isinstance(got, list)
        status, body = got
        assert status == 421 and name not in body and "--allow-host" in body
        assert not d.find_elements("css selector", "#runs a.run-link")

        d.get(f"http://localhost:{port}/")  # the studio's own names still work
        wait_for(d, "#runs a.run-link")
        got = d.execute_script(
            "return fetch('/api/runs').then(async r => [r.status, await r.text()])")
        assert isinstance(got, list) and got[0] == 200 and name in got[1]
