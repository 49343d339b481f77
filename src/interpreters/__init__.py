"""The shell: interpreters that carry out the agent loop's commands, and the providers."""

from interpreters.provider import AsyncProvider, Provider, ProviderError
from interpreters.simulator import Fail, Say, ScriptedCall, ScriptedModel, SimRun, Simulator, call
from interpreters.sync import AsyncNotSupportedError, RunStream, SyncInterpreter
from interpreters.trace import Trace

__all__ = [
    "AsyncNotSupportedError", "AsyncProvider", "Fail", "Provider", "ProviderError",
    "RunStream", "Say", "ScriptedCall", "ScriptedModel", "SimRun", "Simulator",
    "SyncInterpreter", "Trace", "call",
]
