"""What a newcomer runs into first: a tool given by name, a user message without an id,
a simulated run read as a result, an output hook in the input list, a run cancelled
from another thread. Each answers with a clear typed error, a warning, or just works."""

from __future__ import annotations

import threading
import warnings

import anyio
import pytest

from effects import Continue
from interpreters import AsyncInterpreter, CancelSignal
from interpreters.testing import AsyncSimulator, Say, ScriptedModel, Simulator
from pipeline import Agent
from pipeline.processor import (
    InputArgs,
    InputResult,
    OutputResultArgs,
    OutputResultResult,
    Processor,
    ProcessorPlacementWarning,
)
from pipeline.processors import PIIDetector
from pipeline.values.messages import user
from pipeline.values.result import RunResult


@pytest.mark.parametrize("bad", ["lookup", 3, None])
def test_a_tool_that_is_no_function_is_a_type_error_naming_it(bad: object) -> None:
    with pytest.raises(TypeError, match=repr(bad).replace("(", r"\(")) as e:
        Agent.create("openai/gpt-4o-mini", tools=[bad])  # type: ignore[list-item]
    assert "tool" in str(e.value)


def test_a_user_message_without_an_id_gets_a_fresh_one() -> None:
    a, b = user("hi"), user("hi")
    assert a.id and b.id and a.id != b.id
    assert user("hi", id="u1").id == "u1"  # an id given is kept: deterministic


def test_a_simulated_run_reads_as_the_result_an_interpreter_returns() -> None:
    agent = Agent.create("openai/gpt-4o-mini")
    run = Simulator(ScriptedModel([Say("Hello.")])).run(agent, "hi")
    result = run.result
    for name in (*RunResult.__struct_fields__, "judge_usage", "total_usage"):
        assert getattr(run, name) == getattr(result, name), name
    assert run.unwrap() is result and run.usage_by_agent() == result.usage_by_agent()
    assert run.text == "Hello." and run.status == "finished"


async def _async_run(agent: Agent) -> tuple[str, str]:
    sim = await AsyncSimulator(ScriptedModel([Say("Hi.")])).run(agent, "hi")
    real = await AsyncInterpreter(ScriptedModel([Say("Hi.")])).run(agent, "hi")
    return sim.text, real.text


def test_an_async_simulated_run_and_an_async_run_read_alike() -> None:
    agent = Agent.create("openai/gpt-4o-mini")
    assert anyio.run(_async_run, agent) == ("Hi.", "Hi.")


class Both(Processor):
    id = "both"

    def process_input(self, args: InputArgs[None]) -> InputResult[None]:
        return Continue()

    def process_output_result(self, args: OutputResultArgs[None]) -> OutputResultResult[None]:
        return Continue()


def test_an_output_hook_of_a_processor_in_the_input_list_only_is_warned_of() -> None:
    with pytest.warns(ProcessorPlacementWarning, match=r"'both'.*process_output_result"):
        Agent.create("openai/gpt-4o-mini", input_processors=[Both()])
    with pytest.warns(ProcessorPlacementWarning, match=r"'both'.*process_input"):
        Agent.create("openai/gpt-4o-mini", output_processors=[Both()])


def test_a_processor_in_both_lists_and_a_builtin_for_either_are_not_warned_of() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        both = Both()
        Agent.create("openai/gpt-4o-mini", input_processors=[both], output_processors=[both])
        Agent.create("openai/gpt-4o-mini", input_processors=[PIIDetector()])
        Agent.create("openai/gpt-4o-mini", output_processors=[PIIDetector()])


def test_a_signal_cancelled_from_another_thread_cancels_an_async_run() -> None:
    signal = CancelSignal()
    started = threading.Event()
    errors: list[BaseException] = []

    def slow(request: object) -> Say:
        return Say(["a"] * 10_000, chunk_latency=60.0)

    agent = Agent.create("openai/gpt-4o-mini")

    async def main() -> RunResult[object]:
        interp = AsyncInterpreter(ScriptedModel(slow, async_sleep=anyio.sleep))

        def other() -> None:
            started.wait(10)
            try:
                signal.cancel("stopped from a thread")
            except BaseException as e:  # what the thread would die of
                errors.append(e)

        thread = threading.Thread(target=other)
        thread.start()
        try:
            with anyio.fail_after(30):  # a safety net only
                async with interp.stream(agent, "hi", signal=signal) as stream:
                    async for _ in stream:
                        started.set()
                    return stream.result
        finally:
            started.set()
            await anyio.to_thread.run_sync(thread.join, 10)

    result = anyio.run(main)
    assert errors == []
    assert result.status == "cancelled"
    assert signal.reason == "stopped from a thread"
