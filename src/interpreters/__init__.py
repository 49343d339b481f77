"""The shell: interpreters that carry out the agent loop's commands, and the providers."""

from interpreters.aio import AsyncInterpreter, AsyncRunStream
from interpreters.cancel import CancelSignal
from interpreters.providers.provider import AsyncProvider, Provider, ProviderError
from interpreters.simulator import Fail, Say, ScriptedCall, ScriptedModel, SimRun, Simulator, call
from interpreters.simulator_aio import AsyncSimulator
from interpreters.sync import AsyncNotSupportedError, RunStream, SyncInterpreter
from interpreters.trace import Trace

__all__ = [
    "AsyncInterpreter", "AsyncNotSupportedError", "AsyncProvider", "AsyncRunStream",
    "AsyncSimulator", "CancelSignal", "Fail", "Provider", "ProviderError", "RunStream",
    "Say", "ScriptedCall", "ScriptedModel", "SimRun", "Simulator", "SyncInterpreter",
    "Trace", "call",
]
