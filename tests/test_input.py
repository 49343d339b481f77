"""process_input: runs once before the loop; Continue, Replace(MessageList) or Abort."""

from __future__ import annotations

from typing import cast

from effects import Abort, Continue, Replace, Skip
from interpreters.testing import Say, call
from pipeline.processor import (
    InputArgs,
    InputResult,
    InputStepArgs,
    InputStepResult,
    Processor,
    abort,
    processor,
)
from pipeline.tools import tool
from pipeline.values.messages import Message, MessageList, SystemMessage, TextPart
from pipeline.values.result import ProcessorFailed
from tests.helpers import make_agent, simulate, system_texts, user_texts


def _suffix_user_text(ml: MessageList, suffix: str) -> MessageList:
    def edit(m: Message) -> Message:
        if m.role != "user":
            return m
        return m.with_parts(
            TextPart(p.text + suffix) if isinstance(p, TextPart) else p for p in m.parts
        )

    return ml.map_messages(edit)


class Suffix(Processor):
    """Appends its suffix to every user text; records the text it saw."""

    def __init__(self, id: str, suffix: str, seen: list[str]) -> None:
        self.id = id
        self.suffix = suffix
        self.seen = seen

    def process_input(self, args: InputArgs[None]) -> InputResult[None]:
        self.seen.append(args.messages[0].text)
        return Replace(_suffix_user_text(args.message_list, self.suffix))


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


def test_replace_changes_what_the_model_sees_and_the_history() -> None:
    seen: list[str] = []
    ran = simulate(make_agent(input_processors=[Suffix("a", "!", seen)]), [Say("ok")], "hello")
    assert user_texts(ran.requests[0]) == ["hello!"]
    assert ran.messages[0].text == "hello!"


def test_input_processors_chain_in_list_order() -> None:
    seen: list[str] = []
    agent = make_agent(input_processors=[Suffix("a", "-a", seen), Suffix("b", "-b", seen)])
    ran = simulate(agent, [Say("ok")], "x")
    assert seen == ["x", "x-a"]  # the second sees the first's change
    assert user_texts(ran.requests[0]) == ["x-a-b"]


def test_process_input_runs_once_per_run_not_per_step() -> None:
    seen: list[str] = []
    agent = make_agent(input_processors=[Suffix("a", "!", seen)], tools=[echo])
    ran = simulate(agent, [Say(calls=[call("echo", text="t")]), Say("done")], "q")
    assert len(ran.requests) == 2
    assert seen == ["q"]
    # the changed input is in both requests, changed once
    assert [user_texts(r) for r in ran.requests] == [["q!"], ["q!"]]


def test_system_messages_replaced_in_process_input_last_the_whole_run() -> None:
    class Sys(Processor):
        id = "sys"

        def process_input(self, args: InputArgs[None]) -> InputResult[None]:
            assert [s.content for s in args.system_messages] == ["be nice"]
            return Replace(args.message_list.add_system("from input", tag="ctx"))

    agent = make_agent(instructions="be nice", input_processors=[Sys()], tools=[echo])
    ran = simulate(agent, [Say(calls=[call("echo", text="t")]), Say("done")])
    assert [system_texts(r) for r in ran.requests] == [["be nice", "from input"]] * 2
    assert ran.result.messages.system_by_tag("ctx") == (SystemMessage("from input", "ctx"),)


def test_messages_arg_excludes_system_messages() -> None:
    got: list[tuple[str, ...]] = []

    def look(args: InputArgs[None]) -> InputResult[None]:
        got.append(tuple(m.role for m in args.messages))
        return Continue()

    simulate(
        make_agent(instructions="sys", input_processors=[processor("p", process_input=look)]),
        [Say("ok")],
    )
    assert got == [("user",)]


