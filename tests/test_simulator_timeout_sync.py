"""`timeout=` on the sync `Simulator` counts virtual time, as on the `AsyncSimulator`: a
run with 100 s of scripted latency and `timeout=1` ends cancelled at virtual t=1 (and
costs no real time). `signal=` cancels as on the `SyncInterpreter`."""

from __future__ import annotations

import pytest

from interpreters.core.cancel import CancelSignal
from interpreters.testing import Fail, Say, ScriptedModel, Simulator
from pipeline.agent import Agent
from pipeline.values.chunks import ErrorChunk, TextDelta
from pipeline.values.result import Cancelled

START = 1_700_000_000.0


def test_latency_past_the_timeout_ends_the_run_at_the_deadline() -> None:
    run = Simulator(ScriptedModel([Say("late", latency=100.0)])).run(
        Agent.create("m"), "hi", timeout=1
    )
    assert run.result.status == "cancelled"
    assert run.result.error == Cancelled("timed out after 1 s")
    assert run.clock == START + 1
    assert run.result.text == ""


def test_a_stream_is_cut_between_chunks_at_the_deadline() -> None:
    sim = Simulator(ScriptedModel([Say(["a ", "b ", "c"], chunk_latency=0.4)]))
    with sim.stream(Agent.create("m"), "hi", timeout=1.0) as stream:
        chunks = list(stream)
    # text-start at 0, "a " at 0.4, "b " at 0.8, "c" would come at 1.2
    assert "".join(c.text for c in chunks if isinstance(c, TextDelta)) == "a b "
    assert chunks[-1] == ErrorChunk("Cancelled", "run cancelled: timed out after 1 s")
    assert stream.result.status == "cancelled"
    assert stream.result.text == "a b "
    assert stream.result.messages.messages[-1].incomplete
    assert sim.clock.now == START + 1


def test_retry_backoff_counts_against_the_timeout() -> None:
    model = ScriptedModel([Fail(status=429, retry_after=30.0), Say("ok")])
    run = Simulator(model).run(Agent.create("m"), "hi", timeout=5)
    assert run.result.error == Cancelled("timed out after 5 s")
    assert run.clock == START + 5
    assert len(model.requests) == 1


def test_a_run_within_its_timeout_is_untouched_and_later_runs_too() -> None:
    sim = Simulator(ScriptedModel([Say("fast", latency=0.5), Say("slow", latency=50.0)]))
    first = sim.run(Agent.create("m"), "hi", timeout=1)
    assert first.result.status == "finished"
    second = sim.run(Agent.create("m"), "hi")  # no timeout: the old one is gone
    assert second.result.status == "finished"
    assert second.clock == START + 50.5
    assert sim.clock.pending_alarms == 0


def test_the_callers_signal_cancels() -> None:
    signal = CancelSignal()
    signal.cancel("user left")
    model = ScriptedModel([Say("x", latency=3.0)])
    run = Simulator(model).run(Agent.create("m"), "hi", timeout=1, signal=signal)
    assert run.result.error == Cancelled("user left")
    assert model.requests == []


def test_a_zero_timeout_cancels_before_any_call() -> None:
    model = ScriptedModel([Say("x")])
    run = Simulator(model).run(Agent.create("m"), "hi", timeout=0)
    assert run.result.error == Cancelled("timed out after 0 s")
    assert model.requests == []


def test_an_invalid_timeout_is_refused() -> None:
    sim = Simulator(ScriptedModel([Say("x")]))
    with pytest.raises(ValueError, match="timeout"):
        sim.run(Agent.create("m"), "hi", timeout=-1)
    with pytest.raises(ValueError, match="timeout"):
        sim.stream(Agent.create("m"), "hi", timeout=float("nan"))


def test_deadlines_of_finished_streams_do_not_pile_up() -> None:
    sim = Simulator(ScriptedModel([Say("x")] * 50))
    for _ in range(50):
        with sim.stream(Agent.create("m"), "hi", timeout=5) as stream:
            for _c in stream:
                pass
    assert sim.clock.pending_alarms <= 1  # only the last stream's, at most


def test_a_hook_answer_that_comes_after_the_deadline_is_not_taken() -> None:
    # A stream judge (PIIDetector judge_stream, no step check) asked at t=0 answers at
    # t=100 > timeout: the run ends cancelled at t=1 without taking the late answer, so
    # the consumer and the result agree (nothing), as on the AsyncSimulator.
    from pipeline.processors import PIIDetector

    p = PIIDetector(judge_model="judge", judge_stream=True, on_result=False)
    judge = ScriptedModel([Say('{"values": []}', latency=100.0)])
    sim = Simulator(ScriptedModel([Say(["Dear Ada ", "Lovelace"])]), models={"judge": judge})
    run = sim.run(Agent.create("m", output_processors=[p]), "hi", timeout=1)
    assert run.result.error == Cancelled("timed out after 1 s")
    streamed = "".join(c.text for c in run.chunks if isinstance(c, TextDelta))
    assert streamed == run.result.text == ""
    assert [m.role for m in run.result.messages.messages] == ["user"]
    assert run.clock == START + 1
