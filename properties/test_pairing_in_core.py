"""Pairing repair in the core: every request any provider receives is paired.

The loop repairs the history before every model call (`pipeline.values.pairing.PairedHistory`),
so the simulator's scripted model, a user's own provider and the HTTP codecs alike get a
paired history, whatever processors did to it. Only the suffix added since the last call
is checked; the properties here hold that shortcut to the full repair.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from unittest.mock import patch

import anyio
from hypothesis import given, note
from hypothesis import strategies as st

from effects import Continue, Replace
from interpreters.aio import AsyncInterpreter
from interpreters.sync import SyncInterpreter
from interpreters.testing import (
    AsyncSimulator,
    Say,
    ScriptedModel,
    Simulator,
    call,
    numbered_run_ids,
)
from pipeline.agent import Agent
from pipeline.loop.state import CallIds, tool_part_ids
from pipeline.processor import (
    InputStepArgs,
    InputStepResult,
    OutputStepArgs,
    OutputStepResult,
    StepChange,
    StreamArgs,
    StreamResult,
    processor,
)
from pipeline.tools import tool
from pipeline.tools.context import ToolContext
from pipeline.values.chunks import ModelEvent, ToolCall
from pipeline.values.messages import (
    Message,
    MessageList,
    Part,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    user,
)
from pipeline.values.model import ModelRequest
from pipeline.values.pairing import PairedHistory, is_paired, repair_pairing

from .tool_histories import POOL_IDS, damaged, histories, pool_ids, raw_parts, render

START = 1_700_000_000.0


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


# --- what the model says, and what processors do to the history ---------------------------

says = st.builds(
    lambda ids, text: Say(text, calls=[call("echo", tool_call_id=i, text="x") for i in ids]),
    st.lists(st.sampled_from(POOL_IDS), max_size=2),
    st.sampled_from(("", "ok")),
)
"""Tool-call ids from the histories' pool: collisions with the history are common."""

TRIMS = ("none", "drop_tool_messages", "drop_first", "keep_last_two")


def _trimmed(messages: tuple[Message, ...], how: str) -> tuple[Message, ...]:
    if how == "drop_tool_messages":
        return tuple(m for m in messages if m.role != "tool")
    if how == "drop_first":
        return messages[1:]
    if how == "keep_last_two":
        return messages[-2:]
    return messages


def mangler(
    history: tuple[Message, ...], how: str
) -> Callable[[InputStepArgs[None]], InputStepResult[None]]:
    """An input-step hook that puts `history` before the conversation at step 0 and
    then trims carelessly at every later step."""

    def hook(args: InputStepArgs[None]) -> InputStepResult[None]:
        if args.step_number == 0 and not args.retry_count:
            msgs = (*history, *args.messages)
        elif how != "none":
            msgs = _trimmed(args.messages, how)
        else:
            return Continue()
        return Replace(StepChange(message_list=args.message_list.with_messages(msgs)))

    return hook


def make_agent(history: tuple[Message, ...], how: str) -> Agent:
    return Agent.create(
        "sim/model", tools=[echo], max_steps=4,
        input_processors=[processor("mangle", process_input_step=mangler(history, how))],
    )


# --- the interpreters, each with a model that records what it was sent ---------------------


class OwnProvider:
    """A user's own provider: not the simulator's ScriptedModel."""

    def __init__(self, script: Sequence[Say]) -> None:
        self.script = script
        self.requests: list[ModelRequest] = []

    def _events(self, request: ModelRequest) -> list[ModelEvent]:
        n = len(self.requests)
        self.requests.append(request)
        return self.script[min(n, len(self.script) - 1)].events(n)

    def stream(self, request: ModelRequest) -> Iterator[ModelEvent]:
        return iter(self._events(request))

    async def astream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        for e in self._events(request):
            yield e


Requests = list[ModelRequest]


def _script(script: Sequence[Say]) -> list[Say]:
    return [*script, *[Say("done")] * 4]  # enough answers for every step


def on_simulator(agent: Agent, script: Sequence[Say]) -> Requests:
    model = ScriptedModel(_script(script))
    Simulator(model, run_ids=numbered_run_ids()).run(agent, "hi")
    return model.requests


