"""The simulator under the async interpreter: scripted models, virtual time, fixed ids.

    model = ScriptedModel([Say("Let me look.", calls=[call("weather", city="Paris")]),
                           Say("Sunny.", latency=30.0)])        # 30 s of virtual latency
    run = await AsyncSimulator(model).run(agent, "Weather in Paris?")
    assert run.result.text == "Let me look.Sunny."

It is `Simulator` with `await`: the same message ids, clock and trace, so a run here
equals the same run on the sync `Simulator` given the same `run_ids` (by default each
simulator's run ids are its own: `run1-<token>`...). Latency, retry
backoff and `sim.sleep` (for tools) wait on the virtual clock, which jumps to the earliest
wake time as soon as every task waits (`VirtualClock.wait`, trio's `MockClock` autojump):
they cost no real time, and concurrent runs and tools share one timeline, waking in
virtual-time order. For benchmarks, `real_sleep=True` waits for real (`anyio.sleep`)
before retries; give the model `ScriptedModel(..., async_sleep=anyio.sleep)` for real
model latency.

`timeout=` counts virtual time too: `run(agent, p, timeout=1)` against 100 s of scripted
latency ends cancelled at virtual t=1, at once in real time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Unpack

import anyio

from interpreters.aio import AsyncHandler, AsyncInterpreter, AsyncRunStream
from interpreters.core.options import CancellableScope, Deps, RunOptions, check_options
from interpreters.observers.observe import Observer
from interpreters.record.replay import replay_async
from interpreters.sim.clock import VirtualDeadline
from interpreters.sim.simulator import ScriptedModel, SimRun, SimulatorBase
from pipeline.agent import Agent
from pipeline.values.cost import Pricer
from pipeline.values.messages import RunInput
from pipeline.values.result import Output, RunResult


class AsyncSimulator(SimulatorBase):
    """The async interpreter wired to scripted models, a virtual clock and fixed ids.

    Routing as `Simulator`'s: `model` answers the agent's model id (every id when no
    `models` are given), `models` the ids they name, `default` (when given) any other;
    an id none of them answers fails the call, naming it. A run started through
    `interpreter` directly (not `run`/`stream`) has its agent's id known only if `model`
    answers every id. `run_ids` as `Simulator`'s.
    """

    def __init__(
        self,
        model: ScriptedModel,
        *,
        models: Mapping[str, ScriptedModel] | None = None,
        default: ScriptedModel | None = None,
        handlers: Mapping[type, AsyncHandler] | None = None,
        start: float = 1_700_000_000.0,
        observers: Sequence[Observer] = (),
        price: Pricer | None = None,
        real_sleep: bool = False,
        tools_in_threads: bool = False,
        run_ids: Callable[[], str] | None = None,
    ) -> None:
        super().__init__(
            model, models, default, start, virtual_timeouts=not real_sleep, run_ids=run_ids
        )
        sleep: Callable[[float], Awaitable[None]] = (
            anyio.sleep if real_sleep else self.clock.wait
        )
        self._interp = AsyncInterpreter(
            resolve=self.routes,
            handlers=handlers,
            clock=self.clock,
            sleep=sleep,
            run_ids=self._next_run_id,
            observers=observers,
            price=price,
            tools_in_threads=tools_in_threads,
            breaker=self.breaker,
        )

    @property
    def interpreter(self) -> AsyncInterpreter:
        return self._interp

    async def sleep(self, seconds: float) -> None:
        """Wait `seconds` of virtual time (for tools and hooks under the simulator): the
        clock jumps to the earliest wake time as soon as every task waits
        (`VirtualClock.wait`); a run's virtual `timeout` cuts it short."""
        await self.clock.wait(seconds)

    async def run(
        self,
        agent: Agent[Deps, Output],
        messages: RunInput,
        **options: Unpack[CancellableScope[Deps]],
    ) -> SimRun[Output]:
        """Run to the end; the result, the full trace and the virtual time at the end.

        `timeout` is in virtual seconds: the run ends cancelled when the virtual clock
        reaches it (see `stream`)."""
        with self._running(agent, options) as (run, trace, deadline):
            job = self._interp.run(agent, messages, **run)
            result = await (job if deadline is None else self._within(deadline, job))
        return SimRun(result, trace, self.clock.now)

    async def _within(self, deadline: VirtualDeadline, job: Awaitable[RunResult]) -> RunResult:
        """`job`, beside a task that waits on the clock for `deadline`: the clock jumps
        there once every task waits, also when nothing of the run waits on the clock (a
        tool blocked on an event, say), and the deadline's alarm cancels the run."""
        result: RunResult | None = None
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.clock.wait, deadline.at - self.clock.now)
                result = await job
                tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:  # the run's own error, as itself
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        assert result is not None
        return result

    replay = staticmethod(replay_async)
    """`Simulator.replay` under async code: async hooks are awaited."""

    def stream(
        self,
        agent: Agent[Deps, Output],
        messages: RunInput,
        **options: Unpack[RunOptions[Deps]],
    ) -> AsyncRunStream[Output]:
        """The run's chunks as an async iterator (`async with sim.stream(...) as s:`).

        `timeout` counts virtual time from now: when latency or retry backoff brings the
        virtual clock to the deadline, the clock stops there and the run ends cancelled
        ("timed out after N s"), as a real run past its timeout does. With
        `real_sleep=True` the timeout is in real seconds, as on `AsyncInterpreter`.
        """
        check_options(options)
        run, deadline = self._begin(agent, options)
        return self._handed_out(self._interp.stream(agent, messages, **run), deadline)


__all__ = ["AsyncSimulator"]
