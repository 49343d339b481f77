"""Virtual time under the async simulator jumps: every wait made through it (its `sleep`,
scripted latency, retry backoff, a run's `timeout`) ends as soon as every task waits,
with the clock at the wake time, in virtual-time order, on asyncio and on trio.

The `fail_after` caps are safety nets only: a real wait of a minute would trip them.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import pytest

from interpreters.sim.clock import until_idle
from interpreters.sim.simulator import Scripted
from interpreters.testing import (
    AsyncSimulator,
    Fail,
    Say,
    ScriptedModel,
    SimRun,
    VirtualClock,
    call,
)
from pipeline.agent import Agent
from pipeline.tools import make_tool
from pipeline.values.model import ModelRequest
from pipeline.values.result import Cancelled

pytestmark = pytest.mark.anyio
START = 1_700_000_000.0
CAP = 10  # seconds of real time, a safety net


async def together(*tasks: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run `tasks` concurrently to their end (under the cap)."""
    with anyio.fail_after(CAP):
        async with anyio.create_task_group() as tg:
            for task in tasks:
                tg.start_soon(task)


async def test_a_minute_of_latency_and_two_backoffs_pass_in_virtual_time() -> None:
    called: list[float] = []
    script: list[Scripted] = [Fail(status=503, retry_after=20.0, latency=1.0),
              Fail(status=429, retry_after=30.0), Say("ok", latency=60.0)]
    sim: AsyncSimulator

    def answer(request: ModelRequest) -> Scripted:
        called.append(sim.clock.now - START)
        return script[len(called) - 1]

    sim = AsyncSimulator(ScriptedModel(answer))
    with anyio.fail_after(CAP):
        run = await sim.run(Agent.create("m"), "hi")
    assert run.result.text == "ok"
    # call 1 at 0 (1 s latency, then 20 s backoff), call 2 at 21 (30 s), call 3 at 51 (60 s)
    assert called == [0.0, 21.0, 51.0]
    assert run.clock == START + 111.0
    assert sim.clock.waiting == 0


async def test_concurrent_tools_wake_in_virtual_time_order() -> None:
    woke: list[tuple[str, float]] = []
    sim: AsyncSimulator

    async def nap(name: str, seconds: float) -> str:
        """Sleeps `seconds` of virtual time."""
        await sim.sleep(seconds)
        woke.append((name, sim.clock.now - START))
        return name

    sim = AsyncSimulator(ScriptedModel([
        Say(calls=[call("nap", name=n, seconds=s) for n, s in (("a", 3.0), ("b", 1.0),
                                                                ("c", 2.0), ("d", 1.5))]),
        Say("done"),
    ]))
    with anyio.fail_after(CAP):
        run = await sim.run(Agent.create("m", tools=[make_tool(nap)]), "go")
    assert woke == [("b", 1.0), ("d", 1.5), ("c", 2.0), ("a", 3.0)]
    assert run.clock == START + 3.0  # the naps overlap: the longest, not their sum
    assert [r.result for r in run.result.steps[0].tool_results] == ["a", "b", "c", "d"]


async def test_concurrent_runs_share_virtual_time() -> None:
    sim = AsyncSimulator(ScriptedModel([Say("x", latency=10.0)]),
                         models={"n": ScriptedModel([Say("y", latency=4.0)])})
    runs: dict[str, SimRun] = {}

    async def one(model: str) -> None:
        runs[model] = await sim.run(Agent.create(model), "hi")

    await together(lambda: one("m"), lambda: one("n"))
    assert (runs["m"].clock, runs["n"].clock) == (START + 10.0, START + 4.0)


async def test_a_runs_timeout_fires_at_its_virtual_instant_beside_another_run() -> None:
    sim = AsyncSimulator(ScriptedModel([Say("late", latency=60.0)]),
                         models={"n": ScriptedModel([Say("on time", latency=10.0)])})
    runs: dict[str, SimRun] = {}

    async def one(model: str, timeout: float | None) -> None:
        agent = Agent.create(model)
        if timeout is None:
            runs[model] = await sim.run(agent, "hi")
        else:
            runs[model] = await sim.run(agent, "hi", timeout=timeout)

    await together(lambda: one("m", 5.0), lambda: one("n", None))
    assert runs["m"].result.error == Cancelled("timed out after 5 s")
    assert runs["m"].clock == START + 5.0
    assert runs["n"].result.text == "on time"
    assert runs["n"].clock == START + 10.0
    assert sim.clock.waiting == 0 and sim.clock.pending_alarms == 0


