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

`timeout=` counts virtual time too: `run(agent, p, timeout=1)` against 100 s of scripted
latency ends cancelled at virtual t=1, at once in real time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Unpack

import anyio
import anyio.lowlevel

from interpreters.aio import AsyncHandler, AsyncInterpreter, AsyncRunStream
from interpreters.cancel import CancelSignal
from interpreters.journal import Journal, ReplayRun, replay_async
from interpreters.observe import Observer
from interpreters.options import CancellableScope, Deps, RunOptions, check_options, keys_of
from interpreters.simulator import ScriptedModel, ScriptedRoutes, SimRun, VirtualClock
from interpreters.trace import Trace
from interpreters.virtual_deadline import Deadlines, VirtualDeadline
from pipeline.agent import Agent
from pipeline.cost import Pricer
from pipeline.messages import RunInput
from pipeline.result import Output, RunResult

CANCELLABLE = keys_of(CancellableScope)

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
        observers: Sequence[Observer] = (),
        price: Pricer | None = None,
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
        self._real_sleep = real_sleep
        self._deadlines = Deadlines(self.clock)
        self.routes = ScriptedRoutes(model, self.models, default)
        sleep: Callable[[float], Awaitable[None]] = (
            anyio.sleep if real_sleep else self._virtual_sleep
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
        agent: Agent[Deps, Output],
        messages: RunInput,
        **options: Unpack[CancellableScope[Deps]],
    ) -> SimRun[Output]:
        """Run to the end; the result, the full trace and the virtual time at the end.

        `timeout` is in virtual seconds: the run ends cancelled when the virtual clock
        reaches it (see `stream`)."""
        check_options(options, CANCELLABLE)
        trace = Trace()
        self.routes.note(agent.model)
        run = self._options({**options, "trace": trace})
        deadline = self._deadline(options.get("signal"), options.get("timeout"))
        if deadline is not None:
            run["signal"] = deadline.signal
        try:
            result: RunResult = await self._interp.run(agent, messages, **run)
        finally:
            if deadline is not None:
                deadline.disarm()
        return SimRun(result, trace, self.clock.now)

    @staticmethod
    async def replay(
        journal: Journal,
        agent: Agent,
        *,
        observers: Sequence[Observer] = (),
        price: Pricer | None = None,
        deps: object = None,
    ) -> ReplayRun:
        """`Simulator.replay` under async code: async hooks are awaited."""
        return await replay_async(journal, agent, observers=observers, price=price,
                                  deps=deps)

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
        self.routes.note(agent.model)
        run = self._options(options)
        deadline = self._deadline(options.get("signal"), options.get("timeout"))
        if deadline is not None:
            run["signal"] = deadline.signal
        stream = self._interp.stream(agent, messages, **run)
        if deadline is not None:
            self._deadlines.streaming(deadline, lambda: stream.done)
        return stream

    def _options(self, options: RunOptions) -> RunOptions:
        """The options for the interpreter: a timeout in virtual seconds is this
        simulator's (`_deadline`), not the interpreter's."""
        run: RunOptions = {**options}
        if not self._real_sleep:
            run.pop("timeout", None)
        return run

    def _deadline(
        self, signal: CancelSignal | None, timeout: float | None
    ) -> VirtualDeadline | None:
        if self._real_sleep:
            return None  # with real sleeps, the interpreter's own (real-time) timeout
        return self._deadlines.start(signal, timeout)


__all__ = ["AsyncSimulator"]
