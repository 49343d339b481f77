"""Running one agent on each kind of interpreter the approval tests cover: the sync and
async interpreters and both simulators, each over one in-memory memory store.

`Runner.run(agent, input, **options)` gives the run's `RunResult` whichever kind runs it,
so a test suspends and resumes the same way on each."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import anyio

from interpreters.aio import AsyncInterpreter
from interpreters.memory import InMemoryStore, async_memory_handlers, memory_handlers
from interpreters.sync import SyncInterpreter
from interpreters.testing import AsyncSimulator, ScriptedModel, Simulator
from pipeline.agent import Agent
from pipeline.values.messages import RunInput
from pipeline.values.result import RunResult

Kind = Literal["sync", "async", "simulator", "async-simulator"]
KINDS: tuple[Kind, ...] = ("sync", "async", "simulator", "async-simulator")


class Runner:
    """Runs agents on one kind of interpreter, over `memory` (its memory store)."""

    def __init__(self, kind: Kind, model: ScriptedModel) -> None:
        self.kind = kind
        self.memory = InMemoryStore()
        self._run: Callable[..., RunResult]
        if kind == "sync":
            sync = SyncInterpreter(model, handlers=memory_handlers(self.memory), observers=())
            self._run = sync.run
        elif kind == "simulator":
            sim = Simulator(model, handlers=memory_handlers(self.memory))
            self._run = lambda *a, **kw: sim.run(*a, **kw).result
        elif kind == "async":
            aio = AsyncInterpreter(model, handlers=async_memory_handlers(self.memory),
                                   observers=())

            async def on_aio(*a: Any, **kw: Any) -> RunResult:
                return await aio.run(*a, **kw)

            self._run = lambda *a, **kw: anyio.run(lambda: on_aio(*a, **kw))
        else:
            asim = AsyncSimulator(model, handlers=async_memory_handlers(self.memory))

            async def on_asim(*a: Any, **kw: Any) -> RunResult:
                return (await asim.run(*a, **kw)).result

            self._run = lambda *a, **kw: anyio.run(lambda: on_asim(*a, **kw))

    def run(self, agent: Agent, messages: RunInput, **options: Any) -> RunResult:
        return self._run(agent, messages, **options)

    def saved(self, thread: str) -> list[str]:
        """The texts kept in `thread` of the memory store (every part's text)."""
        return [m.text for m in self.memory.last_messages(thread, 100) if m.text]