async def test_a_timeout_cuts_a_tools_virtual_sleep_at_its_instant() -> None:
    sim: AsyncSimulator
    after: list[float] = []

    async def nap() -> str:
        """Sleeps a virtual day."""
        await sim.sleep(86_400.0)
        after.append(sim.clock.now)
        return "rested"

    sim = AsyncSimulator(ScriptedModel([Say(calls=[call("nap")], latency=2.0), Say("done")]))
    with anyio.fail_after(CAP):
        run = await sim.run(Agent.create("m", tools=[make_tool(nap)]), "go", timeout=7)
    assert run.result.error == Cancelled("timed out after 7 s")
    assert run.clock == START + 7.0
    assert after == []


async def test_waits_ending_at_the_same_instant_end_in_the_order_they_began() -> None:
    clock = VirtualClock(START)
    seen: list[tuple[str, float]] = []

    async def waits(name: str, seconds: float, *, task_status: anyio.abc.TaskStatus[None]
                    ) -> None:
        task_status.started()
        await clock.wait(seconds)  # (registered before this task first yields)
        seen.append((name, clock.now))

    with anyio.fail_after(CAP):
        async with anyio.create_task_group() as tg:
            for name, seconds in (("p", 2.0), ("q", 1.0), ("r", 2.0), ("s", 1.0)):
                await tg.start(waits, name, seconds)
    assert seen == [("q", START + 1), ("s", START + 1), ("p", START + 2), ("r", START + 2)]


async def test_the_clock_waits_while_another_task_can_run() -> None:
    clock = VirtualClock(START)
    seen: list[tuple[str, float]] = []

    async def busy() -> None:
        for _ in range(50):  # runnable throughout: virtual time must not pass meanwhile
            await anyio.lowlevel.checkpoint()
        seen.append(("busy done", clock.now))

    async def sleeper() -> None:
        await clock.wait(1.0)
        seen.append(("woke", clock.now))

    await together(sleeper, busy)
    assert seen == [("busy done", START), ("woke", START + 1.0)]


async def test_a_cancelled_wait_leaves_the_others_to_wake() -> None:
    clock = VirtualClock(START)
    seen: list[tuple[str, float]] = []
    scope = anyio.CancelScope()

    async def cancelled() -> None:
        with scope:
            await clock.wait(5.0)  # (it may be the wait that watches the clock)
            seen.append(("not reached", clock.now))

    async def canceller() -> None:
        await clock.wait(1.0)
        scope.cancel()
        seen.append(("cancelled it", clock.now))

    async def later() -> None:
        await clock.wait(10.0)
        seen.append(("later", clock.now))

    await together(cancelled, canceller, later)
    assert seen == [("cancelled it", START + 1.0), ("later", START + 10.0)]
    assert clock.waiting == 0


async def test_a_wait_of_zero_or_less_is_a_checkpoint() -> None:
    clock = VirtualClock(START)
    await clock.wait(0.0)
    await clock.wait(-3.0)
    await clock.wait(float("nan"))
    assert clock.now == START and clock.waiting == 0


async def test_two_clocks_jump_side_by_side() -> None:
    """Two simulators' clocks in one event loop each wait for the other's tasks too."""
    clocks = (VirtualClock(START), VirtualClock(START))
    seen: list[tuple[int, float]] = []

    async def waits(which: int, seconds: float) -> None:
        await clocks[which].wait(seconds)
        seen.append((which, clocks[which].now - START))

    await together(lambda: waits(0, 2.0), lambda: waits(1, 3.0), lambda: waits(0, 5.0))
    assert sorted(seen) == [(0, 2.0), (0, 5.0), (1, 3.0)]
    assert [w for w, _ in seen if w == 0] == [0, 0]


async def test_tasks_waiting_for_idleness_together_all_get_it() -> None:
    done: list[str] = []

    async def idle(name: str) -> None:
        await until_idle()
        done.append(name)

    await together(lambda: idle("a"), lambda: idle("b"), lambda: idle("c"))
    assert sorted(done) == ["a", "b", "c"]


async def test_a_runs_timeout_comes_also_when_nothing_of_the_run_waits_on_the_clock() -> None:
    never = anyio.Event()

    async def stuck() -> str:
        """Waits on an event nobody sets (not on the clock)."""
        await never.wait()
        return "never"

    sim = AsyncSimulator(ScriptedModel([Say(calls=[call("stuck")], latency=1.0), Say("x")]))
    with anyio.fail_after(CAP):
        run = await sim.run(Agent.create("m", tools=[make_tool(stuck)]), "go", timeout=30)
    assert run.result.error == Cancelled("timed out after 30 s")
    assert run.clock == START + 30.0
    assert sim.clock.waiting == 0 and sim.clock.pending_alarms == 0
