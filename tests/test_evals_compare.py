"""Production runs become regression cases: a dataset built from a folder of journals,
replayed against a changed agent (no model called), reports the cases that diverge and
where; and `pipeline eval` runs suites and comparisons for CI."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import msgspec
import pytest

from effects import Continue
from examples.support_evals import Shop, agent, dataset, support_model, unguarded
from interpreters import Recorder
from interpreters.cli.commands import main
from interpreters.cli.evals import run_eval
from interpreters.evals import (
    Case,
    Dataset,
    DatasetError,
    SimulatorTarget,
    compare_agents,
    dataset_from_journals,
    excludes,
    status_is,
)
from interpreters.record.journal import Journal
from interpreters.testing import ScriptedModel, Simulator
from pipeline import OutputStepArgs, OutputStepResult, abort, processor

CARD = "4111 1111 1111 1111"


def _record(folder: Path, cases: tuple[Case, ...], tags: dict[str, list[str]]) -> None:
    """Each case run once by the support assistant, recorded as in production."""
    # As the run saw it: the support assistant's PII guard changes the card it answers
    # with, and a journal stored as the guard let it out would replay on that.
    sim = Simulator(ScriptedModel(support_model), observers=[Recorder(folder, pii="keep")])
    for case in cases:  # run1, run2...: the stand-in model answers every request
        assert isinstance(case.input, str)
        sim.run(agent, case.input, deps=Shop(), values={"tags": tags.get(case.name, [])})


@pytest.fixture
def journals(tmp_path: Path) -> Path:
    folder = tmp_path / "journals"
    _record(folder, dataset.cases, {c.name: list(c.tags) for c in dataset.cases})
    return folder


def test_a_dataset_is_built_from_a_folder_of_journals(journals: Path) -> None:
    ds = dataset_from_journals(journals)
    assert len(ds) == 20
    assert all(c.journal is not None and Path(c.journal).is_file() for c in ds.cases)
    first = ds.cases[0]
    assert first.metadata is not None and first.metadata["agent"] == "support"
    assert first.input[0].text == "Where is my order 1042?"  # type: ignore[union-attr]
    assert len(dataset_from_journals(journals, status="suspended")) == 4
    assert len(dataset_from_journals(journals, status=("tripped", "suspended"))) == 6
    assert len(dataset_from_journals(journals, tags=["pii"])) == 4
    assert len(dataset_from_journals(journals, agent="someone-else")) == 0
    assert len(dataset_from_journals(journals, limit=3)) == 3
    assert len(dataset_from_journals(journals, since=time.time() + 3600 * 24 * 365 * 10)) == 0
    assert len(dataset_from_journals(journals, until=0.0)) == 0


def test_a_file_in_the_folder_that_is_not_a_journal_is_named(journals: Path) -> None:
    (journals / "broken.ndjson").write_text("{}\n")
    with pytest.raises(DatasetError, match=r"broken\.ndjson"):
        dataset_from_journals(journals)
    with pytest.raises(DatasetError, match="not a directory"):
        dataset_from_journals(journals / "missing")


def test_recorded_runs_replayed_against_a_changed_agent_name_the_diverging_cases(
    journals: Path,
) -> None:
    ds = dataset_from_journals(journals)
    result = compare_agents(ds, agent, unguarded, [status_is(), excludes(CARD)],
                     deps=lambda c: Shop())
    assert result.replayed
    # the recorded agent replays its own runs exactly
    assert all(c.outcome is not None and c.outcome.divergence is None
               for c in result.before.cases)
    assert result.before.ok
    changed = {c.case: c for c in result.changed}
    pii = {c.name for c in ds.cases if "pii" in c.tags}
    assert set(changed) == pii  # only the runs the PII guard acted on do another thing
    # every run that streamed is delivered in other pieces without the guard's holding
    # back; the injected message is stopped at the door, before any model call
    assert len(result.diverged) == 19
    card = next(c for c in ds.cases if c.input[0].text == "Which card did I use?")  # type: ignore[union-attr]
    change = changed[card.name]
    assert change.output and change.divergence is not None
    assert "command #" in change.divergence
    assert change.regressed  # the card number now leaves the run
    assert any(d.scorer == "excludes" and (d.before, d.after) == ("pass", "fail")
               for d in change.scores)
    assert not result.ok and "regressed" in result.table()


def test_a_replay_makes_no_model_call_and_a_rerun_asks_only_where_it_diverges(
    journals: Path,
) -> None:
    ds = dataset_from_journals(journals)
    calls: list[str] = []

    def counting(case: Case) -> ScriptedModel:
        calls.append(case.name)
        return ScriptedModel(support_model)

    def no_refund_talk(args: OutputStepArgs[None]) -> OutputStepResult[None]:
        if "refund" in args.text.lower():
            abort("Refunds are for a person to decide.")
        return Continue()

    stricter = msgspec.structs.replace(agent, output_processors=(
        *agent.output_processors, processor("no-refund-talk", process_output_step=no_refund_talk)))
    target = SimulatorTarget(counting)
    result = compare_agents(ds, agent, stricter, [status_is()], target=target,
                     deps=lambda c: Shop())
    assert calls == []  # replayed: no model, no tool
    refunds = sorted(c.name for c in ds.cases if "refund" in c.tags)
    assert sorted(c.case for c in result.diverged) == refunds
    assert sorted(c.case for c in result.regressions) == refunds  # tripped, not suspended
    compare_agents(ds, agent, stricter, [status_is()], target=target, deps=lambda c: Shop(),
            rerun_diverged=True)
    assert sorted(calls) == refunds  # the model asked again only where it diverged


def test_journals_with_online_scores_still_replay(journals: Path) -> None:
    from interpreters.record.journal import Scored

    rec = Recorder(journals)
    path = sorted(journals.glob("*.ndjson"))[0]
    rec.annotate(path.stem, Scored("polite", "pass", 1.0, None, "fine", 1.0))
    j = Journal.read(path)
    assert [s.scorer for s in j.scores] == ["polite"]
    assert j.ended is not None
    ds = dataset_from_journals(journals)
    result = compare_agents(Dataset("one", ds.cases[:1]), agent, agent, deps=lambda c: Shop())
    assert not result.changed


# --- the command ---------------------------------------------------------------------------


def _eval(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    argv = list(args)
    def opt(name: str) -> str | None:
        return argv[argv.index(name) + 1] if name in argv else None

    code = run_eval(argv[0], argv[argv.index("--agent") + 1], against=opt("--against"),
                    json_out=opt("--json"), deps=opt("--deps"), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_pipeline_eval_passes_the_suite_and_writes_its_report(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    html = tmp_path / "r.html"
    code = main(["eval", "examples.support_evals:suite", "--agent",
                 "examples.support_evals:agent", "--json", str(report), "--html", str(html)])
    assert code == 0
    data = json.loads(report.read_text())
    assert data["ok"] is True and len(data["cases"]) == 20
    assert "support" in html.read_text()


def test_pipeline_eval_fails_a_change_that_regresses(tmp_path: Path) -> None:
    code, out, _ = _eval("examples.support_evals:suite", "--agent",
                         "examples.support_evals:agent", "--against",
                         "examples.support_evals:unguarded")
    assert code == 1
    assert "regressed" in out and "pii-card" in out


def test_pipeline_eval_replays_a_folder_of_journals(journals: Path) -> None:
    shop = ("--deps", "examples.support_evals:Shop")
    same = _eval(str(journals), "--agent", "examples.support_evals:agent", *shop)
    assert same[0] == 0, same
    code, out, _ = _eval(str(journals), "--agent", "examples.support_evals:agent",
                         "--against", "examples.support_evals:unguarded", *shop)
    assert code == 1
    assert "diverges at command #" in out
    code, out, _ = _eval(str(journals), "--agent", "examples.support_evals:unguarded", *shop)
    assert code == 1 and "diverges at" in out
    code, out, _ = _eval(str(journals), "--agent", "examples.support_evals:agent")
    assert code == 1 and "needs deps of type Shop" in out  # the tools' deps were missing


def test_pipeline_eval_says_what_it_cannot_use(tmp_path: Path) -> None:
    bad = tmp_path / "d.json"
    bad.write_text('{"name": "d", "cases": [{"name": "x"}]}')
    code, _, err = _eval(str(bad), "--agent", "examples.support_evals:agent")
    assert code == 2 and "case 'x' (#1)" in err and "input" in err
    code, _, err = _eval("examples.support_evals:nothing", "--agent",
                         "examples.support_evals:agent")
    assert code == 2 and "cannot load" in err
    code, _, err = _eval("examples.support_evals:suite", "--agent", "examples.nope:agent")
    assert code == 2
    assert main(["eval", "examples.support_evals:suite", "--agent",
                 "examples.support_evals:agent", "--threshold", "nope=0.5"]) == 2
    from examples.support_evals import suite

    assert suite.thresholds == {"polite": 0.75}  # the options changed a copy
