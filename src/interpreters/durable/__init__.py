"""Durable runs: a run that survives a crash, each I/O a checkpointed step.

What does not depend on an engine is here (`loop` drives the agent loop from steps,
`payload` encodes their values, `fingerprint` records the agent's definition); the
engine is a package of its own (`dbos`, the `durable` extra). Its public names are
importable from here, loaded when first used, so importing this package needs no engine.
"""

from typing import TYPE_CHECKING

from pipeline.lazy import lazy_names

if TYPE_CHECKING:
    from interpreters.durable.dbos.desk import DurableApprovals
    from interpreters.durable.dbos.replay import ReplayProblem, replay_runs
    from interpreters.durable.dbos.runs import (
        AgentChangedError,
        DurableClient,
        DurableRunError,
        DurableRuns,
        RunConflictError,
        RunKeptCrashingError,
    )
    from interpreters.durable.dbos.store import (
        RunTakenOver,
        StoreRetry,
        StoreUnavailable,
        Takeover,
    )

_LAZY = {
    "AgentChangedError": "interpreters.durable.dbos.runs",
    "DurableApprovals": "interpreters.durable.dbos.desk",
    "DurableClient": "interpreters.durable.dbos.runs",
    "DurableRunError": "interpreters.durable.dbos.runs",
    "DurableRuns": "interpreters.durable.dbos.runs",
    "RunConflictError": "interpreters.durable.dbos.runs",
    "RunKeptCrashingError": "interpreters.durable.dbos.runs",
    "ReplayProblem": "interpreters.durable.dbos.replay",
    "replay_runs": "interpreters.durable.dbos.replay",
    "RunTakenOver": "interpreters.durable.dbos.store",
    "StoreRetry": "interpreters.durable.dbos.store",
    "StoreUnavailable": "interpreters.durable.dbos.store",
    "Takeover": "interpreters.durable.dbos.store",
}


__getattr__ = lazy_names(__name__, _LAZY)

__all__ = [
    "AgentChangedError", "DurableApprovals", "DurableClient", "DurableRunError", "DurableRuns",
    "ReplayProblem", "RunConflictError", "RunKeptCrashingError", "RunTakenOver",
    "StoreRetry", "StoreUnavailable", "Takeover", "replay_runs",
]
