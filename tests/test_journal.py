"""Record a run to a journal and replay it offline (interpreters.journal)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from effects import Continue, Replace
from examples.quality_guardrail import QualityGuardrail
from interpreters import AsyncSimulator, CancelSignal, Fail, Say, ScriptedModel, Simulator, call
from interpreters.journal import (
    CancelledAt,
    ClockRead,
    Journal,
    JournalError,
    ModelReplied,
    Recorder,
    ToolsDone,
)
from pipeline import Agent, OutputStepArgs, OutputStepResult, Processor, StreamArgs, TextDelta
from pipeline.processor import StreamResult

KEY = "sk-test-0123456789abcdefSECRET"


def weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


def broken(city: str) -> str:
    """A tool that fails."""
    raise RuntimeError("backend down")


def agent(*extra: Processor) -> Agent:
    return Agent.create(
        "openai/gpt-4o-mini",
        instructions="Be brief.",
        tools=[weather, broken],
        output_processors=[QualityGuardrail("judge", threshold=0.5), *extra],
        max_processor_retries=2,
    )


def script() -> ScriptedModel:
    return ScriptedModel([
        Fail(status=429, retry_after=1.5),
        Say(calls=[call("weather", city="Paris"), call("broken", city="x")]),
        Say("Meh."),                                        # the judge says 0.1: retried
        Say(["It is sunny ", "in Paris today."]),
    ])


def judge() -> ScriptedModel:
    return ScriptedModel([Say("0.1"), Say("0.9")])


def recorded(*extra: Processor) -> tuple[Recorder, Simulator]:
    rec = Recorder()
    sim = Simulator(script(), models={"judge": judge()}, observers=[rec])
    return rec, sim


def test_a_recorded_run_replays_to_the_same_result_and_trace() -> None:
    rec, sim = recorded()
    run = sim.run(agent(), "Weather in Paris?")
    assert run.result.status == "finished"
    assert run.result.retry_count == 1
    journal = rec.last()
    replay = Simulator.replay(journal, agent())
    assert replay.result == run.result
    assert replay.trace.comparable() == run.trace.comparable()
    assert replay.divergence is None
    assert replay.result_matches and replay.identical


def test_the_journal_holds_what_the_loop_was_fed() -> None:
    rec, sim = recorded()
    sim.run(agent(), "Weather in Paris?")
    j = rec.last()
    kinds = [type(e).__name__ for e in j.entries]
    assert kinds[0] == "RunStarted" and kinds[-1] == "RunEnded"
    assert j.header.agent.processors == ("quality-guardrail",)
    assert any(isinstance(e, ClockRead) for e in j.entries)
    tools = [e for e in j.entries if isinstance(e, ToolsDone)]
    assert [(o.result, o.is_error) for o in tools[0].outcomes] == [
        ("sunny in Paris", False), ("RuntimeError: backend down", True)
    ]
    firsts = [e for e in j.entries if isinstance(e, ModelReplied) and e.first]
    assert len(firsts) == 4  # the 429, then three responses
    assert [c.kind for c in j.commands()][:3] == ["publish", "call-model", "sleep"]


def test_the_journal_survives_ndjson_and_a_file(tmp_path: Path) -> None:
    rec = Recorder(tmp_path)
    sim = Simulator(script(), models={"judge": judge()}, observers=[rec])
    run = sim.run(agent(), "Weather in Paris?")
    path = rec.path("run1")
    lines = path.read_bytes().splitlines()
    assert len(lines) == len(Journal.read(path).entries) > 10
    again = Journal.from_ndjson(Journal.read(path).to_ndjson())
    assert Simulator.replay(again, agent()).result == run.result


def test_a_changed_agent_runs_on_the_recorded_output_and_says_where_it_diverges() -> None:
    rec, sim = recorded()
    sim.run(agent(), "Weather in Paris?")

    class Shout(Processor):
        id = "shout"

        def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
            if isinstance(args.part, TextDelta):
                return Replace(TextDelta(args.part.id, args.part.text.upper()))
            return Continue()

    replay = Simulator.replay(rec.last(), agent(Shout()))
    assert replay.result.text == "IT IS SUNNY IN PARIS TODAY."
    assert replay.divergence is not None
    assert not replay.identical
    assert "pull" in replay.divergence.expected
    first_text = next(
        i for i, c in enumerate(replay.trace.commands) if "TextDelta" in repr(c)
    )
    assert replay.divergence.index == first_text


def test_a_new_guard_that_blocks_ends_the_replay_early_and_diverges() -> None:
    rec, sim = recorded()
    sim.run(agent(), "Weather in Paris?")

    class Block(Processor):
        id = "block"

        def process_output_step(self, args: OutputStepArgs[None]) -> OutputStepResult[None]:
            if "sunny" in args.text:
                from pipeline import abort

                abort("no weather talk")
            return Continue()

    replay = Simulator.replay(rec.last(), agent(Block()))
    assert replay.result.status == "tripped"
    assert replay.result.tripwire is not None
    assert replay.result.tripwire.processor_id == "block"
    assert replay.divergence is not None


def test_a_journal_never_holds_an_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)

    def leaky(city: str) -> str:
        """Echoes a key, as a careless tool might."""
        return f"token={KEY} other=sk-given-by-caller-123"

    rec = Recorder(secrets=["sk-given-by-caller-123"])
    a = Agent.create("openai/gpt-4o-mini", tools=[leaky])
    Simulator(ScriptedModel([Say(calls=[call("leaky", city="x")]), Say("ok")]),
              observers=[rec]).run(a, f"my key is {KEY}")
    data = rec.last().to_ndjson()
    assert KEY.encode() not in data
    assert b"sk-given-by-caller-123" not in data
    assert b"[redacted]" in data


def test_a_cancelled_async_run_replays_to_the_same_cancel() -> None:
    rec = Recorder()
    signal = CancelSignal()

    async def stop(city: str) -> str:
        """Cancels the run from inside a tool."""
        signal.cancel("enough")
        await anyio.sleep(5)
        return "ok"

    a = Agent.create("m", tools=[stop])
    model = ScriptedModel([Say("a", calls=[call("stop", city="x")]), Say("never")])

    async def main() -> None:
        run = await AsyncSimulator(model, observers=[rec]).run(a, "go", signal=signal)
        assert run.result.status == "cancelled"
        j = rec.last()
        assert any(isinstance(e, CancelledAt) for e in j.entries)
        replay = await AsyncSimulator.replay(j, a)
        assert replay.result == run.result
        assert replay.trace.comparable() == run.trace.comparable()
        assert replay.identical

    anyio.run(main)


def test_a_replay_asks_for_more_than_the_journal_holds() -> None:
    rec = Recorder()
    Simulator(ScriptedModel([Say("ok")]), observers=[rec]).run(Agent.create("m"), "hi")

    class Again(Processor):
        id = "again"

        def process_output_step(self, args: OutputStepArgs[None]) -> OutputStepResult[None]:
            from pipeline import abort

            abort("more", retry=True)

    replay = Simulator.replay(rec.last(), Agent.create("m", output_processors=[Again()],
                                                       max_processor_retries=1))
    assert replay.result.status == "failed"
    assert "journal holds no more model calls" in str(replay.result.error)
    assert replay.divergence is not None


def test_bad_journals_are_a_typed_error() -> None:
    with pytest.raises(JournalError):
        Journal.from_ndjson(b'{"t": "clock", "value": 1.0}\n')
    with pytest.raises(JournalError):
        Journal.from_ndjson(b"not json\n")


def shouting_agent() -> Agent:
    """`agent()` with one more processor (for the CLI's divergence test)."""

    class Shout(Processor):
        id = "shout"

        def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
            if isinstance(args.part, TextDelta):
                return Replace(TextDelta(args.part.id, args.part.text.upper()))
            return Continue()

    return agent(Shout())


def test_pipeline_replay_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from interpreters.cli import main

    rec = Recorder(tmp_path)
    Simulator(script(), models={"judge": judge()}, observers=[rec]).run(agent(), "Weather?")
    path = str(rec.path("run1"))

    assert main(["replay", path, "--agent", "tests.test_journal:agent"]) == 0
    out, err = capsys.readouterr()
    assert out == "Meh.It is sunny in Paris today.\n"  # streamed as recorded, the retry too
    assert "identical to the recording" in err

    assert main(["replay", path, "--agent", "tests.test_journal:shouting_agent"]) == 1
    out, err = capsys.readouterr()
    assert out == "MEH.IT IS SUNNY IN PARIS TODAY.\n"
    assert "diverges from the recording at command #" in err

    assert main(["replay", path]) == 0
    out, err = capsys.readouterr()
    assert "call openai/gpt-4o-mini (step 0, attempt 0, 1 messages)" in out
    assert "give --agent" in err

    assert main(["replay", path, "--agent", "tests.test_journal:KEY"]) == 2
    assert "not an Agent" in capsys.readouterr().err
    assert main(["replay", str(tmp_path / "missing.ndjson")]) == 2


def test_async_hooks_run_again_in_an_async_replay() -> None:
    class Slow(Processor):
        id = "slow"

        async def process_output_step(
            self, args: OutputStepArgs[None]
        ) -> OutputStepResult[None]:
            await anyio.sleep(0)
            return Continue()

    a = Agent.create("m", output_processors=[Slow()])
    rec = Recorder()

    async def main() -> None:
        run = await AsyncSimulator(ScriptedModel([Say("hello")]), observers=[rec]).run(a, "hi")
        replay = await AsyncSimulator.replay(rec.last(), a)
        assert replay.identical and replay.result == run.result
        assert replay.trace.comparable() == run.trace.comparable()

    anyio.run(main)
    from interpreters import AsyncNotSupportedError

    with pytest.raises(AsyncNotSupportedError):
        Simulator.replay(rec.last(), a)


def test_a_recorder_shared_by_two_simulators_keeps_each_run_whole() -> None:
    rec = Recorder()
    Simulator(ScriptedModel([Say("one")]), observers=[rec]).run(Agent.create("m"), "a")
    Simulator(ScriptedModel([Say("two")]), observers=[rec]).run(Agent.create("m"), "b")
    j = rec.journal("run1")
    assert len([e for e in j.entries if isinstance(e, type(j.header))]) == 1
    assert Simulator.replay(j, Agent.create("m")).result.text == "two"


def test_a_journal_of_another_version_is_refused() -> None:
    rec = Recorder()
    Simulator(ScriptedModel([Say("one")]), observers=[rec]).run(Agent.create("m"), "a")
    data = rec.last().to_ndjson().replace(b'"version":1', b'"version":99', 1)
    with pytest.raises(JournalError, match="version 99"):
        Journal.from_ndjson(data)


def test_an_in_memory_recorder_keeps_the_last_runs_only() -> None:
    rec = Recorder(keep=2)
    sim = Simulator(ScriptedModel([Say("x")] * 3), observers=[rec])
    for _ in range(3):
        sim.run(Agent.create("m"), "a")
    with pytest.raises(KeyError):
        rec.journal("run1")
    assert rec.journal("run2").header.run_id == "run2"
    assert rec.last().header.run_id == "run3"
    with pytest.raises(ValueError):
        Recorder(keep=0)
