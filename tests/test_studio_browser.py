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

from interpreters.cli.playground import Playground
from interpreters.cli.studio import Studio, StudioServer
from tests.browser import WAIT, chromium, wait_for
from tests.studio_runs import louder_agent, record_runs, record_support_run

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


def _texts(d: WebDriver, css: str) -> list[str]:
    found = d.execute_script(
        f"return [...document.querySelectorAll({css!r})].map(e => e.textContent)")
    return [str(t) for t in found] if isinstance(found, list) else []


def test_the_runs_list_its_filters_and_a_resumed_runs_first_part(
    driver: WebDriver, tmp_path: Path,
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    names = record_runs(tmp_path)
    with StudioServer(Studio(tmp_path), port=0) as server:
        driver.get(server.url)
        wait_for(driver, "#runs a.run-link")
        assert sorted(_texts(driver, "#runs a.run-link")) == sorted(names.values())
        table = driver.find_element(By.ID, "runs").text
        for shown_text in ("finished", "tripped", "suspended", "alice", "bob", "carol", "t-2",
                           "no-refund-all", "redact-card", "0.75"):
            assert shown_text in table, shown_text

        Select(driver.find_element(By.ID, "filter-status")).select_by_value("tripped")
        driver.find_element(By.ID, "apply-filters").click()
        wait_for(driver, "#runs[data-filter='status=tripped']")
        assert _texts(driver, "#runs a.run-link") == [names["tripped"]]

        driver.find_element(By.ID, "clear-filters").click()
        wait_for(driver, "#runs[data-filter='none']")
        driver.find_element(By.ID, "filter-user").send_keys("carol")
        Select(driver.find_element(By.ID, "filter-guard")).select_by_value("tool:refund")
        driver.find_element(By.ID, "apply-filters").click()
        wait_for(driver, "#runs[data-filter='guard=tool%3Arefund&user=carol']")
        assert _texts(driver, "#runs a.run-link") == [names["suspended"]]

        driver.find_element(By.ID, "clear-filters").click()
        wait_for(driver, "#runs[data-filter='none'] a.first-part")
        driver.find_element(By.CSS_SELECTOR, "#runs a.first-part").click()  # resumed from
        wait_for(driver, "#continued-in a.next-part")
        assert driver.find_element(By.TAG_NAME, "h1").text == f"Run {names['suspended']}"
        driver.find_element(By.CSS_SELECTOR, "#continued-in a.next-part").click()
        wait_for(driver, "#decisions")
        assert "decided by carol" in driver.find_element(By.ID, "decisions").text
        assert "approve refund" in driver.find_element(By.ID, "decisions").text
        assert driver.find_element(By.CSS_SELECTOR, "#resumed-from a").text == names["suspended"]


def test_the_run_view_highlights_what_changed_the_run_and_folds_the_rest(
    driver: WebDriver, tmp_path: Path,
) -> None:
    from selenium.webdriver.common.by import By

    names = record_runs(tmp_path)
    with StudioServer(Studio(tmp_path), port=0) as server:
        driver.get(f"{server.url}#/run/{names['support']}")
        wait_for(driver, "#highlights li")
        listed = driver.find_element(By.ID, "highlights").text
        assert "RETRY" in listed.upper() and "no-short-answers.process_output_step" in listed
        assert "redact-card.process_output_stream: Replace" in listed
        marked = driver.find_elements(By.CSS_SELECTOR, "#timeline tr.highlight")
        assert marked and all(r.is_displayed() for r in marked)
        folded = driver.find_elements(By.CSS_SELECTOR, "#timeline tr.folded-row")
        assert folded and not any(r.is_displayed() for r in folded)
        toggle = driver.find_element(By.CSS_SELECTOR, "#timeline button.unfold")
        assert "pass-through decision(s)" in toggle.text
        toggle.click()
        group = driver.find_elements(By.CSS_SELECTOR, "#timeline tr.folded-row")
        assert any(r.is_displayed() for r in group)


def test_a_playground_chat_with_an_approval(driver: WebDriver, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    from examples.asgi_stream import demo_agent, demo_model, refunds

    studio = Studio(tmp_path, demo_agent())
    studio.playground = Playground(demo_agent(), model=demo_model(), directory=tmp_path)
    studio.approvals = studio.playground.approvals.store
    with StudioServer(studio, port=0) as server:
        driver.get(server.url)
        wait_for(driver, "#nav-play")
        driver.find_element(By.ID, "nav-play").click()
        wait_for(driver, "#prompt")
        assert driver.find_element(By.TAG_NAME, "h1").text == "Chat with agent"
        driver.find_element(By.ID, "prompt").send_keys("refund 250 on order K7")
        driver.find_element(By.ID, "send").click()

        wait_for(driver, ".approval button.approve")
        log = driver.find_element(By.ID, "chat-log").text
        assert "refund 250 on order K7" in log and "Let me see." in log
        assert "Waiting for your decision: refund" in log
        effects = driver.find_element(By.ID, "effects").text
        assert "tool:refund.needs_approval: AskApproval" in effects
        assert ("K7", 250) not in refunds

        driver.find_element(By.CSS_SELECTOR, ".approval button.approve").click()
        WebDriverWait(driver, WAIT).until(ec.text_to_be_present_in_element(
            (By.ID, "chat-log"), "Done."))
        log = driver.find_element(By.ID, "chat-log").text
        assert "approved" in log and "→ refunded 250 on K7" in log
        assert ("K7", 250) in refunds
        assert "run finished" in log

        # The chat's runs were recorded: the journal link opens the resumed part.
        driver.find_elements(By.CSS_SELECTOR, "#chat-log a.journal-link")[-1].click()
        wait_for(driver, "#decisions")
        assert "decided by studio" in driver.find_element(By.ID, "decisions").text

        # The Approvals page: the wait and the decision, who made it.
        driver.find_element(By.ID, "nav-approvals").click()
        wait_for(driver, "#audit tr.audit")
        rows = [r.text for r in driver.find_elements(By.CSS_SELECTOR, "#audit tr.audit")]
        assert len(rows) == 2 and "waiting" in rows[0]
        assert "approved" in rows[1] and "studio" in rows[1] and "refund" in rows[1]


def test_the_run_view_shows_a_tree_of_runs_nested(driver: WebDriver, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    from tests.studio_runs import record_tree_run

    name = record_tree_run(tmp_path)
    with StudioServer(Studio(tmp_path), port=0) as server:
        driver.get(f"{server.url}#/run/{name}")
        wait_for(driver, "#run-tree li")
        nested = driver.execute_script(
            "const names = li => li.querySelector(':scope > .run-node .agent').textContent;"
            "const walk = li => [names(li), [...li.querySelectorAll(':scope > ul > li')]"
            ".map(walk)];"
            "return walk(document.querySelector('#run-tree > ul > li'));")
        assert nested == ["lead", [["research", [["source", []]]], ["writer", []]]]
        # a child run's rows in the timeline are set in by their depth, named by agent
        depths = driver.execute_script(
            "return [...document.querySelectorAll('#timeline tr.child-row')]"
            ".map(r => [r.dataset.agent, Number(r.dataset.depth)]);")
        assert isinstance(depths, list)
        assert {tuple(d) for d in depths} == {("research", 1), ("source", 2), ("writer", 1)}
        driver.find_element(By.CSS_SELECTOR, "#run-tree a.run-node-link[data-agent='source']")
