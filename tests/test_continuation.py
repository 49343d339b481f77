"""A run continued from an earlier run's `result.messages`."""

from __future__ import annotations

from effects import Abort, Continue
from interpreters.testing import Say, ScriptedModel, Simulator
from pipeline import (
    Agent,
    OutputResultArgs,
    OutputResultResult,
    Processor,
    user,
)


class BlockSecond(Processor):
    """Blocks the second answer; records the response messages it was shown."""

    id = "block-second"

    def __init__(self) -> None:
        self.shown: list[list[str]] = []

    def process_output_result(self, args: OutputResultArgs[None]) -> OutputResultResult[None]:
        self.shown.append([m.text for m in args.messages])
        return Abort("no") if "Second" in args.result.text else Continue()


def test_the_earlier_answer_is_memory_not_this_runs_response() -> None:
    guard = BlockSecond()
    agent = Agent.create("m", instructions="be brief", output_processors=[guard])
    sim = Simulator(ScriptedModel([Say("First answer."), Say("Second answer.")]))
    first = sim.run(agent, "one").result
    assert first.status == "finished" and first.text == "First answer."

    history = first.messages.add(user("two", id="u2"))
    second = sim.run(agent, history).result
    # This run's text and response are its own; the earlier answer is kept as memory.
    assert guard.shown == [["First answer."], ["Second answer."]]
    assert second.status == "tripped"
    assert [m.text for m in second.messages.messages] == ["one", "First answer.", "two"]
    assert second.messages.sources == ("input", "memory", "input")
    assert [s.content for s in second.messages.system] == ["be brief"]  # not doubled
