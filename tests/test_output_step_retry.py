"""process_output_step: after each response, before tools; Replace, Abort, Abort(retry=True)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from effects import Abort, Continue, Replace
from interpreters.testing import Say, call
from pipeline.processor import (
    InputStepArgs,
    InputStepResult,
    OutputStepArgs,
    OutputStepResult,
    Processor,
    abort,
    processor,
)
from pipeline.tools import tool
from pipeline.values.chunks import DataChunk, StepFinish, StepStart, Usage
from pipeline.values.messages import Message, MessageList, TextPart
from tests.helpers import make_agent, simulate, streamed_text, user_texts

FEEDBACK = "Too short. Say more."

_ran_tools: list[str] = []
"""Appended to by the tools below; read through the `ran_tools` fixture."""


@pytest.fixture
def ran_tools() -> Iterator[list[str]]:
    """What the tools ran in this test (empty at its start)."""
    _ran_tools.clear()
    yield _ran_tools
    _ran_tools.clear()


@tool
def lookup(query: str) -> str:
    """Look something up."""
    _ran_tools.append(query)
    return f"found {query}"


class RejectBad(Processor):
    """Asks for a retry while the text contains 'bad'; records the retry_count it saw."""

    id = "guard"

    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []

    def process_output_step(self, args: OutputStepArgs[None]) -> OutputStepResult[None]:
        self.seen.append((args.text, args.retry_count))
        if "bad" in args.text:
            return Abort(FEEDBACK, retry=True, metadata={"score": 0.1})
        return Continue()


def test_a_retry_that_succeeds_on_the_second_attempt() -> None:
    guard = RejectBad()
    agent = make_agent(instructions="base", output_processors=[guard])
    ran = simulate(agent, [Say("bad answer"), Say("good answer")])
    r = ran.result
    assert r.status == "finished"
    assert r.text == "good answer"
    assert r.retry_count == 1
    assert guard.seen == [("bad answer", 0), ("good answer", 1)]
    # the rejected response is discarded; the feedback follows the conversation
    assert [(m.role, m.text) for m in ran.messages] == [
        ("user", "hi"),
        ("user", FEEDBACK),
        ("assistant", "good answer"),
    ]
    assert r.messages.source_of(ran.messages[1].id) == "context"
    # the rerun's request: same system prompt, the conversation, then the feedback
    first, second = ran.requests
    assert second.system == first.system
    assert second.messages[: len(first.messages)] == first.messages
    assert user_texts(second) == ["hi", FEEDBACK]
    # only the kept attempt is a step
    assert [(s.step_number, s.text) for s in r.steps] == [(0, "good answer")]


def test_the_stream_shows_the_discarded_attempt_and_the_rerun() -> None:
    ran = simulate(make_agent(output_processors=[RejectBad()]), [Say("bad"), Say("good")])
    assert streamed_text(ran.chunks) == "badgood"  # the caller saw both attempts
    starts = [c for c in ran.chunks if isinstance(c, StepStart)]
    finishes = [c for c in ran.chunks if isinstance(c, StepFinish)]
    assert [s.step_number for s in starts] == [0, 0]
    assert [f.step_number for f in finishes] == [0]
    (discarded,) = [c for c in ran.chunks if isinstance(c, DataChunk)]
    assert discarded.name == "data-step-discarded" and discarded.transient
    assert discarded.data == {
        "step_number": 0,
        "processor_id": "guard",
        "reason": FEEDBACK,
        "retry_count": 1,
    }
    assert ran.types == [
        "step-start",
        "text-start",
        "text-delta",
        "text-end",
        "data",
        "step-start",
        "text-start",
        "text-delta",
        "text-end",
        "step-finish",
        "finish",
    ]


def test_feedback_goes_after_tool_results_in_a_later_step() -> None:
    agent = make_agent(tools=[lookup], output_processors=[RejectBad()])
    ran = simulate(agent, [Say(calls=[call("lookup", query="q")]), Say("bad"), Say("good")])
    assert [m.role for m in ran.messages] == ["user", "assistant", "tool", "user", "assistant"]
    third = ran.requests[2]
    assert [m.role for m in third.messages] == ["user", "assistant", "tool", "user"]
    assert third.messages[:3] == ran.requests[1].messages  # earlier history unchanged
    assert [s.step_number for s in ran.result.steps] == [0, 1]


def test_the_rerun_goes_through_input_step_again_with_the_new_retry_count() -> None:
    seen: list[tuple[int, int]] = []

    def count(args: InputStepArgs[None]) -> InputStepResult[None]:
        seen.append((args.step_number, args.retry_count))
        return Continue()

    agent = make_agent(
        input_processors=[processor("count", process_input_step=count)],
        output_processors=[RejectBad()],
    )
    simulate(agent, [Say("bad"), Say("good")])
    assert seen == [(0, 0), (0, 1)]


def test_a_rejected_tool_step_runs_no_tool(ran_tools: list[str]) -> None:

    def reject_calls(args: OutputStepArgs[None]) -> OutputStepResult[None]:
        if args.tool_calls and args.retry_count == 0:
            return Abort("no tools yet", retry=True)
        return Continue()

    agent = make_agent(
        tools=[lookup], output_processors=[processor("g", process_output_step=reject_calls)]
    )
    ran = simulate(
        agent,
        [
            Say(calls=[call("lookup", query="first")]),
            Say(calls=[call("lookup", query="second")]),
            Say("done"),
        ],
    )
    assert ran_tools == ["second"]
    assert [c.args for m in ran.messages for c in m.tool_calls()] == [{"query": "second"}]


def test_retry_bound_of_zero_makes_the_first_retry_a_plain_abort() -> None:
    ran = simulate(
        make_agent(output_processors=[RejectBad()], max_processor_retries=0),
        [Say("bad"), Say("good")],
    )
    r = ran.result
    assert r.status == "tripped"
    assert len(ran.requests) == 1
    assert r.retry_count == 0
    assert r.tripwire is not None
    assert (r.tripwire.reason, r.tripwire.processor_id, r.tripwire.metadata) == (
        FEEDBACK,
        "guard",
        {"score": 0.1},
    )
    assert ran.types[-1] == "tripwire"
    assert [m.role for m in ran.messages] == ["user"]  # no feedback, blocked response not kept


def test_retry_bound_of_two_allows_two_retries_then_aborts() -> None:
    guard = RejectBad()
    ran = simulate(
        make_agent(output_processors=[guard], max_processor_retries=2),
        [Say("bad 1"), Say("bad 2"), Say("bad 3"), Say("good")],
    )
    r = ran.result
    assert r.status == "tripped"
    assert len(ran.requests) == 3  # the first attempt and two retries
    assert r.retry_count == 2
    assert [c for _, c in guard.seen] == [0, 1, 2]
    feedback = [m for m in ran.messages if m.role == "user"][1:]
    assert [m.text for m in feedback] == [FEEDBACK, FEEDBACK]
    assert not any(m.role == "assistant" for m in ran.messages)


def test_retry_bound_of_two_is_enough_when_the_third_attempt_passes() -> None:
    ran = simulate(
        make_agent(output_processors=[RejectBad()], max_processor_retries=2),
        [Say("bad 1"), Say("bad 2"), Say("good")],
    )
    assert ran.result.status == "finished"
    assert ran.result.retry_count == 2
    assert ran.result.text == "good"


def test_default_retry_bound_is_three() -> None:
    ran = simulate(make_agent(output_processors=[RejectBad()]), [Say("bad")] * 5)
    assert ran.result.status == "tripped"
    assert len(ran.requests) == 4
    assert ran.result.retry_count == 3


def test_the_retry_bound_is_shared_by_all_steps_of_a_run() -> None:
    agent = make_agent(tools=[lookup], output_processors=[RejectBad()], max_processor_retries=1)
    ran = simulate(
        agent,
        [
            Say("bad", calls=[call("lookup", query="q")]),
            Say(calls=[call("lookup", query="q")]),
            Say("bad again"),
            Say("x"),
        ],
    )
    assert ran.result.status == "tripped"
    assert ran.result.retry_count == 1
    assert len(ran.requests) == 3


def test_abort_helper_with_retry_and_metadata() -> None:
    def guard(args: OutputStepArgs[None]) -> OutputStepResult[None]:
        if args.retry_count == 0:
            abort("more detail", retry=True, metadata={"n": 1})
        return Continue()

    ran = simulate(
        make_agent(output_processors=[processor("g", process_output_step=guard)]),
        [Say("a"), Say("b")],
    )
    assert ran.result.status == "finished"
    assert user_texts(ran.requests[1]) == ["hi", "more detail"]
    fb = ran.messages[1]
    assert fb.metadata == {"feedback_from": "g", "retry": 1}


def test_plain_abort_trips_and_does_not_keep_the_blocked_response(ran_tools: list[str]) -> None:
    block = processor("block", process_output_step=lambda a: Abort("blocked", metadata={"x": 1}))
    ran = simulate(
        make_agent(tools=[lookup], output_processors=[block]),
        [Say("leak", calls=[call("lookup", query="q")])],
    )
    r = ran.result
    assert r.status == "tripped"
    assert r.tripwire is not None
    assert (r.tripwire.reason, r.tripwire.retry, r.tripwire.processor_id, r.tripwire.metadata) == (
        "blocked",
        False,
        "block",
        {"x": 1},
    )
    assert ran.chunks[-1] == r.tripwire
    assert ran_tools == []
    assert r.text == ""
    assert [m.role for m in ran.messages] == ["user"]


def test_replace_changes_the_messages_and_the_next_request() -> None:
    def redact(args: OutputStepArgs[None]) -> OutputStepResult[None]:
        def fix(m: Message) -> Message:
            if m.role != "assistant":
                return m
            return m.with_parts(
                TextPart(p.text.replace("secret", "[x]")) if isinstance(p, TextPart) else p
                for p in m.parts
            )

        return Replace(args.message_list.map_messages(fix))

    agent = make_agent(
        tools=[lookup], output_processors=[processor("r", process_output_step=redact)]
    )
    ran = simulate(agent, [Say("the secret", calls=[call("lookup", query="q")]), Say("done")])
    assert ran.messages[1].text == "the [x]"
    assert ran.requests[1].messages[1].text == "the [x]"
    assert ran.result.text == "the [x]done"


def test_replace_that_drops_a_tool_call_stops_it_from_running(ran_tools: list[str]) -> None:

    def drop_calls(args: OutputStepArgs[None]) -> OutputStepResult[None]:
        return Replace(
            args.message_list.map_messages(
                lambda m: m.with_parts(p for p in m.parts if p.__class__.__name__ != "ToolCallPart")
            )
        )

    agent = make_agent(
        tools=[lookup], output_processors=[processor("d", process_output_step=drop_calls)]
    )
    ran = simulate(agent, [Say("text", calls=[call("lookup", query="q")]), Say("never")])
    assert ran_tools == []
    assert len(ran.requests) == 1
    assert ran.result.steps[0].tool_calls == ()


def test_output_step_processors_chain_in_list_order() -> None:
    seen: list[str] = []

    def append_note(args: OutputStepArgs[None]) -> OutputStepResult[None]:
        note = Message(id="note", role="user", parts=(TextPart("note"),))
        return Replace(args.message_list.add(note, "context"))

    def look(args: OutputStepArgs[None]) -> OutputStepResult[None]:
        seen.extend(m.text for m in args.messages)
        return Continue()

    agent = make_agent(
        output_processors=[
            processor("a", process_output_step=append_note),
            processor("b", process_output_step=look),
        ]
    )
    simulate(agent, [Say("answer")])
    assert seen == ["hi", "answer", "note"]


def test_a_retry_stops_later_output_step_processors() -> None:
    later: list[str] = []

    def record(args: OutputStepArgs[None]) -> OutputStepResult[None]:
        later.append(args.text)
        return Continue()

    agent = make_agent(
        output_processors=[RejectBad(), processor("later", process_output_step=record)]
    )
    simulate(agent, [Say("bad"), Say("good")])
    assert later == ["good"]


def test_output_step_args_describe_the_step() -> None:
    got: list[OutputStepArgs[None]] = []

    def look(args: OutputStepArgs[None]) -> OutputStepResult[None]:
        got.append(args)
        return Continue()

    agent = make_agent(
        instructions="sys",
        tools=[lookup],
        output_processors=[processor("l", process_output_step=look)],
    )
    simulate(agent, [Say("calling", calls=[call("lookup", query="q")]), Say("done")])
    a, b = got
    assert (a.step_number, a.finish_reason, a.text) == (0, "tool-calls", "calling")
    assert [c.tool_name for c in a.tool_calls] == ["lookup"]
    assert [m.role for m in a.messages] == ["user", "assistant"]  # the response is there
    assert [s.content for s in a.system_messages] == ["sys"]
    assert (b.step_number, b.finish_reason, b.text, b.tool_calls) == (1, "stop", "done", ())
    assert len(b.steps) == 1 and isinstance(b.message_list, MessageList)


def test_total_usage_counts_every_response_the_model_sent_also_discarded_ones() -> None:
    guard = RejectBad()
    ran = simulate(
        make_agent(output_processors=[guard]),
        [Say("bad", usage=Usage(5, 1)), Say("good", usage=Usage(7, 2))],
    )
    r = ran.result
    assert r.status == "finished"
    assert [s.usage for s in r.steps] == [Usage(7, 2)]  # the kept step only
    assert r.usage == Usage(12, 3)  # but both responses were billed
