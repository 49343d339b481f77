"""The studio's eval pages in a real browser (headless Chromium, as the studio's other
browser tests): the reports listed, one report's cases with a click through to a case's
run, and two reports compared case by case."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from interpreters.cli.studio import Studio, StudioServer
from tests.browser import chromium, wait_for
from tests.test_studio_evals import shop, stricter, suite

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

pytestmark = pytest.mark.slow


@pytest.fixture
def driver() -> Iterator[WebDriver]:
    with chromium("the studio's eval pages") as d:
        yield d


def _texts(d: WebDriver, css: str) -> list[str]:
    from selenium.webdriver.common.by import By

    return [e.text for e in d.find_elements(By.CSS_SELECTOR, css)]


def test_an_eval_report_its_runs_and_a_comparison_in_the_browser(
    driver: WebDriver, tmp_path: Path,
) -> None:
    from selenium.webdriver.common.by import By

    suite(tmp_path).run(shop).write(tmp_path, name="before")
    suite(tmp_path).run(stricter).write(tmp_path, name="after")
    with StudioServer(Studio(tmp_path), port=0) as server:
        driver.get(server.url)
        driver.find_element(By.ID, "nav-evals").click()
        wait_for(driver, "#reports a.report-link")
        assert sorted(_texts(driver, "#reports a.report-link")) == ["after", "before"]

        # One report: its verdict, its scorers, its cases; a failing case's run a click away.
        driver.find_element(By.CSS_SELECTOR, "#reports a.report-link[href='#/evals/after']").click()
        wait_for(driver, "#cases tr.case")
        assert driver.find_element(By.ID, "verdict-line").text == "shop on shop-strict: FAILED"
        assert "below threshold" in driver.find_element(By.ID, "scorers").text
        assert "cases:2 of 3 passed" in driver.find_element(By.ID, "main").text
        unknown = driver.find_element(By.CSS_SELECTOR, "#cases tr.case[data-case='unknown']")
        assert "tripped" in unknown.text and "failed" in (unknown.get_attribute("class") or "")
        assert [c.text for c in unknown.find_elements(By.CSS_SELECTOR, ".verdict")] == [
            "fail", "fail"]
        unknown.find_element(By.CSS_SELECTOR, "a.case-run").click()
        wait_for(driver, "#timeline tr.row")
        assert "status:tripped" in driver.find_element(By.ID, "main").text.replace(" ", "")

        # Two reports: pick before and after, compare.
        driver.get(server.url + "#/evals")
        wait_for(driver, "#reports a.report-link")
        driver.find_element(By.CSS_SELECTOR, "input.pick-before[value='before']").click()
        driver.find_element(By.CSS_SELECTOR, "input.pick-after[value='after']").click()
        driver.find_element(By.ID, "compare").click()
        wait_for(driver, "#case-diff tr.case-change")
        assert driver.find_element(By.ID, "diff-counts").text == (
            "1 of 3 case(s) changed, 1 regressed")
        regressed = driver.find_elements(By.CSS_SELECTOR, "#case-diff tr.regressed")
        assert [r.get_attribute("data-case") for r in regressed] == ["unknown"]
        assert "pass → fail" in _texts(driver, "#case-diff tr.regressed td.verdict-changed")


def test_a_runs_online_scores_on_its_page(driver: WebDriver, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    from interpreters import Recorder
    from interpreters.evals import OnlineScorer, contains
    from interpreters.testing import ScriptedModel, Simulator
    from tests.test_studio_evals import shop_model

    recorder = Recorder(tmp_path)
    online = OnlineScorer([contains("shipped"), contains("refund", name="refunded")],
                          rate=1.0, recorder=recorder)
    Simulator(ScriptedModel(shop_model), observers=[recorder, online]).run(
        shop, "Where is order 1042?")
    assert online.flush(10)
    online.close()
    (journal,) = tmp_path.glob("*.ndjson")
    with StudioServer(Studio(tmp_path), port=0) as server:
        driver.get(f"{server.url}#/run/{journal.stem}")
        wait_for(driver, "#scores .score")
        scores = _texts(driver, "#scores .score")
        assert [s.split(":")[1].split()[0] for s in scores] == ["pass", "fail"]
        failed = driver.find_element(By.CSS_SELECTOR, "#scores .verdict-fail")
        assert "refunded" in failed.text
