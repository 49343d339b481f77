"""Memory keeps only what was approved, and summarized history stays paired.

- **Nothing stored unless approved.** Random runs with a thread's history
  (`MessageHistory` over an `InMemoryStore`), scripted answers and tool calls, a stream
  processor that redacts, an output-step check that discards answers for a retry (and
  trips past the bound) or crashes, an output-result check that may block, and a cancel
  at a random command, on the `Simulator` and the `AsyncSimulator`: a run that did not
  finish stores nothing; one that finished stores exactly its new messages as its result
  carries them (input, then its answers and tool results), nothing redacted, discarded
  or blocked among them; what earlier runs stored is never changed.
- **Sent history always paired.** For any paired history and any budget, the cut
  `Summarization` makes leaves both halves paired and keeps the newest user message;
  a run with it sends the model a paired history that is a tail of the conversation.
"""

from __future__ import annotations

import anyio
import msgspec
from hypothesis import assume, given
from hypothesis import strategies as st

from effects import Abort, Continue, Replace
from interpreters.core.cancel import CancelSignal
from interpreters.memory import InMemoryStore, async_memory_handlers, memory_handlers
from interpreters.testing import AsyncSimulator, Say, ScriptedModel, Simulator, call
from pipeline.agent import Agent
from pipeline.processor import (
    OutputResultArgs,
    OutputResultResult,
    OutputStepArgs,
    OutputStepResult,
    StreamArgs,
    StreamResult,
    processor,
)
from pipeline.processors import MessageHistory, Summarization
from pipeline.processors.memory.summary import summary_cut
from pipeline.tools import tool
from pipeline.values.chunks import TextDelta, ToolResult
from pipeline.values.messages import Message, MessageList, TextPart
from pipeline.values.pairing import cut_points, is_paired
from pipeline.values.result import RunResult
from pipeline.values.validate import check_messages
from properties.tool_histories import well_formed
from tests.helpers import CancelAt

WORDS = ("fine", "secret", "ok")
MARKS = ("", "", "", "", "bad", "boom")
"""Mostly none (so that many runs finish); "bad" is discarded for a retry, "boom" crashes."""


def _lookup(key: str) -> str:
    """Look a key up."""
    return "secret" if key == "s" else f"value of {key}"


def _redact(args: StreamArgs[None]) -> StreamResult[None]:
    p = args.part
    if isinstance(p, TextDelta) and "secret" in p.text:
        return Replace(TextDelta(p.id, p.text.replace("secret", "[x]")))
    if isinstance(p, ToolResult) and isinstance(p.result, str) and "secret" in p.result:
        return Replace(ToolResult(p.tool_call_id, p.tool_name, "[x]"))
    return Continue()


def _check(args: OutputStepArgs[None]) -> OutputStepResult[None]:
    if "boom" in args.text:
        raise RuntimeError("the check crashed")
    return Abort("not that", retry=True) if "bad" in args.text else Continue()


def _agent(block: bool) -> Agent:
    def final(args: OutputResultArgs[None]) -> OutputResultResult[None]:
        return Abort("blocked") if block else Continue()

    return Agent.create(
        "sim/model",
        tools=[tool(_lookup, name="lookup")],
        max_processor_retries=1,
        input_processors=[MessageHistory(last_messages=50)],
        output_processors=[
            processor("redact", process_output_stream=_redact),
            processor("check", process_output_step=_check),
            processor("final", process_output_result=final),
        ],
    )


answers = st.builds(
    lambda words, mark, key: Say(
        " ".join((*words, mark)).strip(), calls=[call("lookup", key=key)] if key else []),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
    st.sampled_from(MARKS),
    st.one_of(st.none(), st.sampled_from(("s", "k"))),
)
cancel_at = st.one_of(st.none(), st.integers(0, 40))
scripts = st.lists(answers, min_size=1, max_size=5).map(lambda s: [*s, Say("done")])


def _new(result: RunResult) -> list[Message]:
    ml = result.messages
    return [m for m, s in zip(ml.messages, ml.sources, strict=True) if s in ("input", "response")]


