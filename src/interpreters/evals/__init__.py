"""Evals: decide whether a change ships by evaluating it.

A `Dataset` of `Case`s (in code, a JSON or YAML file, or built from recorded runs with
`dataset_from_journals`), `Scorer`s (deterministic: `equals`, `contains`, `tool_calls`,
`max_cost`, `no_guard_tripped`...; judged: `judge`, an LLM with a rubric asked through
`AskModel`, failing closed as "could-not-judge"), an experiment that runs the cases on a
target (`SimulatorTarget` for CI, `InterpreterTarget`/`AsyncInterpreterTarget` for real
providers) and reports (`evaluate` -> `Report`), and a comparison of two agents
(`compare_agents`: re-run, or replay recorded runs and name where they diverge). `OnlineScorer`
scores live runs as an observer, sampled and off the run's path. `check_output_guard`
(needs hypothesis) is the conformance kit for a guard of your own. The `pipeline eval`
command runs a suite in CI.
"""

from interpreters.evals.cases import Case, Dataset, DatasetError, dataset_from_journals
from interpreters.evals.experiment import compare_agents, evaluate, evaluate_async
from interpreters.evals.judge import JudgeVerdict, judge
from interpreters.evals.online import OnlineScorer, OnlineScores
from interpreters.evals.report import (
    CaseChange,
    CaseResult,
    Comparison,
    Report,
    ScoreDelta,
    ScorerSummary,
)
from interpreters.evals.scorers import (
    ExpectedCall,
    contains,
    equals,
    excludes,
    expect_call,
    forbidden_tools,
    guard_tripped,
    matches_type,
    max_cost,
    max_latency,
    max_steps,
    max_tokens,
    no_guard_tripped,
    regex,
    status_is,
    suspended_for,
    tool_calls,
)
from interpreters.evals.scores import (
    GuardVerdict,
    Judging,
    Observed,
    Score,
    Scorer,
    ToolCallSeen,
    Verdict,
    scorer,
)
from interpreters.evals.suite import Suite, case_ids, check_case
from interpreters.evals.targets import AsyncInterpreterTarget, InterpreterTarget, SimulatorTarget
from pipeline.lazy import lazy_names

# The guard conformance kit needs hypothesis (a dev dependency): loaded when first used.
__getattr__ = lazy_names(__name__, {
    "check_output_guard": "interpreters.evals.guards",
    "GuardLeak": "interpreters.evals.guards",
})

__all__ = [
    "AsyncInterpreterTarget", "Case", "CaseChange", "CaseResult", "Comparison", "Dataset",
    "DatasetError", "ExpectedCall", "GuardLeak", "GuardVerdict", "InterpreterTarget",
    "JudgeVerdict", "Judging", "OnlineScorer", "OnlineScores", "Observed", "Report",
    "Score", "ScoreDelta", "Scorer", "ScorerSummary", "SimulatorTarget", "Suite",
    "ToolCallSeen", "Verdict", "case_ids", "check_case", "check_output_guard", "compare_agents",
    "contains", "dataset_from_journals", "equals", "evaluate", "evaluate_async", "excludes",
    "expect_call", "forbidden_tools", "guard_tripped", "judge", "matches_type", "max_cost",
    "max_latency", "max_steps", "max_tokens", "no_guard_tripped", "regex", "scorer",
    "status_is", "suspended_for", "tool_calls",
]
