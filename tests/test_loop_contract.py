"""The loop's side of the contract: abort reasons, hooks returning None,
the simulator's routing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from effects import Abort, Continue, Out, Replace, Retry
from interpreters.sync import SyncInterpreter
from interpreters.testing import AsyncSimulator, Fail, Say, ScriptedModel, Simulator, call
from pipeline.processor import (
    ApiErrorArgs,
    ApiErrorResult,
    FunctionProcessor,
    HookName,
    InputArgs,
    InputResult,
    InputStepArgs,
    InputStepResult,
    OutputResultArgs,
    OutputResultResult,
    OutputStepArgs,
    OutputStepResult,
    StepChange,
    StreamArgs,
    StreamResult,
    abort,
    processor,
)
from pipeline.tools import tool
from pipeline.values.chunks import DataChunk, ModelEvent, ModelFinish, TextDelta, TextEnd, TextStart
from pipeline.values.messages import (
    INSTRUCTIONS_TAG,
    DataPart,
    Message,
    MessageList,
    SystemMessage,
    ToolCallPart,
    user,
)
from pipeline.values.model import ModelRequest
from pipeline.values.pairing import is_paired
from pipeline.values.result import ProcessorFailed
from tests.helpers import data_chunks, make_agent, simulate


@tool(name="echo")
def _echo(text: str) -> str:
    """Echo."""
    return text


def _numbered(args: InputStepArgs[None]) -> InputStepResult[None]:
    return Out(Continue(), None, (DataChunk("data-step", args.step_number),))

# --- 1. abort() without a reason names the processor --------------------------------


def _bare_abort(args: object) -> Any:
    abort()


def _one_hook(id: str, hook: HookName, fn: Any) -> FunctionProcessor[None]:
    return FunctionProcessor(id, None, {hook: fn})


@pytest.mark.parametrize("hook", ["process_input", "process_input_step"])
def test_abort_without_reason_names_the_processor(hook: HookName) -> None:
    agent = make_agent(input_processors=[_one_hook("gate", hook, _bare_abort)])
    ran = simulate(agent, [Say("never")])
    assert ran.result.status == "tripped"
    assert ran.result.tripwire is not None
    assert ran.result.tripwire.reason == "Tripwire triggered by gate"
    assert ran.result.tripwire.processor_id == "gate"


def test_abort_effect_without_reason_names_the_processor() -> None:
    def stream(args: StreamArgs[None]) -> Abort:
        return Abort()

    agent = make_agent(output_processors=[processor("censor", process_output_stream=stream)])
    ran = simulate(agent, [Say("hello")])
    assert ran.result.tripwire is not None
    assert ran.result.tripwire.reason == "Tripwire triggered by censor"
    assert ran.types[-1] == "tripwire"


def test_abort_retry_without_reason_gives_the_same_feedback() -> None:
    seen: list[int] = []

    def step(args: OutputStepArgs[None]) -> Continue:
        seen.append(args.retry_count)
        if args.retry_count == 0:
            abort(retry=True)
        return Continue()

    agent = make_agent(output_processors=[processor("judge", process_output_step=step)])
    ran = simulate(agent, [Say("one"), Say("two")])
    assert ran.result.status == "finished"
    assert ran.requests[1].messages[-1].text == "Tripwire triggered by judge"


def test_an_explicit_reason_is_kept() -> None:
    def gate(args: InputArgs[None]) -> Continue:
        abort("no, thanks")

    ran = simulate(make_agent(input_processors=[processor("gate", process_input=gate)]), [])
    assert ran.result.tripwire is not None and ran.result.tripwire.reason == "no, thanks"


# --- 10. a hook returning None says what to return ----------------------------------------


def _none(args: object) -> Any:
    return None


@pytest.mark.parametrize(
    "where, hook",
    [
        ("input", "process_input"),
        ("input", "process_input_step"),
        ("output", "process_output_stream"),
        ("output", "process_output_step"),
        ("output", "process_output_result"),
    ],
)
def test_a_hook_returning_none_says_return_continue(where: str, hook: HookName) -> None:
    agent = make_agent(**{f"{where}_processors": [_one_hook("forgetful", hook, _none)]})
    ran = simulate(agent, [Say("hello")])
    assert ran.result.status == "failed"
    err = ran.result.error
    assert isinstance(err, ProcessorFailed)
    assert (err.processor_id, err.hook) == ("forgetful", hook)
    assert "returned None" in err.message
    assert "return Continue() to change nothing" in err.message


# --- 9. the simulator's routing -------------------------------------------------------


def _switch_to(model_id: str) -> Any:
    def step(args: InputStepArgs[None]) -> InputStepResult[None]:
        return Replace(StepChange(model=model_id))

    return processor("switch", process_input_step=step)


def test_simulator_refuses_a_model_id_it_does_not_know() -> None:
    main, strong = ScriptedModel([Say("main")]), ScriptedModel([Say("strong")])
    agent = make_agent(input_processors=[_switch_to("strnog")])
    run = Simulator(main, models={"strong": strong}).run(agent, "hi")
    assert run.result.status == "failed"
    assert "strnog" in str(run.result.error)
    assert main.requests == [] and strong.requests == []


def test_simulator_serves_the_agents_own_model_and_the_named_ones() -> None:
    main, strong = ScriptedModel([Say("main")]), ScriptedModel([Say("strong")])
    sim = Simulator(main, models={"strong": strong})
    assert sim.run(make_agent(), "hi").result.text == "main"
    assert sim.run(make_agent(input_processors=[_switch_to("strong")]), "hi").result.text == (
        "strong")


def test_simulator_with_an_explicit_default_serves_any_id() -> None:
    main, fallback = ScriptedModel([]), ScriptedModel([Say("fallback")])
    sim = Simulator(main, models={"strong": ScriptedModel([])}, default=fallback)
    run = sim.run(make_agent(input_processors=[_switch_to("anything")]), "hi")
    assert run.result.text == "fallback"


def test_simulator_without_models_serves_every_id_with_its_model() -> None:
    main = ScriptedModel([Say("main")])
    run = Simulator(main).run(make_agent(input_processors=[_switch_to("whatever")]), "hi")
    assert run.result.text == "main"


@pytest.mark.anyio
async def test_async_simulator_refuses_a_model_id_it_does_not_know(anyio_backend: str) -> None:
    main, strong = ScriptedModel([Say("main")]), ScriptedModel([Say("strong")])
    agent = make_agent(input_processors=[_switch_to("strnog")])
    run = await AsyncSimulator(main, models={"strong": strong}).run(agent, "hi")
    assert run.result.status == "failed"
    assert "strnog" in str(run.result.error)
    fallback = ScriptedModel([Say("fallback")])
    sim = AsyncSimulator(main, models={"strong": strong}, default=fallback)
    assert (await sim.run(agent, "hi")).result.text == "fallback"


# --- 2. instructions beside the caller's system messages -----------------------------------


def _contents(system: tuple[SystemMessage, ...]) -> list[str]:
    return [s.content for s in system]


def test_instructions_apply_beside_the_callers_system_messages() -> None:
    seen: list[tuple[SystemMessage, ...]] = []

    def look(args: InputArgs[None]) -> Continue:
        seen.append(args.system_messages)
        return Continue()

    agent = make_agent(instructions="be brief",
                       input_processors=[processor("look", process_input=look)])
    given = MessageList.of([user("hi", id="u1")], system=["answer in French"])
    ran = simulate(agent, [Say("Salut.")], given)
    assert _contents(ran.requests[0].system) == ["be brief", "answer in French"]
    assert _contents(seen[0]) == ["be brief", "answer in French"]
    assert ran.requests[0].system[0].tag == INSTRUCTIONS_TAG
    assert ran.requests[0].system[1].tag is None


def test_a_continued_conversation_does_not_double_the_instructions() -> None:
    agent = make_agent(instructions="be brief")
    sim = Simulator(ScriptedModel([Say("First."), Say("Second."), Say("Third.")]))
    given = MessageList.of([user("one", id="u1")], system=["answer in French"])
    first = sim.run(agent, given).result
    second = sim.run(agent, first.messages.add(user("two", id="u2"))).result
    third = sim.run(agent, second.messages.add(user("three", id="u3"))).result
    for r in (first, second, third):
        assert _contents(r.messages.system) == ["be brief", "answer in French"]
    assert sim.model.requests[2].system == first.messages.system


def test_another_agent_continuing_brings_its_own_instructions() -> None:
    sim = Simulator(ScriptedModel([Say("First."), Say("Second.")]))
    first = sim.run(make_agent(instructions="be brief"), "one").result
    other = make_agent(instructions="be thorough")
    second = sim.run(other, first.messages.add(user("two", id="u2"))).result
    assert _contents(second.messages.system) == ["be thorough"]


def test_tagged_instructions_keep_their_own_tag_and_are_not_doubled() -> None:
    agent = make_agent(instructions=[SystemMessage("persona", tag="persona"), "be brief"])
    sim = Simulator(ScriptedModel([Say("First."), Say("Second.")]))
    first = sim.run(agent, "one").result
    second = sim.run(agent, first.messages.add(user("two", id="u2"))).result
    assert [(s.content, s.tag) for s in second.messages.system] == [
        ("persona", "persona"), ("be brief", INSTRUCTIONS_TAG)]


def test_with_messages_replaces_the_messages_and_keeps_the_system_ones() -> None:
    def trim(args: InputArgs[None]) -> InputResult[None]:
        return Replace(args.message_list.with_messages(args.messages[-1:]))

    agent = make_agent(instructions="be brief",
                       input_processors=[processor("trim", process_input=trim)])
    given = MessageList.of([user("old", id="u0"), user("new", id="u1")], system=["French"])
    ran = simulate(agent, [Say("ok")], given)
    req = ran.requests[0]
    assert [m.text for m in req.messages] == ["new"]
    assert _contents(req.system) == ["be brief", "French"]
    assert ran.result.messages.sources == ("input", "response")


def test_replace_with_a_bare_message_list_replaces_the_system_messages_too() -> None:
    # Documented: a MessageList is the whole conversation, system messages included.
    def swap(args: InputArgs[None]) -> InputResult[None]:
        return Replace(MessageList.of(args.messages, system=["only this"]))

    agent = make_agent(instructions="be brief",
                       input_processors=[processor("swap", process_input=swap)])
    ran = simulate(agent, [Say("ok")])
    assert _contents(ran.requests[0].system) == ["only this"]


# --- 3. emitted data is kept, from every hook ----------------------------------------------


def _data_parts(messages: tuple[Message, ...]) -> list[tuple[str, object]]:
    return [(p.name, p.data) for m in messages for p in m.parts if isinstance(p, DataPart)]


def _emitter(name: str, transient: bool = False) -> Any:
    def hook(args: Any) -> Any:
        return Out(Continue(), emit=(DataChunk(f"data-{name}", name, transient=transient),))
    return hook


def test_data_emitted_from_every_hook_is_kept_unless_transient() -> None:
    agent = make_agent(
        input_processors=[
            processor("in", process_input=_emitter("input")),
            processor("step", process_input_step=_emitter("input-step")),
            processor("quiet", process_input_step=_emitter("ping", transient=True)),
        ],
        output_processors=[
            processor("out-step", process_output_step=_emitter("output-step")),
            processor("result", process_output_result=_emitter("output-result")),
        ],
    )
    ran = simulate(agent, [Say("hello")])
    assert ran.result.status == "finished"
    streamed = [d.name for d in data_chunks(ran.chunks)]
    assert streamed == ["data-input", "data-input-step", "data-ping", "data-output-step",
                        "data-output-result"]
    kept = _data_parts(ran.result.messages.messages)
    assert kept == [("data-input", "input"), ("data-input-step", "input-step"),
                    ("data-output-step", "output-step"), ("data-output-result", "output-result")]
    # kept in this run's answer, which still reads as before
    assert ran.result.text == "hello"
    answer = ran.result.messages.messages[-1]
    assert answer.role == "assistant" and ran.result.messages.sources[-1] == "response"


def test_kept_data_goes_with_the_step_it_belongs_to() -> None:
    agent = make_agent(
        tools=[_echo],
        input_processors=[processor("step", process_input_step=_numbered)],
    )
    ran = simulate(agent, [Say(calls=[call("echo", text="a")]), Say("done")])
    assert ran.result.status == "finished"
    assistants = [m for m in ran.result.messages.messages if m.role == "assistant"]
    assert [_data_parts((m,)) for m in assistants] == [
        [("data-step", 0)], [("data-step", 1)]]
    assert is_paired(ran.result.messages.messages)
    # and the model was never sent them as something it must answer
    assert is_paired(ran.requests[1].messages)


def test_data_emitted_from_an_api_error_hook_is_kept() -> None:
    def fix(args: ApiErrorArgs[None]) -> ApiErrorResult[None]:
        return Out(Retry(), emit=(DataChunk("data-fixed", 1),))

    agent = make_agent(error_processors=[processor("fix", process_api_error=fix)])
    ran = simulate(agent, [Fail(status=400), Say("ok")])
    assert ran.result.status == "finished"
    assert _data_parts(ran.result.messages.messages) == [("data-fixed", 1)]


def test_data_emitted_when_nothing_was_answered_is_still_kept() -> None:
    def gate(args: InputArgs[None]) -> InputResult[None]:
        return Out(Abort("no"), emit=(DataChunk("data-why", "blocked"),))

    ran = simulate(make_agent(input_processors=[processor("gate", process_input=gate)]), [])
    assert ran.result.status == "tripped"
    assert _data_parts(ran.result.messages.messages) == [("data-why", "blocked")]
    assert ran.result.text == ""


def test_out_with_emit_only_keeps_the_state() -> None:
    final: list[int] = []

    def count(args: StreamArgs[int]) -> StreamResult[int]:
        return Out(Continue(), args.state + 1)

    def note(args: OutputStepArgs[int]) -> OutputStepResult[int]:
        return Out(Continue(), emit=(DataChunk("data-n", args.state, transient=True),))

    def done(args: OutputResultArgs[int]) -> OutputResultResult[int]:
        final.append(args.state)
        return Continue()

    p = processor("p", state=0, process_output_stream=count, process_output_step=note,
                  process_output_result=done)
    ran = simulate(make_agent(output_processors=[p]), [Say(["a", "b"])])
    assert ran.result.status == "finished"
    n = [d.data for d in data_chunks(ran.chunks)]
    assert len(n) == 1 and isinstance(n[0], int) and n[0] > 0
    assert final and final[0] >= n[0]  # the emit-only Out left the count alone


# --- 4. every request any provider receives is paired ----------------------------------


def _drop_tool_messages(args: InputStepArgs[None]) -> InputStepResult[None]:
    # a careless trimmer: keeps the calls, drops their results
    kept = [m for m in args.messages if m.role != "tool"]
    return Replace(StepChange(message_list=args.message_list.with_messages(kept)))


def test_the_scripted_model_gets_a_paired_history_after_a_careless_trim() -> None:
    agent = make_agent(tools=[_echo],
                       input_processors=[processor("trim", process_input_step=_drop_tool_messages)])
    ran = simulate(agent, [Say(calls=[call("echo", text="a")]), Say("done")])
    assert ran.result.status == "finished"
    assert len(ran.requests) == 2
    assert all(is_paired(r.messages) for r in ran.requests)
    # repaired for the request: the call got a synthetic error result
    second = ran.requests[1].messages
    assert second[-1].role == "tool" and second[-1].tool_results()[0].is_error


def test_a_users_own_provider_gets_a_paired_history() -> None:
    seen: list[ModelRequest] = []

    class Mine:
        def stream(self, request: ModelRequest) -> Iterator[ModelEvent]:
            seen.append(request)
            return iter([TextStart("t"), TextDelta("t", "ok"), TextEnd("t"),
                         ModelFinish("stop")])

    history = MessageList.of([
        user("q", id="u1"),
        Message(id="a1", role="assistant", parts=(ToolCallPart("c1", "echo", {}),)),
        user("and?", id="u2"),  # the call's result was lost
    ])
    result = SyncInterpreter(Mine()).run(make_agent(), history)
    assert result.status == "finished"
    assert len(seen) == 1 and is_paired(seen[0].messages)
