"""Runs with memory on every interpreter (sync, async, both simulators) over every store
(in memory, SQLite, PostgreSQL): what a save promises under a cancel and a failure, what
working memory keeps of a gated tool call, whose threads a run reads, the order of turns
(a turn resumed after an approval is filed before later turns) and a restart over the
same storage."""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence
from contextlib import contextmanager

import pytest

from effects import AskApproval, Continue, Perform, Replace, SkipCall, ask
from interpreters.core.cancel import CancelSignal
from interpreters.memory import Embedder, HashEmbedder, MemoryStore, working_memory_key
from interpreters.observers.observe import Observer
from interpreters.testing import Say, ScriptedModel, call
from pipeline.agent import Agent
from pipeline.approval import approve, deny, edit, resumption
from pipeline.processor import (
    ApprovedArgs,
    ApprovedResult,
    Processor,
    ToolCallArgs,
    ToolCallResult,
    processor,
)
from pipeline.processors import MessageHistory, SemanticRecall, WorkingMemory
from pipeline.processors.memory.requests import SetWorkingMemory
from pipeline.values.result import ProcessorFailed
from tests.helpers import CancelAt, make_agent, user_texts
from tests.memory.conftest import Backend
from tests.memory.runs import KINDS, Runs, WatchedStore


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def opened(sync_backend: Backend) -> MemoryStore:
    return sync_backend.open()


@contextmanager
def runs_of(
    kind: str, script: list[Say], store: MemoryStore, *, embedder: Embedder | None = None,
    observers: Sequence[Observer] = (),
) -> Iterator[Runs]:
    runs = Runs(kind, ScriptedModel(script), store, embedder, observers=observers)
    try:
        yield runs
    finally:
        runs.close()


def texts(store: MemoryStore, thread: str = "t1") -> list[str]:
    return [m.text for m in store.last_messages(thread, 100) if m.text]


def wm(store: MemoryStore, thread: str = "t1") -> str | None:
    return store.get_working_memory(working_memory_key(thread_id=thread))


def remembering() -> Agent:
    return make_agent(input_processors=[MessageHistory(), WorkingMemory(scope="thread")])


def _update(text: str) -> list[Say]:
    return [Say(calls=[call("update_working_memory", text=text)]), Say("answer")]


# --- a cancel while the turn is saved -----------------------------------------------------


def test_a_cancel_that_lands_while_the_turn_is_saved_is_too_late_the_run_finishes(
    kind: str, opened: MemoryStore
) -> None:
    store = WatchedStore(opened)
    signal = CancelSignal()
    with runs_of(kind, _update("likes tea"), store) as runs:
        store.before_write = runs.canceller(signal, "the caller left")
        result = runs.run(remembering(), "hi", thread_id="t1", resource_id="ann", signal=signal)
    assert signal.cancelled and store.writes >= 1
    # The store and the result agree: the turn was kept, and the caller is told so.
    assert (result.status, result.text) == ("finished", "answer")
    assert texts(opened) == ["hi", "answer"]
    assert wm(opened) == "likes tea"


def test_a_cancel_before_the_turn_is_saved_saves_nothing(
    kind: str, opened: MemoryStore
) -> None:
    signal = CancelSignal()
    at_save = CancelAt(signal, 1, kinds=(Perform,))  # history loaded (0), then the save
    agent = make_agent(input_processors=[MessageHistory()])
    with runs_of(kind, [Say("answer")], opened, observers=[at_save]) as runs:
        result = runs.run(agent, "hi", thread_id="t1", resource_id="ann", signal=signal)
    assert (result.status, result.text) == ("cancelled", "")
    assert opened.last_messages("t1", 100) == ()


# --- a failure while the turn is saved ------------------------------------------------------


def test_a_nul_in_the_models_working_memory_update_is_an_error_it_sees_not_a_failed_run(
    kind: str, opened: MemoryStore
) -> None:
    with runs_of(kind, _update("name: Ann\x00"), opened) as runs:
        result = runs.run(remembering(), "hi", thread_id="t1", resource_id="ann")
    assert result.status == "finished"
    assert result.steps[0].tool_results[0].is_error
    assert texts(opened) == ["hi", "answer"]
    assert wm(opened) is None


@pytest.mark.parametrize("bad", ["a NUL", "a thread of another user"])
def test_a_write_that_fails_undoes_the_whole_turn_and_fails_the_run(
    kind: str, opened: MemoryStore, bad: str
) -> None:
    opened.save_messages("bobs", [], resource_id="bob", created_at=0.0)
    thread, text = ("t1", "notes\x00") if bad == "a NUL" else ("bobs", "notes")

    class Writer(Processor):
        id = "writer"

        def process_approved(
            self, args: ApprovedArgs[None]
        ) -> Generator[object, object, ApprovedResult[None]]:
            yield from ask(SetWorkingMemory(
                thread_id=thread, resource_id="ann", scope="thread", text=text))
            return Continue()

    agent = make_agent(input_processors=[MessageHistory(), Writer()])
    with runs_of(kind, [Say("answer")], opened) as runs:
        result = runs.run(agent, "hi", thread_id="t1", resource_id="ann")
    assert result.status == "failed"
    assert isinstance(result.error, ProcessorFailed)
    assert result.error.hook == "process_approved"
    assert result.text == ""
    assert opened.last_messages("t1", 100) == ()  # the history's save is undone too
    assert wm(opened, thread) is None


# --- working memory keeps what its tool received --------------------------------------------


