"""process_input_step (and prepare_step): before every model call; step overrides chain."""

from __future__ import annotations

from effects import Abort, Continue, Replace
from interpreters.testing import Say, call
from pipeline.processor import (
    InputStepArgs,
    InputStepResult,
    OutputStepArgs,
    OutputStepResult,
    Processor,
    StepChange,
    processor,
)
from pipeline.tools import tool
from pipeline.values.messages import Message, SystemMessage, TextPart
from pipeline.values.model import ModelSettings, StructuredOutput, ToolChoiceTool
from tests.helpers import make_agent, simulate, system_texts, user_texts


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return f"found {query}"


@tool
def other(n: int) -> int:
    """Another tool."""
    return n


def _calls(n: int, then: str = "done") -> list[Say]:
    """n tool-calling responses, then a final text."""
    return [Say(calls=[call("lookup", query=str(i))]) for i in range(n)] + [Say(then)]


class Spy(Processor):
    """Records the args it got; returns a fixed StepChange (or Continue)."""

    def __init__(self, id: str, change: StepChange | None, seen: list[InputStepArgs[None]]):
        self.id = id
        self.change = change
        self.seen = seen

    def process_input_step(self, args: InputStepArgs[None]) -> InputStepResult[None]:
        self.seen.append(args)
        return Continue() if self.change is None else Replace(self.change)


def test_two_processors_chain_model_then_tool_choice() -> None:
    first: list[InputStepArgs[None]] = []
    second: list[InputStepArgs[None]] = []
    agent = make_agent(
        model="fast",
        tools=[lookup],
        input_processors=[
            Spy("model", StepChange(model="strong"), first),
            Spy("choice", StepChange(tool_choice="none"), second),
        ],
    )
    ran = simulate(agent, [Say("default model: never used")], models={"strong": [Say("ok")]})
    assert (first[0].model, first[0].tool_choice) == ("fast", "auto")
    # the second sees the first's change, and the first's only
    assert (second[0].model, second[0].tool_choice) == ("strong", "auto")
    # the request the model got shows both, and the switched model served it
    assert ran.requests == []
    req = ran.models["strong"].requests[0]
    assert (req.model, req.tool_choice) == ("strong", "none")
    assert ran.result.text == "ok"
    assert ran.result.steps[0].model == "strong"


def test_step_changes_last_one_step_only() -> None:
    def at_step_0(args: InputStepArgs[None]) -> InputStepResult[None]:
        if args.step_number == 0:
            return Replace(StepChange(model="other", tool_choice=ToolChoiceTool("lookup")))
        return Continue()

    agent = make_agent(
        tools=[lookup], input_processors=[processor("p", process_input_step=at_step_0)]
    )
    ran = simulate(agent, [Say("x")], models={"other": [Say(calls=[call("lookup", query="q")])]})
    req0 = ran.models["other"].requests[0]
    req1 = ran.requests[0]
    assert (req0.model, req0.tool_choice) == ("other", ToolChoiceTool("lookup"))
    assert (req1.model, req1.tool_choice) == ("sim/model", "auto")


def test_system_message_change_does_not_reach_the_next_step() -> None:
    seen: list[tuple[str, ...]] = []

    def add_system(args: InputStepArgs[None]) -> InputStepResult[None]:
        seen.append(tuple(s.content for s in args.system_messages))
        if args.step_number == 0:
            extra = SystemMessage("only for step 0", tag="step")
            return Replace(StepChange(system_messages=(*args.system_messages, extra)))
        return Continue()

    agent = make_agent(
        instructions="base",
        tools=[lookup],
        input_processors=[processor("sys", process_input_step=add_system)],
    )
    ran = simulate(agent, _calls(1))
    assert [system_texts(r) for r in ran.requests] == [["base", "only for step 0"], ["base"]]
    assert seen == [("base",), ("base",)]  # step 1 starts from the original system messages
    assert [s.content for s in ran.result.messages.system] == ["base"]


