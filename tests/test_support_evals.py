"""The support assistant's eval suite (examples/support_evals.py) runs on the simulator:
as a whole, with its report, and a case per test through the pytest plugin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from examples.support_evals import agent, dataset, suite, unguarded
from interpreters.evals import Case, case_ids, check_case
from interpreters.testing import SimulatorFactory


def test_the_suite_passes_and_writes_its_report(tmp_path: Path) -> None:
    report = suite.run(agent, results=tmp_path / "results.sqlite")
    assert report.ok, report.table()
    assert len(report.cases) == 20
    assert {c.outcome.status for c in report.cases if c.outcome} == {
        "finished", "suspended", "tripped"}
    assert report.cost is not None and report.judge_cost is not None
    json_path, html_path = report.write(tmp_path, name="support")
    assert json.loads(json_path.read_text())["ok"] is True
    assert "refund-1042" in html_path.read_text()
    again = suite.run(agent, results=tmp_path / "results.sqlite")
    assert again.reused == 20 and again.ok  # nothing runs twice


def test_the_unguarded_change_fails_the_pii_cases() -> None:
    result = suite.compare(agent, unguarded)
    assert not result.ok
    assert sorted(c.case for c in result.regressions) == sorted(
        c.name for c in dataset.cases if "pii" in c.tags)


@pytest.mark.parametrize("case", dataset.cases, ids=case_ids)
def test_support_case(case: Case, simulator: SimulatorFactory) -> None:
    check_case(suite, agent, case, simulator)


def test_a_failing_case_says_which_scores_failed(simulator: SimulatorFactory) -> None:
    card = next(c for c in dataset.cases if c.name == "pii-card")
    with pytest.raises(AssertionError, match="excludes: fail") as e:
        check_case(suite, unguarded, card, simulator)
    assert "pii-redacted: fail" in str(e.value)
