"""`timeout=` on a simulator run counts virtual time: a run with 100 s of scripted
latency and `timeout=1` ends cancelled at virtual t=1 (and costs no real time)."""

from __future__ import annotations

import anyio
import pytest

from interpreters.core.cancel import CancelSignal
from interpreters.testing import AsyncSimulator, Fail, Say, ScriptedModel, VirtualClock
from pipeline.agent import Agent
from pipeline.values.chunks import ErrorChunk, TextDelta
from pipeline.values.result import Cancelled

pytestmark = pytest.mark.anyio
START = 1_700_000_000.0


async def test_latency_past_the_timeout_ends_the_run_at_the_deadline() -> None:
    sim = AsyncSimulator(ScriptedModel([Say("late", latency=100.0)]))
    with anyio.fail_after(10):  # a real-time guard only; nothing waits for real
        run = await sim.run(Agent.create("m"), "hi", timeout=1)
    assert run.result.status == "cancelled"
    assert run.result.error == Cancelled("timed out after 1 s")
    assert run.clock == START + 1
    assert run.result.text == ""


async def test_a_stream_is_cut_between_chunks_at_the_deadline() -> None:
    model = ScriptedModel([Say(["a ", "b ", "c"], chunk_latency=0.4)])
    sim = AsyncSimulator(model)
    chunks = []
    async with sim.stream(Agent.create("m"), "hi", timeout=1.0) as stream:
        async for c in stream:
            chunks.append(c)
    # text-start at 0, "a " at 0.4, "b " at 0.8, "c" would come at 1.2
    assert "".join(c.text for c in chunks if isinstance(c, TextDelta)) == "a b "
    assert chunks[-1] == ErrorChunk("Cancelled", "run cancelled: timed out after 1 s")
    assert stream.result.status == "cancelled"
    assert stream.result.messages.messages[-1].incomplete
    assert sim.clock.now == START + 1


async def test_retry_backoff_counts_against_the_timeout() -> None:
    model = ScriptedModel([Fail(status=429, retry_after=30.0), Say("ok")])
    run = await AsyncSimulator(model).run(Agent.create("m"), "hi", timeout=5)
    assert run.result.error == Cancelled("timed out after 5 s")
    assert run.clock == START + 5
    assert len(model.requests) == 1


async def test_a_run_within_its_timeout_is_untouched_and_later_runs_too() -> None:
    sim = AsyncSimulator(ScriptedModel([Say("fast", latency=0.5), Say("slow", latency=50.0)]))
    first = await sim.run(Agent.create("m"), "hi", timeout=1)
    assert first.result.status == "finished"
    second = await sim.run(Agent.create("m"), "hi")  # no timeout: the old one is gone
    assert second.result.status == "finished"
    assert second.clock == START + 50.5


async def test_the_callers_signal_still_cancels() -> None:
    signal = CancelSignal()
    signal.cancel("user left")
    sim = AsyncSimulator(ScriptedModel([Say("x", latency=3.0)]))
    run = await sim.run(Agent.create("m"), "hi", timeout=1, signal=signal)
    assert run.result.error == Cancelled("user left")


async def test_an_invalid_timeout_is_refused() -> None:
    sim = AsyncSimulator(ScriptedModel([Say("x")]))
    with pytest.raises(ValueError, match="timeout"):
        await sim.run(Agent.create("m"), "hi", timeout=-1)


def test_an_alarm_stops_the_clock_where_it_rings() -> None:
    clock = VirtualClock(10.0)
    rang: list[float] = []

    def ring() -> bool:
        rang.append(clock.now)
        return True

    handle = clock.alarm(12.0, ring)
    assert clock.advance(1.0) is False and clock.now == 11.0
    assert clock.advance(5.0) is True and clock.now == 12.0  # cut short, as a timeout does
    assert rang == [12.0]
    assert clock.advance(5.0) is False and clock.now == 17.0  # an alarm rings once
    clock.cancel_alarm(handle)  # cancelling a rung alarm is a no-op
    h2 = clock.alarm(20.0, ring)
    clock.cancel_alarm(h2)
    clock.sleep(10.0)
    assert clock.now == 27.0 and rang == [12.0]


async def test_with_real_sleeps_the_timeout_is_real_time() -> None:
    model = ScriptedModel([Say("x", latency=60.0)], async_sleep=anyio.sleep)
    sim = AsyncSimulator(model, real_sleep=True)
    with anyio.fail_after(10):
        run = await sim.run(Agent.create("m"), "hi", timeout=0.05)
    assert run.result.error == Cancelled("timed out after 0.05 s")


async def test_deadlines_of_finished_streams_do_not_pile_up() -> None:
    sim = AsyncSimulator(ScriptedModel([Say("x")] * 50))
    for _ in range(50):
        async with sim.stream(Agent.create("m"), "hi", timeout=5) as stream:
            async for _c in stream:
                pass
    assert sim.clock.pending_alarms <= 1  # only the last stream's, at most