def _stored_as_approved(store: InMemoryStore, before: tuple[Message, ...],
                        result: RunResult) -> None:
    after = store.last_messages("t", 1000)
    assert after[: len(before)] == before  # earlier runs' messages are never changed
    added = after[len(before):]
    if result.status != "finished":
        assert added == ()
        return
    def unstamped(m: Message) -> tuple[str, object]:
        return (m.id, m.parts)
    assert [unstamped(m) for m in added] == [unstamped(m) for m in _new(result)]
    for m in added:
        text = _content(msgspec.to_builtins(m.parts))
        assert "secret" not in text and "bad" not in text and "boom" not in text


def _content(value: object) -> str:
    """What the parts say, without their ids (a random id's hex can spell "bad")."""
    if isinstance(value, dict):
        return " ".join(_content(v) for k, v in value.items() if not k.endswith("id"))
    if isinstance(value, (list, tuple)):
        return " ".join(map(_content, value))
    return str(value)


@given(runs=st.lists(st.tuples(scripts, st.booleans(), cancel_at), min_size=1, max_size=3))
def test_nothing_is_stored_unless_every_output_processor_approved_it(
    runs: list[tuple[list[Say], bool, int | None]],
) -> None:
    store = InMemoryStore()
    for n, (script, block, at) in enumerate(runs):
        signal = CancelSignal()
        sim = Simulator(ScriptedModel(script), handlers=memory_handlers(store),
                        observers=[] if at is None else [CancelAt(signal, at)])
        before = store.last_messages("t", 1000)
        result = sim.run(_agent(block), f"question {n}", thread_id="t", signal=signal).result
        _stored_as_approved(store, before, result)


@given(script=scripts, block=st.booleans(), at=cancel_at)
def test_nothing_is_stored_unless_approved_on_the_async_interpreter(
    script: list[Say], block: bool, at: int | None
) -> None:
    store = InMemoryStore()

    async def main() -> RunResult:
        signal = CancelSignal()
        sim = AsyncSimulator(ScriptedModel(script), handlers=async_memory_handlers(store),
                             observers=[] if at is None else [CancelAt(signal, at)])
        return (await sim.run(_agent(block), "question", thread_id="t", signal=signal)).result

    _stored_as_approved(store, (), anyio.run(main))


@given(history=well_formed(), keep=st.integers(0, 400))
def test_the_summarization_cut_leaves_both_halves_paired(
    history: tuple[Message, ...], keep: int
) -> None:
    assume(is_paired(history))  # (a history with ids repeated across turns is not)
    costs = tuple(10 * len(m.parts) + 4 for m in history)
    users = [i for i, m in enumerate(history) if m.role == "user"]
    last = users[-1] if users else 0
    c = summary_cut(history, costs, keep, last)
    assert c == 0 or (c in cut_points(history) and 0 < c <= last)
    assert is_paired(history[:c]) and is_paired(history[c:])
    if c and sum(costs[c:]) > keep:  # it could not fit: it summarized all it could
        assert all(x > last or x == 0 for x in cut_points(history) if x > c)


@given(history=well_formed(reuse_ids=False), budget=st.integers(1, 200))
def test_a_run_with_summarization_sends_a_paired_tail(
    history: tuple[Message, ...], budget: int
) -> None:
    question = Message(id="q", role="user", parts=(TextPart("and now?"),))
    ml = MessageList.of((*history, question))
    assume(check_messages(ml) is None)
    model = ScriptedModel([Say("ok")])
    sim = Simulator(model, models={"sim/judge": ScriptedModel([Say("a summary")])})
    agent = Agent.create("sim/model", input_processors=[
        Summarization(budget, judge_model="sim/judge")])
    result = sim.run(agent, ml).result
    assert result.status == "finished"
    sent = model.requests[0].messages
    assert is_paired(sent)
    assert [m.id for m in sent] == [m.id for m in ml.messages[len(ml.messages) - len(sent):]]
