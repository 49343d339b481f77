"""The simulator under the async interpreter: scripted models, virtual time, fixed ids.

    model = ScriptedModel([Say("Let me look.", calls=[call("weather", city="Paris")]),
                           Say("Sunny.", latency=30.0)])        # 30 s of virtual latency
    run = await AsyncSimulator(model).run(agent, "Weather in Paris?")
    assert run.result.text == "Let me look.Sunny."

It is `Simulator` with `await`: the same run ids (`run1`, `run2`...), message ids, clock
and trace, so a run here equals the same run on the sync `Simulator`. Latency and retry
backoff advance the virtual clock (with a checkpoint, so other tasks and cancellation get
their turn) and cost no real time. For benchmarks, `real_sleep=True` waits for real
(`anyio.sleep`) before retries; give the model `ScriptedModel(..., async_sleep=anyio.sleep)`
for real model latency. The virtual clock is one counter for the simulator: concurrent
runs each advance it, so in-run timestamps are meaningful for one run at a time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

import anyio
import anyio.lowlevel

from interpreters.aio import AsyncHandler, AsyncInterpreter, AsyncRunStream
from interpreters.cancel import AbortSignal
from interpreters.simulator import Routes, ScriptedModel, SimRun, VirtualClock
from interpreters.trace import Trace
from pipeline.agent import Agent
from pipeline.messages import JsonObject, RunInput
from pipeline.result import RunResult


class AsyncSimulator:
    """The async interpreter wired to scripted models, a virtual clock and fixed ids.

    Routing as `Simulator`'s: `model` answers the agent's model id (every id when no
    `models` are given), `models` the ids they name, `default` (when given) any other;
    an id none of them answers fails the call, naming it. A run started through
    `interpreter` directly (not `run`/`stream`) has its agent's id known only if `model`
    answers every id.
    """

    def __init__(
        self,
        model: ScriptedModel,
        *,
        models: Mapping[str, ScriptedModel] | None = None,
        default: ScriptedModel | None = None,
        handlers: Mapping[type, AsyncHandler] | None = None,
        start: float = 1_700_000_000.0,
        real_sleep: bool = False,
        tools_in_threads: bool = False,
    ) -> None:
        self.clock: VirtualClock = model.clock
        self.clock.now = max(self.clock.now, start)
        self.model = model
        self.models = dict(models or {})
        for m in (*self.models.values(), *((default,) if default is not None else ())):
            m.clock = self.clock
        self._runs = 0
        self.routes = Routes(model, self.models, default)
        sleep: Callable[[float], Awaitable[None]] = (
            anyio.sleep if real_sleep else self._virtual_sleep
        )
        self._interp = AsyncInterpreter(
            resolve=self.routes,
            handlers=handlers,
            clock=self.clock,
            sleep=sleep,
            run_ids=self._next_run_id,
            tools_in_threads=tools_in_threads,
        )

    @property
    def interpreter(self) -> AsyncInterpreter:
        return self._interp

    def _next_run_id(self) -> str:
        self._runs += 1
        return f"run{self._runs}"

    async def _virtual_sleep(self, seconds: float) -> None:
        self.clock.sleep(seconds)
        await anyio.lowlevel.checkpoint()

    async def run(
        self,
        agent: Agent,
        messages: RunInput,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        values: JsonObject | None = None,
        signal: AbortSignal | None = None,
        timeout: float | None = None,
    ) -> SimRun:
        """Run to the end; the result, the full trace and the virtual time at the end."""
        trace = Trace()
        self.routes.note(agent.model)
        result: RunResult = await self._interp.run(
            agent, messages, thread_id=thread_id, resource_id=resource_id, values=values,
            trace=trace, signal=signal, timeout=timeout,
        )
        return SimRun(result, trace, self.clock.now)

    def stream(
        self,
        agent: Agent,
        messages: RunInput,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        values: JsonObject | None = None,
        trace: Trace | None = None,
        signal: AbortSignal | None = None,
        timeout: float | None = None,
    ) -> AsyncRunStream:
        """The run's chunks as an async iterator (`async with sim.stream(...) as s:`)."""
        self.routes.note(agent.model)
        return self._interp.stream(
            agent, messages, thread_id=thread_id, resource_id=resource_id, values=values,
            trace=trace, signal=signal, timeout=timeout,
        )


__all__ = ["AsyncSimulator"]