def on_own_provider(agent: Agent, script: Sequence[Say]) -> Requests:
    own = OwnProvider(_script(script))
    SyncInterpreter(own, clock=lambda: START, run_ids=lambda: "run1").run(agent, "hi")
    return own.requests


def on_async(agent: Agent, script: Sequence[Say], backend: str) -> list[Requests]:
    async def both() -> list[Requests]:
        model = ScriptedModel(_script(script))
        await AsyncSimulator(model, run_ids=numbered_run_ids()).run(agent, "hi")
        own = OwnProvider(_script(script))
        await AsyncInterpreter(own, clock=lambda: START, run_ids=lambda: "run1").run(agent, "hi")
        return [model.requests, own.requests]

    return anyio.run(both, backend=backend)


def shape(requests: Requests) -> list[list[tuple[str, tuple[object, ...]]]]:
    """What each request said, without message ids and timestamps."""
    return [[(m.role, m.parts) for m in r.messages] for r in requests]


@given(history=histories, script=st.lists(says, min_size=1, max_size=3),
       how=st.sampled_from(TRIMS))
def test_every_request_every_interpreter_sends_is_paired(
    history: tuple[Message, ...], script: list[Say], how: str
) -> None:
    """Whatever history a processor puts in and however it trims it later, every request
    each interpreter hands its model (the sync and async simulators, a user's own sync
    and async provider, on asyncio and trio) is paired, and they all send the same."""
    note(f"history:\n{render(history)}\ntrim: {how}")
    agent = make_agent(history, how)
    runs = [
        on_simulator(agent, script),
        on_own_provider(agent, script),
        *on_async(agent, script, "asyncio"),
        *on_async(agent, script, "trio"),
    ]
    for requests in runs:
        assert requests
        for r in requests:
            assert is_paired(r.messages), render(r.messages)
    first = shape(runs[0])
    assert all(shape(r) == first for r in runs[1:])


@given(history=damaged(), script=st.lists(says, min_size=1, max_size=3))
def test_a_paired_history_is_sent_as_it_is(history: tuple[Message, ...], script: list[Say]) -> None:
    """When the history is paired (and nothing trims it), each request carries exactly the
    run's messages: repair changes nothing it need not change."""
    agent = make_agent(history, "none")
    requests = on_simulator(agent, script)
    for r in requests:
        assert is_paired(r.messages)
        if is_paired(history) and r is requests[0]:
            assert r.messages[: len(history)] == history


# --- the incremental check against the full repair ----------------------------------------

steps = st.lists(
    st.one_of(
        st.tuples(st.just("add"), histories),
        st.tuples(st.just("replace"), histories),
        st.tuples(st.just("same"), st.just(())),
    ),
    max_size=6,
)


@given(start=histories, ops=steps, long=st.booleans())
def test_the_incremental_check_equals_the_full_repair(
    start: tuple[Message, ...], ops: list[tuple[str, tuple[Message, ...]]], long: bool
) -> None:
    """For any sequence of histories a run may send (grown by `add`, replaced outright,
    or sent again), `PairedHistory.messages` equals `repair_pairing` of the whole."""
    padding = tuple(user(f"p{i}", id=f"pad{i}") for i in range(40 if long else 0))
    ml = MessageList.of((*padding, *start))  # long: past the size where `add` shares a log
    check = PairedHistory()
    for op, msgs in [("same", ()), *ops]:
        if op == "add":
            ml = ml.add(msgs)
        elif op == "replace":
            ml = MessageList.of((*padding, *msgs))
        note(f"{op}:\n{render(ml.messages)}")
        assert check.messages(ml) == repair_pairing(ml.messages)


def test_an_added_result_for_an_earlier_call_is_noticed() -> None:
    """A suffix answering a call of the checked prefix (a duplicate result) is repaired."""
    from pipeline.values.messages import ToolCallPart, ToolResultPart

    paired = MessageList.of([
        Message(id="a", role="assistant", parts=(ToolCallPart("c", "f", {}),)),
        Message(id="t", role="tool", parts=(ToolResultPart("c", "f", 1),)),
    ])
    check = PairedHistory()
    assert check.messages(paired) == paired.messages
    later = paired.add(Message(id="t2", role="tool", parts=(ToolResultPart("c", "f", 2),)))
    sent = check.messages(later)
    assert is_paired(sent) and sent == repair_pairing(later.messages)
    again = later.add(Message(id="u", role="user", parts=(TextPart("x"),)))
    assert check.messages(again) == repair_pairing(again.messages)


