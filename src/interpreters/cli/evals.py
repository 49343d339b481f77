"""`pipeline eval DATASET --agent module:name [--against module:name]`: run an eval for CI.

DATASET is a suite (`module:name` of an `interpreters.evals.Suite`: dataset, scorers,
target, thresholds), a dataset (`module:name` of a `Dataset`, or a `.json`/`.yaml`
file), or a directory of journals (`dataset_from_journals`). The table goes to stdout,
the progress line to stderr; `--json` and `--html` write the report. The exit code is 0
when every scorer met its threshold (and, with `--against`, no case's score regressed),
1 when not, 2 when something could not be loaded.

- A suite runs on its target (the simulator in CI); a dataset without one runs on real
  providers (`Resolver()`, keys from the environment), priced by genai-prices when the
  `prices` extra is installed, its judges on the same providers.
- `--against` compares: a folder of journals is replayed against both agents (no model
  is called; a case where the changed agent diverges names the point), anything else
  runs on both. It fails when a score regressed, or, for journals without `--scorers`,
  when any case does another thing (output, tool calls, guards' verdicts, status).
- A folder of journals without `--against` is replayed against `--agent`: a run that
  goes another way than it was recorded fails.
- `--deps module:name` gives the runs' tools their deps: a class (one made per case), a
  function of the case, or a value (default: the suite's).
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from interpreters.cli.load import attribute
from interpreters.cli.replay import AgentNotFound, escaped, load_agent
from interpreters.evals.cases import Dataset, DatasetError, dataset_from_journals
from interpreters.evals.experiment import DepsFor
from interpreters.evals.report import Comparison, Report
from interpreters.evals.scorers import status_is
from interpreters.evals.scores import Scorer
from interpreters.evals.suite import Suite
from interpreters.evals.targets import (
    AsyncInterpreterTarget,
    InterpreterTarget,
    SimulatorTarget,
    Target,
)


class EvalUsageError(ValueError):
    """What `pipeline eval` was given cannot be used (exit code 2)."""


def _attribute(spec: str, option: str, wants: str = "module:name") -> object:
    return attribute(spec, option, EvalUsageError, wants)


def load_suite(spec: str) -> tuple[Suite, bool]:
    """The suite DATASET names, and whether its cases are recorded runs."""
    p = Path(spec)
    if p.is_dir():
        try:
            return Suite(dataset_from_journals(p), []), True
        except DatasetError as e:
            raise EvalUsageError(str(e)) from None
    if p.suffix in (".json", ".yaml", ".yml") or p.is_file():
        try:
            return Suite(Dataset.load(p), [status_is()]), False
        except DatasetError as e:
            raise EvalUsageError(str(e)) from None
    value = _attribute(spec, "DATASET", "module:name, a dataset file or a journals folder")
    if callable(value) and not isinstance(value, Suite | Dataset | type):
        value = value()
    if isinstance(value, Suite):
        return value, all(c.journal for c in value.dataset.cases) and bool(value.dataset.cases)
    if isinstance(value, Dataset):
        return Suite(value, [status_is()]), False
    raise EvalUsageError(f"{spec!r} is a {type(value).__name__}, not a Suite or a Dataset")


def _scorers(spec: str) -> list[Scorer]:
    value = _attribute(spec, "--scorers")
    items = value() if callable(value) and not isinstance(value, Scorer) else value
    if isinstance(items, Scorer):
        return [items]
    if isinstance(items, list | tuple) and all(isinstance(s, Scorer) for s in items):
        return list(items)
    raise EvalUsageError(f"--scorers {spec!r} is not a list of Scorers")


def _target(spec: str) -> Target:
    value = _attribute(spec, "--target")
    if callable(value) and not isinstance(value, type):
        value = value()
    if isinstance(value, SimulatorTarget | InterpreterTarget | AsyncInterpreterTarget):
        return value
    raise EvalUsageError(f"--target {spec!r} is a {type(value).__name__}, not a target")


def providers_target() -> Target:
    """Real providers from the environment, priced when genai-prices is installed."""
    from interpreters.providers.router import Resolver
    from interpreters.sync import SyncInterpreter

    price = None
    try:
        from interpreters.providers.prices import genai_prices

        price = genai_prices()
    except ImportError:
        pass
    resolver = Resolver()
    return InterpreterTarget(SyncInterpreter(resolve=resolver, price=price), judge=resolver,
                             price=price)


def _deps(spec: str) -> DepsFor:
    """`--deps module:name`: a class (one made per case), a function of the case, or a
    value every case gets."""
    value = _attribute(spec, "--deps")
    if isinstance(value, type):
        made = value
        return lambda case: made()
    if callable(value):
        fn = value
        return lambda case: fn(case)
    return lambda case: value


def _thresholds(items: Sequence[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in items:
        name, sep, rate = item.partition("=")
        try:
            value = float(rate)
        except ValueError:
            value = -1.0
        if not sep or not name or not 0.0 <= value <= 1.0:
            raise EvalUsageError(f"--threshold wants SCORER=RATE (0 to 1), got {item!r}")
        out[name] = value
    return out


def run_eval(
    dataset: str,
    agent_spec: str,
    *,
    against: str | None = None,
    scorers: str | None = None,
    target: str | None = None,
    results: str | None = None,
    json_out: str | None = None,
    html_out: str | None = None,
    concurrency: int | None = None,
    timeout: float | None = None,
    thresholds: Sequence[str] = (),
    rerun_diverged: bool = False,
    deps: str | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    w, e = out or sys.stdout, err or sys.stderr
    try:
        loaded, recorded = load_suite(dataset)
        suite = copy.copy(loaded)  # the options change this run's copy, not the module's
        suite.thresholds = dict(loaded.thresholds)
        agent = load_agent(agent_spec)
        changed = load_agent(against) if against is not None else None
        if scorers is not None:
            suite.scorers = tuple(_scorers(scorers))
        if thresholds:
            suite.thresholds.update(_thresholds(thresholds))
        if deps is not None:
            suite.deps = _deps(deps)
        if concurrency is not None:
            suite.concurrency = concurrency
        if timeout is not None:
            suite.timeout = timeout
        unknown = set(suite.thresholds) - {s.name for s in suite.scorers}
        if unknown:
            raise EvalUsageError(f"--threshold names no scorer: {sorted(unknown)}")
        chosen = _target(target) if target is not None else suite.target
    except (EvalUsageError, AgentNotFound, ValueError) as x:
        e.write(f"pipeline eval: {escaped(str(x))}\n")
        return 2
    report: Report | Comparison
    if recorded:
        sync = chosen if isinstance(chosen, SimulatorTarget | InterpreterTarget) else None
        report = suite.compare(agent, changed or agent, target=sync, replay=True,
                               rerun_diverged=rerun_diverged and sync is not None)
        if changed is None:  # the agent against its own recordings: any divergence fails
            ok = report.ok and not report.diverged and not report.changed
        elif suite.scorers:  # thresholds, and no score regressed
            ok = report.ok
        else:  # no scorers: any change of what a recorded run does fails (someone looks)
            ok = report.after.errors == 0 and not report.changed
    else:
        t = chosen or providers_target()
        if changed is not None:
            report = suite.compare(agent, changed, target=t, replay=False)
            ok = report.ok
        else:
            report = suite.run(agent, target=t, results=results, progress=e)
            ok = report.ok
    w.write(escaped(report.table(), keep="\n") + "\n")
    if recorded and changed is None:
        diverged = [c for c in report.changes if c.divergence] if isinstance(
            report, Comparison) else []
        for c in diverged:
            w.write(escaped(f"{c.case}: diverges at {c.divergence}") + "\n")
    if json_out is not None:
        Path(json_out).write_bytes(report.to_json() + b"\n")
    if html_out is not None:
        Path(html_out).write_text(report.html())
    return 0 if ok else 1


__all__ = ["EvalUsageError", "load_suite", "providers_target", "run_eval"]
