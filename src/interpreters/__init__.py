"""The shell: what runs agents.

The interpreters (sync, and async on anyio), their run options and cancelling, model
providers and the `Resolver` of model ids, the observers (a `Trace`, a `Journal` a
replay reads, logging and OpenTelemetry), memory and approval stores opened by URL,
`Approvals` for suspended runs, durable runs (the `durable` extra) and
`DurableApprovals` for theirs: both an `ApprovalDesk`. Tests add
`interpreters.testing` (the simulators and scripted models).
"""

# First: importing it checks that `pipeline` and `effects` are ours, not another
# distribution's (ShadowedPackageError says which and how to fix it).
from interpreters.core.distribution import ShadowedPackageError

# isort: split
from typing import TYPE_CHECKING

from interpreters.aio import AsyncInterpreter, AsyncRunStream
from interpreters.approvals import (
    ApprovalDesk,
    ApprovalPolicy,
    Approvals,
    AuditRecord,
    MemoryApprovalStore,
    ToolApprovalRule,
    open_approval_store,
)
from interpreters.core.breaker import CircuitBreaker
from interpreters.core.cancel import CancelSignal
from interpreters.core.handlers import Handlers
from interpreters.core.options import RunOptions
from interpreters.core.trace import Trace
from interpreters.memory import open_async_memory_store, open_memory_store
from interpreters.observers.logs import LogObserver
from interpreters.observers.observe import Observer
from interpreters.providers.provider import AsyncProvider, Provider, ProviderError
from interpreters.record.journal import Journal, Recorder
from interpreters.record.replay import ReplayRun
from interpreters.run.base import AsyncNotSupportedError
from interpreters.sync import RunStream, SyncInterpreter
from pipeline.lazy import lazy_names

if TYPE_CHECKING:
    from interpreters.durable import DurableApprovals, DurableClient, DurableRuns
    from interpreters.observers.otel import OTelObserver
    from interpreters.providers.router import AsyncResolver, Resolver

# Loaded when first used: importing the interpreters brings in neither httpx and the wire
# formats (as `interpreters.providers` does not), nor an optional extra.
__getattr__ = lazy_names(
    __name__,
    {
        "AsyncResolver": "interpreters.providers.router",
        "Resolver": "interpreters.providers.router",
        "DurableApprovals": "interpreters.durable",
        "DurableClient": "interpreters.durable",
        "DurableRuns": "interpreters.durable",
        "OTelObserver": "interpreters.observers.otel",
    },
    moved=dict.fromkeys(
        ("AsyncSimulator", "Fail", "Say", "ScriptedCall", "ScriptedModel", "SimRun",
         "Simulator", "call"),
        "interpreters.testing",
    ),
)

__all__ = [
    "ApprovalDesk", "ApprovalPolicy", "Approvals", "AsyncInterpreter", "AuditRecord",
    "AsyncNotSupportedError", "AsyncProvider", "AsyncResolver", "AsyncRunStream",
    "CancelSignal", "CircuitBreaker",
    "DurableApprovals",
    "DurableClient", "DurableRuns",
    "Handlers", "Journal", "LogObserver", "MemoryApprovalStore", "OTelObserver", "Observer",
    "Provider", "ProviderError", "Recorder", "ReplayRun", "Resolver", "RunOptions",
    "RunStream", "ShadowedPackageError", "SyncInterpreter", "ToolApprovalRule", "Trace",
    "open_approval_store",
    "open_async_memory_store", "open_memory_store",
]