def test_system_message_change_is_visible_to_later_processors_of_the_same_step() -> None:
    later: list[InputStepArgs[None]] = []
    agent = make_agent(
        instructions="base",
        input_processors=[
            Spy("sys", StepChange(system_messages=(SystemMessage("replaced"),)), []),
            Spy("later", None, later),
        ],
    )
    ran = simulate(agent, [Say("ok")])
    assert [s.content for s in later[0].system_messages] == ["replaced"]
    assert system_texts(ran.requests[0]) == ["replaced"]


def test_system_message_change_does_not_leak_into_a_processor_retry() -> None:
    def add_system(args: InputStepArgs[None]) -> InputStepResult[None]:
        if args.retry_count == 0:
            return Replace(StepChange(system_messages=(SystemMessage("first attempt"),)))
        return Continue()

    def reject_once(args: OutputStepArgs[None]) -> OutputStepResult[None]:
        return Abort("again", retry=True) if args.retry_count == 0 else Continue()

    agent = make_agent(
        instructions="base",
        input_processors=[processor("sys", process_input_step=add_system)],
        output_processors=[processor("guard", process_output_step=reject_once)],
    )
    ran = simulate(agent, [Say("a"), Say("b")])
    assert [system_texts(r) for r in ran.requests] == [["first attempt"], ["base"]]


def test_prepare_step_runs_last_and_sees_every_processor_change() -> None:
    prepared: list[InputStepArgs[None]] = []

    def prepare(args: InputStepArgs[None]) -> InputStepResult[None]:
        prepared.append(args)
        return Replace(StepChange(model="prepared"))

    agent = make_agent(
        input_processors=[
            Spy("a", StepChange(model="from-a"), []),
            Spy("b", StepChange(tool_choice="required"), []),
        ],
        prepare_step=prepare,
    )
    ran = simulate(agent, [Say("unused")], models={"prepared": [Say("ok")]})
    assert (prepared[0].model, prepared[0].tool_choice) == ("from-a", "required")
    req = ran.models["prepared"].requests[0]
    assert (req.model, req.tool_choice) == (
        "prepared",
        "required",
    )  # prepare_step has the last word
    assert [e.processor_id for e in ran.trace.effects] == ["a", "b", "prepare_step"]


def test_prepare_step_alone_runs_every_step() -> None:
    numbers: list[int] = []

    def prepare(args: InputStepArgs[None]) -> InputStepResult[None]:
        numbers.append(args.step_number)
        return Continue()

    simulate(make_agent(tools=[lookup], prepare_step=prepare), _calls(2))
    assert numbers == [0, 1, 2]


def test_input_step_runs_before_every_model_call_including_tool_steps_and_retries() -> None:
    calls: list[tuple[int, int]] = []

    def count(args: InputStepArgs[None]) -> InputStepResult[None]:
        calls.append((args.step_number, args.retry_count))
        return Continue()

    def reject_first_final(args: OutputStepArgs[None]) -> OutputStepResult[None]:
        if args.text == "bad":
            return Abort("do better", retry=True)
        return Continue()

    agent = make_agent(
        tools=[lookup],
        input_processors=[processor("count", process_input_step=count)],
        output_processors=[processor("guard", process_output_step=reject_first_final)],
    )
    ran = simulate(agent, [Say(calls=[call("lookup", query="q")]), Say("bad"), Say("good")])
    assert ran.result.status == "finished"
    assert calls == [(0, 0), (1, 0), (1, 1)]
    assert len(ran.requests) == len(calls)


def test_step_args_carry_step_number_and_previous_steps() -> None:
    seen: list[InputStepArgs[None]] = []
    simulate(make_agent(tools=[lookup], input_processors=[Spy("s", None, seen)]), _calls(1))
    assert [a.step_number for a in seen] == [0, 1]
    assert seen[0].steps == ()
    (prev,) = seen[1].steps
    assert [c.tool_name for c in prev.tool_calls] == ["lookup"]
    assert [r.result for r in prev.tool_results] == ["found 0"]
    # the messages include the tool call and its result
    assert [m.role for m in seen[1].messages] == ["user", "assistant", "tool"]