def test_abort_ends_the_run_before_any_model_call() -> None:
    class Block(Processor):
        id = "block"

        def process_input(self, args: InputArgs[None]) -> InputResult[None]:
            return Abort("no", metadata={"why": "test"})

    ran = simulate(make_agent(input_processors=[Block()]), [Say("never")])
    assert ran.requests == []
    assert ran.result.status == "tripped"
    tw = ran.result.tripwire
    assert tw is not None
    assert (tw.reason, tw.retry, tw.processor_id, tw.metadata) == (
        "no",
        False,
        "block",
        {"why": "test"},
    )
    assert ran.chunks == [tw]  # nothing but the tripwire reaches the caller
    assert ran.result.finish_reason == "tripwire"


def test_abort_helper_is_the_same_as_returning_abort() -> None:
    class Block(Processor):
        id = "block"

        def process_input(self, args: InputArgs[None]) -> InputResult[None]:
            abort("raised", metadata={"k": 1})

    ran = simulate(make_agent(input_processors=[Block()]), [Say("never")])
    assert ran.result.tripwire is not None
    assert ran.result.tripwire.reason == "raised"
    assert ran.result.tripwire.metadata == {"k": 1}
    assert ran.requests == []


def test_abort_with_retry_from_process_input_is_a_plain_abort() -> None:
    class Block(Processor):
        id = "block"

        def process_input(self, args: InputArgs[None]) -> InputResult[None]:
            return Abort("again?", retry=True)

    ran = simulate(make_agent(input_processors=[Block()]), [Say("a"), Say("b")])
    assert ran.result.status == "tripped"
    assert ran.requests == []
    assert ran.result.retry_count == 0
    # no feedback message was added: the conversation is just the input
    assert [m.role for m in ran.messages] == ["user"]
    assert ran.result.tripwire is not None and ran.result.tripwire.retry is True


def test_an_abort_stops_later_input_processors() -> None:
    seen: list[str] = []

    class Block(Processor):
        id = "block"

        def process_input(self, args: InputArgs[None]) -> InputResult[None]:
            return Abort("stop")

    simulate(make_agent(input_processors=[Block(), Suffix("after", "!", seen)]), [Say("x")])
    assert seen == []


def test_input_processor_without_process_input_is_skipped() -> None:
    steps: list[int] = []

    class OnlyStep(Processor):
        id = "only-step"

        def process_input_step(self, args: InputStepArgs[None]) -> InputStepResult[None]:
            steps.append(args.step_number)
            return Continue()

    seen: list[str] = []
    ran = simulate(make_agent(input_processors=[OnlyStep(), Suffix("s", "!", seen)]), [Say("ok")])
    assert seen == ["hi"]
    assert steps == [0]
    assert ran.trace.effects_of("only-step", "process_input") == []
    assert ran.trace.effects_of("s", "process_input") != []


def test_illegal_effect_from_process_input_fails_naming_processor_and_hook() -> None:
    class Bad(Processor):
        id = "bad"

        def process_input(self, args: InputArgs[None]) -> InputResult[None]:
            return cast(InputResult[None], Skip())  # mypy would reject the bare Skip

    ran = simulate(make_agent(input_processors=[Bad()]), [Say("x")])
    assert ran.result.status == "failed"
    err = ran.result.error
    assert isinstance(err, ProcessorFailed)
    assert (err.processor_id, err.hook, err.error_type) == ("bad", "process_input", "InvalidEffect")
    assert "Skip" in err.message
    assert ran.requests == []


def test_replace_with_a_wrong_payload_fails() -> None:
    class Bad(Processor):
        id = "bad"

        def process_input(self, args: InputArgs[None]) -> InputResult[None]:
            return cast(InputResult[None], Replace(list(args.messages)))

    ran = simulate(make_agent(input_processors=[Bad()]), [Say("x")])
    err = ran.result.error
    assert isinstance(err, ProcessorFailed)
    assert (err.processor_id, err.hook) == ("bad", "process_input")
    assert "MessageList" in err.message
