"""What tests are written with: the simulators (sync and async interpreters on scripted
models and virtual time), scripted models and their steps (`Say`, `call`, `Fail`), the
virtual clock, and fakes of the world (a scripted embedder, an in-memory store).

`pytest` finds the `simulator` and `async_simulator` fixtures by itself (the plugin is
registered by the distribution); their types are `SimulatorFactory` and
`AsyncSimulatorFactory`.
"""

from interpreters.memory.embed.scripted import ScriptedEmbedder
from interpreters.memory.store import HashEmbedder, InMemoryStore
from interpreters.sim.aio import AsyncSimulator
from interpreters.sim.clock import VirtualClock
from interpreters.sim.factories import AsyncSimulatorFactory, SimulatorFactory
from interpreters.sim.simulator import (
    Fail,
    Say,
    ScriptedCall,
    ScriptedModel,
    ScriptedRoutes,
    SimRun,
    Simulator,
    call,
    numbered_run_ids,
)

__all__ = [
    "AsyncSimulator", "AsyncSimulatorFactory", "Fail", "HashEmbedder", "InMemoryStore", "Say",
    "ScriptedCall", "ScriptedEmbedder", "ScriptedModel", "ScriptedRoutes", "SimRun", "Simulator",
    "SimulatorFactory", "VirtualClock", "call", "numbered_run_ids",
]