def test_message_changes_persist_into_later_steps() -> None:
    def note(args: InputStepArgs[None]) -> InputStepResult[None]:
        if args.step_number == 0:
            m = Message(id="note", role="user", parts=(TextPart("remember this"),))
            return Replace(StepChange(message_list=args.message_list.add(m, "context")))
        return Continue()

    agent = make_agent(
        tools=[lookup], input_processors=[processor("note", process_input_step=note)]
    )
    ran = simulate(agent, _calls(1))
    assert [user_texts(r) for r in ran.requests] == [["hi", "remember this"]] * 2
    assert ran.result.messages.source_of("note") == "context"


def test_active_tools_and_tools_narrow_what_the_model_is_offered() -> None:
    agent = make_agent(
        tools=[lookup, other],
        input_processors=[Spy("narrow", StepChange(active_tools=("other",)), [])],
    )
    ran = simulate(agent, [Say("ok")])
    assert [t.name for t in ran.requests[0].tools] == ["other"]

    agent = make_agent(
        tools=[lookup], input_processors=[Spy("swap", StepChange(tools=(other,)), [])]
    )
    ran = simulate(agent, [Say("ok")])
    assert [t.name for t in ran.requests[0].tools] == ["other"]


def test_settings_options_and_structured_output_reach_the_request() -> None:
    so = StructuredOutput({"type": "object"}, name="answer")
    change = StepChange(
        provider_options={"anthropic": {"cache": True}},
        model_settings=ModelSettings(temperature=0.1),
        structured_output=so,
    )
    agent = make_agent(
        input_processors=[Spy("s", change, [])], model_settings=ModelSettings(seed=1)
    )
    req = simulate(agent, [Say("ok")]).requests[0]
    assert req.provider_options == {"anthropic": {"cache": True}}
    assert req.model_settings == ModelSettings(temperature=0.1)
    assert req.structured_output == so


def test_unchanged_fields_keep_the_agent_settings() -> None:
    agent = make_agent(
        tool_choice="required",
        model_settings=ModelSettings(seed=7),
        provider_options={"x": 1},
        input_processors=[Spy("s", StepChange(), [])],
    )
    req = simulate(agent, [Say("ok")]).requests[0]
    assert (req.tool_choice, req.model_settings, req.provider_options) == (
        "required",
        ModelSettings(seed=7),
        {"x": 1},
    )


def test_abort_from_input_step_trips_before_the_model_call() -> None:
    def block(args: InputStepArgs[None]) -> InputStepResult[None]:
        if args.step_number == 1:
            return Abort("too many steps", metadata={"step": 1})
        return Continue()

    agent = make_agent(
        tools=[lookup], input_processors=[processor("limit", process_input_step=block)]
    )
    ran = simulate(agent, _calls(2))
    assert len(ran.requests) == 1
    tw = ran.result.tripwire
    assert tw is not None
    assert (tw.reason, tw.processor_id, tw.metadata) == ("too many steps", "limit", {"step": 1})
    assert ran.chunks[-1] == tw
    # the first step and its tool result are kept
    assert [m.role for m in ran.messages] == ["user", "assistant", "tool"]


def test_abort_with_retry_from_input_step_is_a_plain_abort() -> None:
    agent = make_agent(
        input_processors=[
            processor("p", process_input_step=lambda a: Abort("retry me?", retry=True))
        ]
    )
    ran = simulate(agent, [Say("a"), Say("b")])
    assert ran.result.status == "tripped"
    assert ran.requests == []
    assert ran.result.retry_count == 0
    assert [m.role for m in ran.messages] == ["user"]


def test_step_change_is_recorded_in_the_trace() -> None:
    agent = make_agent(input_processors=[Spy("s", StepChange(model="m2"), [])])
    ran = simulate(agent, [Say("x")], models={"m2": [Say("ok")]})
    (eff,) = ran.trace.effects_of("s", "process_input_step")
    assert isinstance(eff, Replace)
    assert isinstance(eff.value, StepChange)
    assert eff.value.model == "m2"
