"""A suite: what one eval is made of (a dataset, its scorers, the target it runs on in
CI, thresholds, deps, a per-case timeout), for `pipeline eval module:suite` and for
pytest, a case per test:

    @pytest.mark.parametrize("case", suite.dataset.cases, ids=case_ids)
    def test_support(case: Case, simulator: SimulatorFactory) -> None:
        check_case(suite, agent, case, simulator)    # the plugin's simulator fixture
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from interpreters.evals.cases import Case, Dataset
from interpreters.evals.experiment import DepsFor, compare_agents, evaluate, run_case
from interpreters.evals.report import CaseResult, Comparison, Report
from interpreters.evals.scores import Scorer
from interpreters.evals.targets import AsyncInterpreterTarget, SimulatorTarget, Target
from pipeline.agent import Agent

if TYPE_CHECKING:  # (the plugin imports pytest, which evals in production do without)
    from interpreters.sim.pytest_plugin import SimulatorFactory


class Suite:
    """A dataset with its scorers, target, thresholds, deps and per-case timeout."""

    def __init__(
        self,
        dataset: Dataset,
        scorers: Sequence[Scorer],
        *,
        target: Target | None = None,
        thresholds: Mapping[str, float] | None = None,
        threshold: float = 1.0,
        deps: DepsFor | None = None,
        timeout: float | None = None,
        concurrency: int = 4,
    ) -> None:
        self.dataset = dataset
        self.scorers = tuple(scorers)
        self.target = target
        self.thresholds = dict(thresholds or {})
        self.threshold = threshold
        self.deps = deps
        self.timeout = timeout
        self.concurrency = concurrency

    def run(
        self, agent: Agent, *, target: Target | None = None,
        results: str | Path | None = None, progress: TextIO | None = None,
        experiment: str | None = None,
    ) -> Report:
        """`evaluate` with the suite's settings (`target` overrides its own)."""
        t = target or self.target
        if t is None:
            raise ValueError("the suite has no target: give one")
        return evaluate(self.dataset, agent, self.scorers, target=t, deps=self.deps,
                        concurrency=self.concurrency, timeout=self.timeout,
                        results=results, experiment=experiment,
                        thresholds=self.thresholds, threshold=self.threshold,
                        progress=progress)

    def compare(
        self, before: Agent, after: Agent, *, target: Target | None = None,
        replay: bool | None = None, rerun_diverged: bool = False,
    ) -> Comparison:
        """`compare_agents` with the suite's settings."""
        return compare_agents(self.dataset, before, after, self.scorers,
                       target=target or self.target, replay=replay,
                       rerun_diverged=rerun_diverged, deps=self.deps,
                       thresholds=self.thresholds, threshold=self.threshold,
                       **({"timeout": self.timeout} if not replay else {}))


def case_ids(case: Case) -> str:
    """A test id per case (`ids=case_ids` in `pytest.mark.parametrize`)."""
    return case.name


def check_case(
    suite: Suite, agent: Agent, case: Case, simulator: SimulatorFactory | None = None,
) -> CaseResult:
    """Run one case of `suite` and fail the test (AssertionError, each failing score
    and why) unless every scorer passed. With the pytest plugin's `simulator` fixture,
    a `SimulatorTarget`'s simulators are made by it."""
    target = suite.target
    if target is None:
        raise ValueError("the suite has no target")
    if isinstance(target, SimulatorTarget) and simulator is not None:
        target = target.made_by(simulator)
    if isinstance(target, AsyncInterpreterTarget):
        raise TypeError("check_case runs a sync target (the simulator)")
    r = run_case(target, agent, case, suite.scorers, suite.deps, suite.timeout, 0, 0.0, None)
    bad = [f"{s.scorer}: {s.verdict}: {s.reason}" for s in r.scores if not s.passed]
    if r.error is not None:
        bad.insert(0, f"could not run: {r.error}")
    if bad:
        text = r.outcome.text if r.outcome is not None else ""
        raise AssertionError(f"case {case.name!r} failed:\n  " + "\n  ".join(bad)
                             + f"\n  answer: {text[:300]!r}")
    return r


__all__ = ["Suite", "case_ids", "check_case"]