# --- what the loop tells the check: its input has no tool part, a call and its results ----

Turn = tuple[Role, list[Part], Role, list[Part], str]
_turn_parts = st.lists(
    st.one_of(
        st.builds(lambda i: ToolCallPart(i, "echo", {}), st.sampled_from((*POOL_IDS, "n1", "n2"))),
        raw_parts(pool_ids),
    ),
    max_size=3,
)
turns: st.SearchStrategy[Turn] = st.tuples(
    st.sampled_from(("assistant", "assistant", "user", "tool")),
    _turn_parts,
    st.sampled_from(("tool", "assistant")),
    _turn_parts,
    st.sampled_from(("exact", "exact", "reversed", "one short", "as drawn")),
)
"""A response and the message after it: its calls answered once each, in order, as the
loop does ("exact"), in reverse order, all but the last, or any parts at all."""

edits = st.one_of(
    st.tuples(st.just("add"), histories),
    st.tuples(st.just("replace"), histories),
    st.tuples(st.just("same"), st.just(())),
)


@given(
    start=histories,
    ops=st.lists(st.one_of(turns, edits), max_size=6),
    start_as=st.sampled_from(("paired", "tool-free", "as drawn")),
)
def test_what_the_loop_tells_the_check_never_changes_what_is_sent(
    start: tuple[Message, ...],
    ops: list[Turn | tuple[str, tuple[Message, ...]]],
    start_as: str,
) -> None:
    """`known_paired` (for a history with no tool part) and the list last checked only
    let the check skip work: whatever the messages added after it (a response and the
    message after it, any other messages, a new list), `PairedHistory.messages` still
    equals `repair_pairing` of the whole."""
    if start_as == "paired":
        start = repair_pairing(start)
    elif start_as == "tool-free":
        start = tuple(
            m.with_parts([p for p in m.parts if not isinstance(p, ToolCallPart | ToolResultPart)])
            for m in start
        )
    ml = MessageList.of(start)
    check = PairedHistory()
    if start_as == "tool-free":
        check.known_paired(ml)
    for n, op in enumerate(ops):
        if len(op) == 5:
            role, parts, role2, parts2, how = op
            response = Message(id=f"resp{n}", role=role, parts=tuple(parts))
            if how != "as drawn":
                role2 = "tool"
                parts2 = [ToolResultPart(p.tool_call_id, p.tool_name, "r")
                          for p in parts if isinstance(p, ToolCallPart)]
                if how == "reversed":
                    parts2.reverse()
                elif how == "one short":
                    parts2 = parts2[:-1]
            after = Message(id=f"next{n}", role=role2, parts=tuple(parts2))
            sent = check.messages(ml)  # the model call before the response
            assert sent == repair_pairing(ml.messages)
            ml = ml.add(response, "response").add(after, "response")
        else:
            kind, msgs = op
            if kind == "add":
                ml = ml.add(msgs)
            elif kind == "replace":
                ml = MessageList.of(msgs)
        note(f"{op}:\n{render(ml.messages)}")
        assert check.messages(ml) == repair_pairing(ml.messages)


def test_a_response_reusing_a_call_id_is_still_repaired() -> None:
    """A call id the history (or the response itself) already has: `turn` must not
    vouch for the turn, so the repair still renames the later call."""
    history = MessageList.of([
        Message(id="c0", role="assistant", parts=(ToolCallPart("a", "echo", {}),)),
        Message(id="t0", role="tool", parts=(ToolResultPart("a", "echo", "r"),)),
    ])
    for ids in (("a",), ("n", "n")):
        check = PairedHistory()
        assert check.messages(history) == history.messages
        response = Message(
            id="resp", role="assistant", parts=tuple(ToolCallPart(i, "echo", {}) for i in ids)
        )
        results = Message(
            id="res", role="tool", parts=tuple(ToolResultPart(i, "echo", "r") for i in ids)
        )
        ml = history.add(response, "response").add(results, "response")
        check.turn(history, ml, ids)
        sent = check.messages(ml)
        assert sent != ml.messages and sent == repair_pairing(ml.messages)


