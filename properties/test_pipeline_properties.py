"""Properties of the processor pipeline, on the simulator.

Each test states its invariant in its docstring. Scripts and processors are generated
from small alphabets so that shrinking ends on readable counterexamples. The number of
examples comes from the active hypothesis profile (see properties/conftest.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec
from hypothesis import given, note
from hypothesis import strategies as st

from effects import Abort, Continue, Emit, Out, Replace, Retry, Skip
from interpreters.sim.simulator import Scripted
from interpreters.testing import Fail, Say, ScriptedModel, SimRun, Simulator, call, numbered_run_ids
from pipeline.agent import Agent
from pipeline.processor import (
    ApiErrorArgs,
    ApiErrorResult,
    BaseProcessor,
    HookName,
    InputStepArgs,
    InputStepResult,
    OutputStepArgs,
    OutputStepResult,
    StatefulProcessor,
    StepChange,
    StreamArgs,
    StreamResult,
    processor,
)
from pipeline.tools import tool
from pipeline.values.chunks import Chunk, DataChunk, TextDelta, ToolCall, Tripwire
from pipeline.values.messages import DataPart, SystemMessage

MODEL = "sim/model"


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


def _run(agent: Agent, script: Sequence[Scripted]) -> tuple[SimRun, ScriptedModel]:
    model = ScriptedModel(script)
    return Simulator(model, run_ids=numbered_run_ids()).run(agent, "go"), model


# --- scripts -------------------------------------------------------------------------------

pieces = st.lists(st.sampled_from(["a", "b", "c", " ", "ab", "xyz"]), max_size=4)
data = st.builds(
    DataChunk,
    st.sampled_from(["data-a", "data-b"]),
    st.integers(0, 3),
    st.booleans(),
)


@st.composite
def says(draw: st.DrawFn, *, tools: bool) -> Say:
    """One model response; with a tool call when `tools`."""
    calls = [call("echo", text=draw(st.sampled_from(["p", "q"])))] if tools else []
    return Say(
        draw(pieces),
        calls=calls,
        reasoning=draw(st.lists(st.sampled_from(["r", "s"]), max_size=2)),
        data=draw(st.lists(data, max_size=2)),
    )


@st.composite
def scripts(draw: st.DrawFn, *, failures: bool = False) -> list[Scripted]:
    """A run: some tool-calling responses, then a final one; maybe failures in between."""
    n_tools = draw(st.integers(0, 2))
    steps: list[Scripted] = []
    for i in range(n_tools + 1):
        if failures and draw(st.booleans()):
            steps.append(draw(st.sampled_from([Fail(status=503), Fail(status=400)])))
        steps.append(draw(says(tools=i < n_tools)))
    return steps


# --- Continue-only pipelines ---------------------------------------------------------------

HOOK_ROLES: dict[HookName, str] = {
    "process_input": "input",
    "process_input_step": "input",
    "process_api_error": "error",
    "process_output_stream": "output",
    "process_output_step": "output",
    "process_output_result": "output",
}


def _pass(stateful: bool) -> Callable[[Any], Any]:
    """A hook that returns Continue, optionally changing only its own state."""
    if stateful:
        return lambda args: Out(Continue(), (args.state or 0) + 1)
    return lambda args: Continue()


@st.composite
def continue_processors(draw: st.DrawFn) -> list[tuple[BaseProcessor, set[str]]]:
    out: list[tuple[BaseProcessor, set[str]]] = []
    for i in range(draw(st.integers(0, 4))):
        hooks = draw(st.sets(st.sampled_from(list(HOOK_ROLES)), min_size=1))
        stateful = draw(st.booleans())
        fns = {h: _pass(stateful) for h in hooks}
        p = processor(f"p{i}", process_data_parts=draw(st.booleans()), **fns)  # type: ignore[call-overload]
        out.append((p, {HOOK_ROLES[h] for h in hooks}))
    return out


@given(scripts(failures=True), continue_processors())
def test_continue_only_pipelines_are_the_identity(
    script: list[Scripted], procs: list[tuple[BaseProcessor, set[str]]]
) -> None:
    """Processors that only ever return Continue (whatever their hooks, state and data-part
    opt-in) give the same chunks, messages and result as no processors at all."""

    def role(r: str) -> list[BaseProcessor]:
        return [p for p, roles in procs if r in roles]

    bare, _ = _run(Agent.create(MODEL, tools=[echo]), script)
    agent = Agent.create(
        MODEL,
        tools=[echo],
        input_processors=role("input"),
        output_processors=role("output"),
        error_processors=role("error"),
    )
    with_procs, _ = _run(agent, script)
    assert with_procs.trace.chunks == bare.trace.chunks
    assert with_procs.result == bare.result


# --- composition of stream processors ------------------------------------------------------

# A stream processor is generated from one rule: what it does to which chunk.
Rule = tuple[str, str]
rules = st.tuples(
    st.sampled_from(
        ["continue", "upper", "suffix", "skip", "skip_nth", "emit", "abort", "count", "redact_data"]
    ),
    st.sampled_from(["a", "b", "c", "x", "1", "3"]),
)


def _rule_hook(rule: Rule) -> Callable[[StreamArgs[int]], StreamResult[int]]:
    kind, arg = rule

    def hook(args: StreamArgs[int]) -> StreamResult[int]:
        part = args.part
        seen = args.state + 1  # how many chunks this processor has seen, this one included
        assert len(args.stream_parts) == seen and args.stream_parts[-1] == part
        text = part.text if isinstance(part, TextDelta) else None
        if kind == "count":
            return Out(Continue(), seen)
        if kind == "skip_nth":
            return Out(Skip() if str(seen) == arg else Continue(), seen)
        effect: StreamResult[int] = Continue()
        if kind == "redact_data" and isinstance(part, DataChunk):
            effect = Replace(DataChunk(part.name, f"redacted-{arg}", part.transient))
        elif text is not None and kind == "upper":
            effect = Replace(TextDelta(part.id, text.upper()))  # type: ignore[union-attr]
        elif text is not None and kind == "suffix":
            effect = Replace(TextDelta(part.id, text + arg))  # type: ignore[union-attr]
        elif text is not None and arg in text and kind == "skip":
            effect = Skip()
        elif text is not None and arg in text and kind == "emit":
            effect = Emit((DataChunk("data-seen", text, transient=arg == "x"),))
        elif text is not None and arg in text and kind == "abort":
            effect = Abort(f"found {arg}", metadata={"text": text})
        return Out(effect, seen)  # type: ignore[arg-type]

    return hook


def rule_processor(i: int, rule: Rule, data_parts: bool) -> BaseProcessor:
    return processor(
        f"r{i}", state=0, process_data_parts=data_parts, process_output_stream=_rule_hook(rule)
    )


SeqState = tuple[tuple[object, ...], tuple[tuple[Chunk, ...], ...]]


class Seq(StatefulProcessor[SeqState]):
    """Stream-processor composition `first; second`: one processor that runs `first`'s
    process_output_stream and then `second`'s on what `first` passed on, exactly as the
    loop runs a list. Each child keeps its own state and sees its own stream_parts; a
    child that did not opt in to data-* parts is bypassed for them."""

    def __init__(self, id: str, first: BaseProcessor, second: BaseProcessor) -> None:
        self.id = id
        self.children = (first, second)
        self.process_data_parts = first.process_data_parts or second.process_data_parts

    def initial_state(self) -> SeqState:
        return (tuple(c.initial_state() for c in self.children), ((), ()))

    def process_output_stream(self, args: StreamArgs[SeqState]) -> StreamResult[SeqState]:
        states, seens = list(args.state[0]), list(args.state[1])
        chunk, emitted = args.part, list[object]()
        effect: object = Continue()
        for i, child in enumerate(self.children):
            if isinstance(chunk, DataChunk) and not child.process_data_parts:
                continue
            seens[i] = (*seens[i], chunk)
            fn = child.hook_functions()["process_output_stream"]
            raw = fn(
                StreamArgs(
                    part=chunk,
                    stream_parts=seens[i],
                    state=states[i],
                    message_list=args.message_list,
                    context=args.context,
                )
            )
            if isinstance(raw, Out):
                eff, states[i] = raw.effect, raw.state
                emitted.extend(raw.emit)
            else:
                eff = raw
            if isinstance(eff, Emit):
                emitted.extend(eff.chunks)
            if isinstance(eff, Abort | Skip):
                effect = eff
                break
            if isinstance(eff, Replace):
                chunk = eff.value
        else:
            effect = Continue() if chunk is args.part else Replace(chunk)
        return Out(effect, (tuple(states), tuple(seens)), tuple(emitted))


def _observable(run: SimRun) -> tuple[object, ...]:
    """What a caller can tell apart, tripwires compared without their processor id."""
    chunks = [
        msgspec.structs.replace(c, processor_id="*") if isinstance(c, Tripwire) else c
        for c in run.trace.chunks
    ]
    r = run.result
    tw = msgspec.structs.replace(r.tripwire, processor_id="*") if r.tripwire else None
    return (chunks, r.status, r.text, r.messages, r.steps, r.usage, tw, r.error)


@given(scripts(), st.lists(st.tuples(rules, st.booleans()), min_size=3, max_size=3))
def test_pipeline_composition_is_associative(
    script: list[Scripted], spec: list[tuple[Rule, bool]]
) -> None:
    """Running stream processors [a, b, c] as a list, as (a;b);c and as a;(b;c) gives the
    same chunks, messages and result: the list is the composition, and composing is
    associative."""

    def fresh() -> list[BaseProcessor]:
        return [rule_processor(i, r, dp) for i, (r, dp) in enumerate(spec)]

    a, b, c = fresh()
    as_list, _ = _run(Agent.create(MODEL, tools=[echo], output_processors=[a, b, c]), script)
    a, b, c = fresh()
    left = Seq("(ab)c", Seq("ab", a, b), c)
    as_left, _ = _run(Agent.create(MODEL, tools=[echo], output_processors=[left]), script)
    a, b, c = fresh()
    right = Seq("a(bc)", a, Seq("bc", b, c))
    as_right, _ = _run(Agent.create(MODEL, tools=[echo], output_processors=[right]), script)
    note(f"chunks: {as_list.trace.chunk_types()}")
    assert _observable(as_left) == _observable(as_right)
    assert _observable(as_left) == _observable(as_list)


# --- Skip ----------------------------------------------------------------------------------


class Recorder(StatefulProcessor[None]):
    """Sees everything (data parts too), changes nothing."""

    id = "rec"
    process_data_parts = True

    def initial_state(self) -> None:
        return None

    def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
        return Continue()


class SkipAt(StatefulProcessor[int]):
    """Skips the chunks it sees at the given positions (0-based, in arrival order)."""

    id = "skip"
    process_data_parts = True

    def __init__(self, at: frozenset[int]) -> None:
        self.at = at

    def initial_state(self) -> int:
        return 0

    def process_output_stream(self, args: StreamArgs[int]) -> StreamResult[int]:
        return Out(Skip() if args.state in self.at else Continue(), args.state + 1)


@given(scripts(), st.data())
def test_skip_removes_exactly_the_skipped_chunks(script: list[Scripted], d: st.DataObject) -> None:
    """A processor that skips the chunks at some positions removes exactly those chunks
    from the stream, and exactly their text and data from the messages; nothing else
    changes. (Tool calls are not skipped: dropping one changes the run, not just a chunk.)"""
    base, _ = _run(Agent.create(MODEL, tools=[echo], output_processors=[Recorder()]), script)
    chunks = base.trace.chunks
    skippable = [i for i, c in enumerate(chunks) if not isinstance(c, ToolCall)]
    at = frozenset(d.draw(st.sets(st.sampled_from(skippable)) if skippable else st.just(set())))
    run, _ = _run(Agent.create(MODEL, tools=[echo], output_processors=[SkipAt(at)]), script)
    kept = [c for i, c in enumerate(chunks) if i not in at]
    assert run.trace.chunks == kept
    r = run.result
    assert r.text == "".join(c.text for c in kept if isinstance(c, TextDelta))
    kept_data = [
        DataPart(c.name, c.data) for c in kept if isinstance(c, DataChunk) and not c.transient
    ]
    assert [p for m in r.messages.messages for p in m.parts if isinstance(p, DataPart)] == kept_data
    # nothing else changes: the same status, tool calls, tool results and usage
    b = base.result
    assert r.status == b.status
    assert [s.tool_calls for s in r.steps] == [s.tool_calls for s in b.steps]
    assert [m for m in r.messages.messages if m.role == "tool"] == [
        m for m in b.messages.messages if m.role == "tool"
    ]
    assert r.usage == b.usage


# --- retry bounds -----------------------------------------------------------------------------


class RejectN(StatefulProcessor[int]):
    """Asks for a retry (with feedback) for the first `n` final (tool-free) responses."""

    id = "reject"

    def __init__(self, n: int) -> None:
        self.n = n

    def initial_state(self) -> int:
        return 0

    def process_output_step(self, args: OutputStepArgs[int]) -> OutputStepResult[int]:
        if not args.tool_calls and args.state < self.n:
            return Out(Abort(f"feedback {args.state}", retry=True), args.state + 1)
        return Continue()


@given(st.integers(0, 4), st.integers(0, 6), st.integers(0, 2))
def test_processor_retries_never_exceed_their_bound_and_each_adds_one_feedback(
    bound: int, rejections: int, tool_steps: int
) -> None:
    """With max_processor_retries = bound and a guard rejecting the first k final
    responses: exactly min(k, bound) retries happen; each rerun's request is the previous
    attempt's plus exactly one feedback message (after the conversation, the earlier
    history untouched); past the bound the run trips instead of retrying."""
    script: list[Scripted] = [Say("r", calls=[call("echo", text="t")]) for _ in range(tool_steps)]
    script += [Say(f"final {i}") for i in range(rejections + 1)]
    agent = Agent.create(
        MODEL, tools=[echo], output_processors=[RejectN(rejections)], max_processor_retries=bound
    )
    run, model = _run(agent, script)
    r = run.result
    retries = min(rejections, bound)
    assert r.retry_count == retries
    assert len(model.requests) == tool_steps + retries + 1
    assert r.status == ("finished" if rejections <= bound else "tripped")
    feedback = [m for m in r.messages.messages if m.metadata and "feedback_from" in m.metadata]
    assert [m.text for m in feedback] == [f"feedback {i}" for i in range(retries)]
    for j in range(retries):
        before, after = model.requests[tool_steps + j], model.requests[tool_steps + j + 1]
        assert after.messages[:-1] == before.messages
        assert after.messages[-1] == feedback[j]
        assert after.system == before.system


class AlwaysRetry(StatefulProcessor[None]):
    id = "always"

    def initial_state(self) -> None:
        return None

    def process_api_error(self, args: ApiErrorArgs[None]) -> ApiErrorResult[None]:
        return Retry()


@given(st.integers(0, 4), st.integers(0, 6))
def test_api_error_retries_never_exceed_their_bound(bound: int, failures: int) -> None:
    """With max_api_error_retries = bound and f rejections in a row, an error processor
    that always retries gets min(f, bound) retries: the call is made min(f, bound) + 1
    times, and the run fails exactly when f > bound."""
    script: list[Scripted] = [Fail(status=400)] * failures + [Say("ok")]
    agent = Agent.create(MODEL, error_processors=[AlwaysRetry()], max_api_error_retries=bound)
    run, model = _run(agent, script)
    assert run.result.api_error_retry_count == min(failures, bound)
    assert len(model.requests) == min(failures, bound) + 1
    assert run.result.status == ("finished" if failures <= bound else "failed")


# --- system messages ------------------------------------------------------------------------


@given(
    st.lists(st.sampled_from(["base", "rules"]), min_size=0, max_size=2),
    st.lists(
        st.none() | st.lists(st.sampled_from(["x", "y", "z"]), max_size=2), min_size=1, max_size=5
    ),
)
def test_system_message_changes_never_leak_into_the_next_step(
    base: list[str], changes: list[list[str] | None]
) -> None:
    """Whatever system messages process_input_step sets at each step, every step starts
    from the agent's original system messages, and the run keeps only those."""
    seen: list[tuple[str, ...]] = []

    def change(args: InputStepArgs[None]) -> InputStepResult[None]:
        seen.append(tuple(s.content for s in args.system_messages))
        extra = changes[args.step_number]
        if extra is None:
            return Continue()
        new = (*args.system_messages, *(SystemMessage(e, "step") for e in extra))
        return Replace(StepChange(system_messages=new))

    n = len(changes)
    script: list[Scripted] = [Say(calls=[call("echo", text="t")]) for _ in range(n - 1)]
    script.append(Say("done"))
    agent = Agent.create(
        MODEL,
        instructions=base,
        tools=[echo],
        input_processors=[processor("sys", process_input_step=change)],
    )
    run, model = _run(agent, script)
    assert run.result.status == "finished"
    assert seen == [tuple(base)] * n
    for req, extra in zip(model.requests, changes, strict=True):
        assert [s.content for s in req.system] == base + (extra or [])
    assert [s.content for s in run.result.messages.system] == base