def _gate(effect: ToolCallResult[None]) -> Agent:
    def gate(a: ToolCallArgs[None]) -> ToolCallResult[None]:
        return effect if a.call.tool_name == "update_working_memory" else Continue()

    return make_agent(input_processors=[
        MessageHistory(), WorkingMemory(scope="thread"),
        processor("gate", process_tool_call=gate)])


def test_working_memory_keeps_the_text_a_gate_gave_its_tool(
    kind: str, opened: MemoryStore
) -> None:
    with runs_of(kind, _update("name: Eve"), opened) as runs:
        result = runs.run(_gate(Replace({"text": "name: Ann"})), "hi", thread_id="t1")
        sent = runs.model.requests[1].system
    assert result.status == "finished"
    assert wm(opened) == "name: Ann"
    assert "name: Ann" in sent[-1].content  # the next step showed what the tool got


def test_working_memory_keeps_nothing_of_a_call_a_gate_answered(
    kind: str, opened: MemoryStore
) -> None:
    with runs_of(kind, _update("name: Eve"), opened) as runs:
        result = runs.run(_gate(SkipCall("saved")), "hi", thread_id="t1")
        sent = runs.model.requests[1].system
    assert result.status == "finished"
    assert wm(opened) is None
    assert "name: Eve" not in sent[-1].content


@pytest.mark.parametrize("decision", ["edit", "deny"])
def test_working_memory_keeps_what_the_approver_let_its_tool_run_with(
    kind: str, opened: MemoryStore, decision: str
) -> None:
    agent = _gate(AskApproval("remember this?"))
    with runs_of(kind, _update("name: Eve"), opened) as runs:
        waiting = runs.run(agent, "hi", thread_id="t1")
        s = waiting.suspension
        assert waiting.status == "suspended" and s is not None
        (p,) = s.pending
        decided = edit(p, {"text": "name: Ann"}) if decision == "edit" else deny(p, "no")
        result = runs.run(agent, (), thread_id="t1", resume=resumption(s, [decided]))
    assert result.status == "finished"
    assert wm(opened) == ("name: Ann" if decision == "edit" else None)


# --- whose threads a run reads -----------------------------------------------------------


def test_a_thread_kept_without_a_user_is_read_by_no_user(
    kind: str, opened: MemoryStore
) -> None:
    embedder = HashEmbedder()
    kept = make_agent(input_processors=[MessageHistory(), SemanticRecall()])
    script = [Say("noted"), Say("x"), Say("no idea")]
    with runs_of(kind, script, opened, embedder=embedder) as runs:
        assert runs.run(kept, "my pin is 1234", thread_id="t0").status == "finished"
        other = runs.run(kept, "my pin?", thread_id="t0", resource_id="bob")
        recall = make_agent(input_processors=[SemanticRecall(scope="resource")])
        mine = runs.run(recall, "my pin?", thread_id="bobs", resource_id="bob")
        asked = runs.model.requests
    assert isinstance(other.error, ProcessorFailed)
    assert other.error.error_type == "ThreadOwnerMismatch"
    assert mine.status == "finished"
    assert len(asked) == 2
    assert user_texts(asked[1]) == ["my pin?"]  # nothing of t0 recalled for bob


# --- the order of turns ------------------------------------------------------------------------


def _pay(to: str, amount: int) -> str:
    """Send money."""
    return f"sent {amount} to {to}"


def _ask_first(a: ToolCallArgs[None]) -> ToolCallResult[None]:
    return AskApproval(f"pay {a.args['to']}?")


def test_a_turn_resumed_after_an_approval_is_filed_before_later_turns(
    kind: str, opened: MemoryStore
) -> None:
    agent = make_agent(tools=[_pay], input_processors=[
        MessageHistory(), processor("approve", process_tool_call=_ask_first)])
    wait = 1.0 if "sim" in kind else 0.0  # (virtual time passes only in a simulator)
    script = [Say(calls=[call("_pay", to="eve", amount=5)], latency=wait),
              Say("hello there", latency=wait), Say("paid", latency=wait),
              Say("You asked me to pay Eve.", latency=wait)]
    with runs_of(kind, script, opened) as runs:
        waiting = runs.run(agent, "pay eve", thread_id="t1")
        s = waiting.suspension
        assert s is not None
        assert runs.run(agent, "hello", thread_id="t1").status == "finished"
        go_on = resumption(s, [approve(p) for p in s.pending])
        assert runs.run(agent, (), thread_id="t1", resume=go_on).status == "finished"
        runs.run(agent, "What did I ask first?", thread_id="t1")
        asked = runs.model.requests[3]
    assert texts(opened) == ["pay eve", "paid", "hello", "hello there",
                             "What did I ask first?", "You asked me to pay Eve."]
    assert user_texts(asked) == ["pay eve", "hello", "What did I ask first?"]


# --- a restart over the same storage --------------------------------------------------------


def test_a_thread_goes_on_after_a_restart_over_the_same_storage(
    kind: str, sync_backend: Backend
) -> None:
    agent = make_agent(input_processors=[MessageHistory()])
    with runs_of(kind, [Say("Nice to meet you, Ann.")], sync_backend.open()) as runs:
        assert runs.run(agent, "My name is Ann.", thread_id="t1").status == "finished"
    with runs_of(kind, [Say("You are Ann.")], sync_backend.open()) as runs:
        again = runs.run(agent, "What is my name?", thread_id="t1")
        asked = runs.model.requests[0]
    assert again.status == "finished", again.error
    assert user_texts(asked) == ["My name is Ann.", "What is my name?"]
