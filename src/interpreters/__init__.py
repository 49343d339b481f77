"""The shell: interpreters that carry out the agent loop's commands, and the providers.

What a program that runs agents needs: the interpreters and simulators, a `Resolver` of
model ids to providers, the run options, cancelling, handlers for hooks' own I/O
requests, and the observers (`Recorder` writes a `Journal` a simulator can replay).
"""

import importlib
from typing import TYPE_CHECKING

# First: importing it checks that `pipeline` and `effects` are ours, not another
# distribution's (ShadowedPackageError says which and how to fix it).
from interpreters._distribution import ShadowedPackageError
from interpreters.aio import AsyncInterpreter, AsyncRunStream
from interpreters.cancel import CancelSignal
from interpreters.handlers import Handlers
from interpreters.journal import Journal, Recorder
from interpreters.observe import Observer
from interpreters.options import RunOptions
from interpreters.providers.provider import AsyncProvider, Provider, ProviderError
from interpreters.replay import ReplayRun
from interpreters.simulator import Fail, Say, ScriptedCall, ScriptedModel, SimRun, Simulator, call
from interpreters.simulator_aio import AsyncSimulator
from interpreters.sync import AsyncNotSupportedError, RunStream, SyncInterpreter
from interpreters.trace import Trace

if TYPE_CHECKING:
    from interpreters.providers.router import AsyncResolver, Resolver

# Loaded when first used: importing the interpreters does not bring in httpx and the wire
# formats (as `interpreters.providers` does not).
_LAZY = {
    "AsyncResolver": "interpreters.providers.router",
    "Resolver": "interpreters.providers.router",
}


def __getattr__(name: str) -> object:
    home = _LAZY.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value: object = getattr(importlib.import_module(home), name)
    globals()[name] = value  # once: later lookups do not come here
    return value


__all__ = [
    "AsyncInterpreter", "AsyncNotSupportedError", "AsyncProvider", "AsyncResolver",
    "AsyncRunStream", "AsyncSimulator", "CancelSignal", "Fail", "Handlers", "Journal",
    "Observer", "Provider", "ProviderError", "Recorder", "ReplayRun", "Resolver", "RunOptions",
    "RunStream",
    "Say", "ScriptedCall", "ScriptedModel", "ShadowedPackageError", "SimRun", "Simulator",
    "SyncInterpreter",
    "Trace", "call",
]