# --- the loop's own tool turn: `PairedHistory.turn` and the run's call ids -----------------


@tool
def noted(text: str, ctx: ToolContext[None]) -> str:
    """Echo the text, writing a data part (kept in the tool message) on the way."""
    ctx.writer.custom("data-noted", text)
    return text


def _renamer(ids: list[str]) -> Callable[[StreamArgs[None]], StreamResult[None]]:
    """A stream hook that gives each tool call the next id of `ids` (collisions with the
    history, with earlier calls and within a response are common)."""
    left = list(ids)

    def hook(args: StreamArgs[None]) -> StreamResult[None]:
        c = args.part
        if isinstance(c, ToolCall) and left:
            return Replace(ToolCall(left.pop(0), c.tool_name, c.args))
        return Continue()

    return hook


def _replacer(how: str) -> Callable[[OutputStepArgs[None]], OutputStepResult[None]]:
    """An output-step hook that keeps, trims or rewrites the history with the response."""

    def hook(args: OutputStepArgs[None]) -> OutputStepResult[None]:
        if how == "none":
            return Continue()
        return Replace(args.message_list.with_messages(_trimmed(args.messages, how)))

    return hook


turn_says = st.builds(
    lambda ids, tools, text: Say(
        text, calls=[call(t, tool_call_id=i, text="x") for i, t in zip(ids, tools, strict=False)]
    ),
    st.lists(st.sampled_from(POOL_IDS), min_size=1, max_size=3),
    st.lists(st.sampled_from(("echo", "noted", "missing")), min_size=3, max_size=3),
    st.sampled_from(("", "ok")),
)


@given(
    # Mostly a paired history, kept: the turns then extend the list last found paired.
    history=st.one_of(st.just(()), histories.map(repair_pairing), histories),
    script=st.lists(turn_says, min_size=1, max_size=3),
    how=st.sampled_from(("none", "none", *TRIMS)),
    renames=st.none() | st.lists(st.sampled_from(POOL_IDS), max_size=4),
    output_how=st.sampled_from(("none", "none", *TRIMS)),
)
def test_the_loop_s_own_turn_is_sent_as_the_full_check_sends_it(
    history: tuple[Message, ...],
    script: list[Say],
    how: str,
    renames: list[str] | None,
    output_how: str,
) -> None:
    """The loop notes its own tool turn (its response, then the tool message answering
    it) with `PairedHistory.turn` and adds the turn's ids to the run's call ids without a
    scan. Against the same run with both shortcuts off (the pairing check then reads the
    turn, the call ids are gathered from the whole history), every request is the same
    and paired, and so is the result: whatever the history, the trims, the stream
    processors' renames (duplicate ids), the output processors' rewrites and the data
    parts tools write."""

    def run() -> tuple[Requests, object]:
        procs_out = [processor("replace", process_output_step=_replacer(output_how))]
        if renames is not None:  # (a fresh one per run: it takes the ids as it goes)
            procs_out.append(processor("rename", process_output_stream=_renamer(renames)))
        agent = Agent.create(
            "sim/model", tools=[echo, noted], max_steps=4,
            input_processors=[processor("mangle", process_input_step=mangler(history, how))],
            output_processors=procs_out,
        )
        model = ScriptedModel(_script(script))
        result = Simulator(model, run_ids=numbered_run_ids()).run(agent, "hi").result
        return model.requests, result

    fast = run()
    with (
        patch.object(PairedHistory, "turn", lambda self, before, after, ids: None),
        patch.object(CallIds, "held_by", _scan_call_ids),
    ):
        full = run()
    for r in fast[0]:
        assert is_paired(r.messages), render(r.messages)
    assert fast == full


def _scan_call_ids(self: CallIds, ml: MessageList) -> set[str]:
    """`CallIds.held_by` without its bookkeeping: every id the conversation holds, read
    again (and no list known, so no step adds to it either)."""
    self.of = None
    self.used = tool_part_ids(ml)
    return self.used
