"""The memory processors over a store: threads kept across runs, semantic recall, working
memory, summarization, and what is saved (only what every output processor approved)."""

from __future__ import annotations

from collections.abc import Generator, Iterable, Sequence

import anyio
import msgspec
import pytest

from effects import Abort, Continue, Replace, Request, ask
from interpreters.core.cancel import CancelSignal
from interpreters.core.handlers import Handlers
from interpreters.memory import (
    CorruptStoredMessage,
    HashEmbedder,
    InMemoryStore,
    MemoryStoreUnavailable,
    StoreWrite,
    Thread,
    async_memory_handlers,
    memory_handlers,
)
from interpreters.memory.store import RecallHit, Vector
from interpreters.record.journal import Journal, Recorder
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
from pipeline.processor import (
    ApprovedArgs,
    ApprovedResult,
    InputStepArgs,
    InputStepResult,
    OutputResultArgs,
    OutputResultResult,
    OutputStepArgs,
    OutputStepResult,
    Processor,
    StepChange,
    StreamArgs,
    StreamResult,
    processor,
)
from pipeline.processors import (
    MessageHistory,
    ProcessorConfigError,
    SemanticRecall,
    Summarization,
    WorkingMemory,
)
from pipeline.processors.memory.processors import MEMORY_WARNING
from pipeline.processors.memory.summary import SUMMARY_TAG
from pipeline.tools import tool
from pipeline.values.chunks import DataChunk, ErrorChunk, Finish, TextDelta, ToolResult
from pipeline.values.messages import Message, MessageList, TextPart, ToolCallPart, ToolResultPart
from pipeline.values.pairing import is_paired
from pipeline.values.result import ProcessorFailed, RunResult
from tests.helpers import CancelAt, make_agent, system_texts, user_texts


def _echo(x: str) -> str:
    """Say it back."""
    return x


def _leak() -> str:
    """A secret."""
    return "secret"


def stored_texts(store: InMemoryStore, thread: str = "t1") -> list[str]:
    return [m.text for m in store.last_messages(thread, 100) if m.text]


def history_agent(*more: object, **kw: object) -> Agent:
    procs = [MessageHistory(last_messages=10), *more]
    return make_agent(input_processors=procs, **kw)


# --- threads across runs ----------------------------------------------------------------


def test_a_thread_is_kept_across_runs_and_loaded_as_memory() -> None:
    store = InMemoryStore()
    model = ScriptedModel([Say("Hello Ann"), Say("You are Ann")])
    sim = Simulator(model, handlers=memory_handlers(store))
    agent = history_agent()
    first = sim.run(agent, "my name is Ann", thread_id="t1", resource_id="u1")
    assert first.result.status == "finished"
    assert stored_texts(store) == ["my name is Ann", "Hello Ann"]
    second = sim.run(agent, "what is my name?", thread_id="t1", resource_id="u1")
    assert user_texts(model.requests[1]) == ["my name is Ann", "what is my name?"]
    ml = second.result.messages
    assert [ml.source_of(m.id) for m in ml.messages] == ["memory", "memory", "input", "response"]
    assert second.result.text == "You are Ann"  # the run's own answer only
    assert stored_texts(store) == ["my name is Ann", "Hello Ann", "what is my name?", "You are Ann"]
    assert all(m.thread_id == "t1" and m.resource_id == "u1"
               for m in store.last_messages("t1", 100))


def test_threads_are_apart() -> None:
    store = InMemoryStore()
    model = ScriptedModel([Say("a"), Say("b")])
    sim = Simulator(model, handlers=memory_handlers(store))
    sim.run(history_agent(), "in one", thread_id="one")
    sim.run(history_agent(), "in two", thread_id="two")
    assert user_texts(model.requests[1]) == ["in two"]
    assert stored_texts(store, "one") == ["in one", "a"]


def test_the_loaded_history_never_starts_inside_a_tool_exchange() -> None:
    store = InMemoryStore()
    echo = tool(_echo, name="echo")
    model = ScriptedModel([Say(calls=[call("echo", x="1")]), Say("done"), Say("again")])
    sim = Simulator(model, handlers=memory_handlers(store))
    sim.run(history_agent(tools=[echo]), "go", thread_id="t1")
    assert len(store.last_messages("t1", 100)) == 4  # user, call, result, answer
    # the last 2 messages are the tool result and the answer: the result's call is not in
    # them, so the result is not loaded either
    sim.run(make_agent(input_processors=[MessageHistory(last_messages=2)], tools=[echo]),
            "next", thread_id="t1")
    sent = model.requests[2].messages
    assert is_paired(sent)
    assert [m.text for m in sent] == ["done", "next"]


def test_history_on_the_async_interpreter_over_a_sync_store_and_an_async_one() -> None:
    store = InMemoryStore()

    async def main(handlers: Handlers, model: ScriptedModel) -> None:
        sim = AsyncSimulator(model, handlers=handlers)
        await sim.run(history_agent(), "first", thread_id="t1")
        await sim.run(history_agent(), "second", thread_id="t1")

    model = ScriptedModel([Say("one"), Say("two")])
    anyio.run(main, async_memory_handlers(store), model)
    assert user_texts(model.requests[1]) == ["first", "second"]
    other = InMemoryStore()
    anyio.run(main, async_memory_handlers(AsyncOver(other)), ScriptedModel([Say("x"), Say("y")]))
    assert stored_texts(other) == ["first", "x", "second", "y"]


def test_history_on_the_sync_interpreter() -> None:
    store = InMemoryStore()
    interp = SyncInterpreter(ScriptedModel([Say("one"), Say("two")]),
                             handlers=memory_handlers(store))
    interp.run(history_agent(), "first", thread_id="t1")
    result = interp.run(history_agent(), "second", thread_id="t1")
    assert result.status == "finished"
    assert stored_texts(store) == ["first", "one", "second", "two"]


class AsyncOver:
    """An `AsyncMemoryStore` over a sync one (for the async handlers' awaited path)."""

    def __init__(self, inner: InMemoryStore) -> None:
        self.inner = inner

    async def ensure_thread(
        self, thread_id: str, *, resource_id: str | None, created_at: float
    ) -> Thread:
        return self.inner.ensure_thread(thread_id, resource_id=resource_id, created_at=created_at)

    async def get_thread(self, thread_id: str) -> Thread | None:
        return self.inner.get_thread(thread_id)

    async def last_messages(self, thread_id: str, limit: int) -> tuple[Message, ...]:
        return self.inner.last_messages(thread_id, limit)

    async def messages_by_id(self, thread_id: str, ids: Iterable[str]) -> tuple[Message, ...]:
        return self.inner.messages_by_id(thread_id, ids)

    async def neighbours(
        self, thread_id: str, message_id: str, *, before: int, after: int
    ) -> tuple[Message, ...]:
        return self.inner.neighbours(thread_id, message_id, before=before, after=after)

    async def save_messages(
        self, thread_id: str, messages: Iterable[Message], *, resource_id: str | None,
        created_at: float,
    ) -> int:
        return self.inner.save_messages(
            thread_id, messages, resource_id=resource_id, created_at=created_at)

    async def get_working_memory(self, key: str) -> str | None:
        return self.inner.get_working_memory(key)

    async def set_working_memory(self, key: str, text: str) -> None:
        self.inner.set_working_memory(key, text)

    async def save_vectors(
        self, thread_id: str, vectors: Iterable[tuple[str, Vector]], *, resource_id: str | None
    ) -> None:
        self.inner.save_vectors(thread_id, vectors, resource_id=resource_id)

    async def search(
        self, vector: Vector, *, k: int, thread_id: str | None = None,
        resource_id: str | None = None,
    ) -> tuple[RecallHit, ...]:
        return self.inner.search(vector, k=k, thread_id=thread_id, resource_id=resource_id)

    async def write(self, writes: Sequence[StoreWrite]) -> None:
        self.inner.write(writes)

    async def close(self) -> None:
        self.inner.close()


# --- nothing saved unless approved ------------------------------------------------------


def _block_result(args: OutputResultArgs[None]) -> OutputResultResult[None]:
    return Abort("not this answer")


def _crash_step(args: OutputStepArgs[None]) -> OutputStepResult[None]:
    raise RuntimeError("guard crashed")


def _retry_once(args: OutputStepArgs[None]) -> OutputStepResult[None]:
    return Abort("try again", retry=True) if args.retry_count == 0 else Continue()


def _redact(args: StreamArgs[None]) -> StreamResult[None]:
    p = args.part
    if isinstance(p, TextDelta) and "secret" in p.text:
        return Replace(TextDelta(p.id, p.text.replace("secret", "[redacted]")))
    if isinstance(p, ToolResult) and p.result == "secret":
        return Replace(ToolResult(p.tool_call_id, p.tool_name, "[redacted]"))
    return Continue()


@pytest.mark.parametrize("guard", [
    processor("block", process_output_result=_block_result),
    processor("crash", process_output_step=_crash_step),
])
def test_a_blocked_or_crashed_answer_saves_nothing(guard: object) -> None:
    store = InMemoryStore()
    sim = Simulator(ScriptedModel([Say("bad answer")]), handlers=memory_handlers(store))
    agent = history_agent(output_processors=[guard])
    result = sim.run(agent, "hi", thread_id="t1").result
    assert result.status in ("tripped", "failed")
    assert store.last_messages("t1", 100) == ()


def test_a_discarded_response_is_not_saved_the_retried_one_is() -> None:
    store = InMemoryStore()
    sim = Simulator(ScriptedModel([Say("first try"), Say("second try")]),
                    handlers=memory_handlers(store))
    agent = history_agent(output_processors=[processor("retry", process_output_step=_retry_once)])
    assert sim.run(agent, "hi", thread_id="t1").result.retry_count == 1
    assert stored_texts(store) == ["hi", "second try"]  # no discarded try, no feedback


def test_a_redacted_answer_and_tool_result_are_saved_redacted() -> None:
    store = InMemoryStore()
    leak = tool(_leak, name="leak")
    model = ScriptedModel([Say("the secret is", calls=[call("leak")]), Say("a secret")])
    sim = Simulator(model, handlers=memory_handlers(store))
    agent = history_agent(tools=[leak],
                          output_processors=[processor("redact", process_output_stream=_redact)])
    sim.run(agent, "hi", thread_id="t1")
    saved = store.last_messages("t1", 100)
    results = [p.result for m in saved for p in m.parts if isinstance(p, ToolResultPart)]
    assert results == ["[redacted]"]
    assert "secret" not in repr(saved)


def test_a_cancelled_run_saves_nothing() -> None:
    store = InMemoryStore()
    signal = CancelSignal()
    sim = Simulator(ScriptedModel([Say(["a", "b", "c"])]), handlers=memory_handlers(store),
                    observers=[CancelAt(signal, 3)])
    result = sim.run(history_agent(), "hi", thread_id="t1", signal=signal).result
    assert result.status == "cancelled"
    assert store.last_messages("t1", 100) == ()


def _rewrite_for_model(args: InputStepArgs[None]) -> InputStepResult[None]:
    ml = args.message_list
    changed = ml.map_messages(
        lambda m: m.with_parts((TextPart("REWRITTEN"),)) if m.role == "user" else m)
    return Replace(StepChange(message_list=changed))


def test_a_per_step_change_of_the_input_changes_nothing_in_the_store() -> None:
    store = InMemoryStore()
    model = ScriptedModel([Say("ok")])
    sim = Simulator(model, handlers=memory_handlers(store))
    agent = history_agent(processor("view", process_input_step=_rewrite_for_model))
    sim.run(agent, "the original", thread_id="t1")
    assert user_texts(model.requests[0]) == ["REWRITTEN"]
    assert stored_texts(store) == ["the original", "ok"]


# --- bad input and failing parts ----------------------------------------------------------


@pytest.mark.parametrize("thread_id", [None, 7, ""])
def test_a_thread_id_that_is_not_a_string_fails_the_run(thread_id: object) -> None:
    store = InMemoryStore()
    sim = Simulator(ScriptedModel([Say("x")]), handlers=memory_handlers(store))
    result = sim.run(history_agent(), "hi", thread_id=thread_id).result  # type: ignore[arg-type]
    assert isinstance(result.error, ProcessorFailed)
    assert result.error.error_type == "InvalidThreadId"


class Broken(InMemoryStore):
    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    def last_messages(self, thread_id: str, limit: int) -> tuple[Message, ...]:
        raise self.error

    def search(self, vector: Vector, *, k: int, thread_id: str | None = None,
               resource_id: str | None = None) -> tuple[RecallHit, ...]:
        raise self.error


@pytest.mark.parametrize("error", [
    MemoryStoreUnavailable("connection refused"),
    CorruptStoredMessage("t1", "m1", "not a message"),
])
def test_a_store_that_fails_fails_the_run_closed(error: Exception) -> None:
    model = ScriptedModel([Say("x")])
    sim = Simulator(model, handlers=memory_handlers(Broken(error)))
    result = sim.run(history_agent(), "hi", thread_id="t1").result
    assert isinstance(result.error, ProcessorFailed)
    assert result.error.error_type == type(error).__name__
    assert model.requests == []  # never asked without its memory


class FailingEmbedder:
    def embed(self, texts: tuple[str, ...]) -> tuple[Vector, ...]:
        raise ConnectionError("embedder down")


def test_a_failing_embedder_fails_the_run_unless_told_to_warn() -> None:
    store = InMemoryStore()
    handlers = memory_handlers(store, FailingEmbedder())
    strict = make_agent(input_processors=[SemanticRecall()])
    failed = Simulator(ScriptedModel([Say("x")]), handlers=handlers).run(
        strict, "hi", thread_id="t1").result
    assert isinstance(failed.error, ProcessorFailed)
    assert failed.error.error_type == "ConnectionError"
    lenient = make_agent(input_processors=[SemanticRecall(on_recall_error="warn")])
    ran = Simulator(ScriptedModel([Say("x")]), handlers=handlers).run(
        lenient, "hi", thread_id="t1")
    assert ran.result.status == "finished"
    warnings = [c for c in ran.trace.chunks if isinstance(c, DataChunk)]
    assert [w.name for w in warnings] == [MEMORY_WARNING, MEMORY_WARNING]  # recall, index
    assert isinstance(warnings[0].data, dict)
    assert warnings[0].data["error_type"] == "ConnectionError"


def test_a_failed_save_fails_the_run_and_drops_its_answer() -> None:
    class NoSave(InMemoryStore):
        def write(self, writes: Sequence[StoreWrite]) -> None:
            raise MemoryStoreUnavailable("disk full")

    sim = Simulator(ScriptedModel([Say("answer")]), handlers=memory_handlers(NoSave()))
    ran = sim.run(history_agent(), "hi", thread_id="t1")
    result = ran.result
    assert not any(isinstance(c, Finish) for c in ran.trace.chunks)  # told it failed
    assert isinstance(ran.trace.chunks[-1], ErrorChunk)
    assert result.status == "failed"
    assert isinstance(result.error, ProcessorFailed)
    assert result.error.hook == "process_approved"
    assert [m.text for m in result.messages.messages] == ["hi"]


def test_every_option_is_checked() -> None:
    bad: list[object] = [
        lambda: MessageHistory(last_messages=-1),
        lambda: MessageHistory(last_messages=True),
        lambda: SemanticRecall(top_k=0),
        lambda: SemanticRecall(scope="threads"),  # type: ignore[arg-type]
        lambda: SemanticRecall(on_recall_error="ignore"),  # type: ignore[arg-type]
        lambda: SemanticRecall(message_range=-1),
        lambda: WorkingMemory(scope="user"),  # type: ignore[arg-type]
        lambda: WorkingMemory(tool_name="has space"),
        lambda: Summarization(0, judge_model="j"),
        lambda: Summarization(100, judge_model=""),
        lambda: Summarization(100, judge_model="j", keep_tokens=200),
    ]
    for make in bad:
        assert callable(make)
        with pytest.raises(ProcessorConfigError):
            make()


# --- semantic recall ---------------------------------------------------------------------


def test_recall_brings_back_an_old_fact_with_its_neighbours() -> None:
    store = InMemoryStore()
    handlers = memory_handlers(store, HashEmbedder())
    model = ScriptedModel([Say("noted"), Say("ok"), Say("ok"), Say("It is blue")])
    sim = Simulator(model, handlers=handlers)
    agent = make_agent(input_processors=[
        MessageHistory(last_messages=2), SemanticRecall(top_k=1, message_range=1)])
    sim.run(agent, "my favourite colour is blue", thread_id="t1")
    sim.run(agent, "the weather is fine today", thread_id="t1")
    sim.run(agent, "tell me a joke", thread_id="t1")
    sim.run(agent, "what is my favourite colour?", thread_id="t1")
    sent = [m.text for m in model.requests[3].messages]
    # recalled (the fact and its answer), then the last two messages, then the question
    assert sent[:2] == ["my favourite colour is blue", "noted"]
    assert sent[-1] == "what is my favourite colour?"


def test_recall_by_resource_reaches_the_users_other_threads() -> None:
    store = InMemoryStore()
    handlers = memory_handlers(store, HashEmbedder())
    model = ScriptedModel([Say("noted"), Say("Paris")])
    sim = Simulator(model, handlers=handlers)
    agent = make_agent(input_processors=[SemanticRecall(top_k=1, scope="resource")])
    sim.run(agent, "I live in Paris", thread_id="old", resource_id="u1")
    sim.run(agent, "where do I live?", thread_id="new", resource_id="u1")
    assert "I live in Paris" in [m.text for m in model.requests[1].messages]


def test_a_recalled_tool_call_always_has_its_result() -> None:
    store = InMemoryStore()
    msgs = (
        Message(id="m1", role="user", parts=(TextPart("look up the weather in Oslo"),)),
        Message(id="m2", role="assistant", parts=(
            TextPart("looking up weather"), ToolCallPart("c1", "weather", {"city": "Oslo"}))),
        Message(id="m3", role="tool", parts=(ToolResultPart("c1", "weather", "rain"),)),
        Message(id="m4", role="assistant", parts=(TextPart("it rains in Oslo"),)),
    )
    store.save_messages("t1", msgs, resource_id=None, created_at=0.0)
    emb = HashEmbedder()
    store.save_vectors("t1", [("m2", emb.embed(("weather Oslo",))[0])], resource_id=None)
    for message_range, want_paired in ((0, ["m2"]), (1, ["m1", "m2", "m3"])):
        model = ScriptedModel([Say("ok")])
        Simulator(model, handlers=memory_handlers(store, emb)).run(
            make_agent(input_processors=[SemanticRecall(top_k=1, message_range=message_range)]),
            "weather Oslo", thread_id="t1")
        sent = model.requests[0].messages
        assert is_paired(sent)
        assert [m.id for m in sent[:-1]] == want_paired
    # alone, the call's message is recalled without its call (its text kept)
    model = ScriptedModel([Say("ok")])
    Simulator(model, handlers=memory_handlers(store, emb)).run(
        make_agent(input_processors=[SemanticRecall(top_k=1, message_range=0)]),
        "weather Oslo", thread_id="t1")
    assert model.requests[0].messages[0].tool_calls() == ()


# --- working memory ------------------------------------------------------------------------


def test_working_memory_is_updated_by_the_model_and_saved_on_approval() -> None:
    store = InMemoryStore()
    handlers = memory_handlers(store)
    wm = WorkingMemory(template="name: ?")
    model = ScriptedModel([
        Say(calls=[call("update_working_memory", text="name: Ann")]), Say("Hi Ann"),
        Say("You are Ann"),
    ])
    sim = Simulator(model, handlers=handlers)
    agent = make_agent(input_processors=[wm])
    sim.run(agent, "I am Ann", thread_id="t1", resource_id="u1")
    assert "name: ?" in system_texts(model.requests[0])[-1]
    assert "name: Ann" in system_texts(model.requests[1])[-1]  # the same run sees it at once
    assert store.get_working_memory("resource:u1") == "name: Ann"
    sim.run(agent, "who am I?", thread_id="t2", resource_id="u1")
    assert "name: Ann" in system_texts(model.requests[2])[-1]


def test_a_tripped_run_does_not_save_working_memory() -> None:
    store = InMemoryStore()
    model = ScriptedModel([Say(calls=[call("update_working_memory", text="evil")]), Say("x")])
    agent = make_agent(input_processors=[WorkingMemory(scope="thread")],
                       output_processors=[processor("block", process_output_result=_block_result)])
    result = Simulator(model, handlers=memory_handlers(store)).run(
        agent, "hi", thread_id="t1").result
    assert result.status == "tripped"
    assert store.get_working_memory("thread:t1") is None


# --- summarization ------------------------------------------------------------------------


def test_summarization_replaces_old_turns_by_a_summary_and_keeps_pairs() -> None:
    echo = tool(_echo, name="echo")
    history = [
        Message(id=f"u{i}", role="user", parts=(TextPart("question " * 20),)) for i in range(4)
    ]
    call_msg = Message(id="a", role="assistant", parts=(ToolCallPart("c", "echo", {"x": "1"}),))
    result_msg = Message(id="r", role="tool", parts=(ToolResultPart("c", "echo", "1" * 80),))
    ml = MessageList.of([*history, call_msg, result_msg])
    judge = ScriptedModel([Say("the user asked four questions")])
    model = ScriptedModel([Say("ok")])
    sim = Simulator(model, models={"sim/judge": judge})
    agent = make_agent(tools=[echo], input_processors=[
        Summarization(120, judge_model="sim/judge", keep_tokens=60)])
    assert sim.run(agent, ml.add(Message(id="q", role="user", parts=(TextPart("now?"),))))\
        .result.status == "finished"
    sent = model.requests[0]
    assert is_paired(sent.messages)
    assert [m.id for m in sent.messages] == ["a", "r", "q"]
    assert any("four questions" in s.content and s.tag == SUMMARY_TAG for s in sent.system)


# --- a request of one's own beside the memory ones ---------------------------------------


class Count(Request[int], frozen=True):
    pass


def test_memory_handlers_take_more_handlers() -> None:
    handlers = memory_handlers(InMemoryStore()).add(Count, lambda r: 3)

    def hook(args: InputStepArgs[None]) -> Generator[object, object, InputStepResult[None]]:
        n = yield from ask(Count())
        return Abort(f"counted {n}")

    result = Simulator(ScriptedModel([Say("x")]), handlers=handlers).run(
        history_agent(processor("count", process_input_step=hook)), "hi", thread_id="t1"
    ).result
    assert result.tripwire is not None and result.tripwire.reason == "counted 3"


def test_a_run_with_memory_replays_from_its_journal() -> None:
    # The store's answers are recorded as JSON; the replay gives the hooks them back as
    # the types their requests declare (messages, vectors).
    store = InMemoryStore()
    rec = Recorder()
    agent = make_agent(input_processors=[MessageHistory(), SemanticRecall(), WorkingMemory()])
    sim = Simulator(ScriptedModel([Say("one"), Say("two")]),
                    handlers=memory_handlers(store, HashEmbedder()), observers=[rec])
    sim.run(agent, "first", thread_id="t1", resource_id="u1")
    ran = sim.run(agent, "first again", thread_id="t1", resource_id="u1")
    replay = Simulator.replay(Journal.from_ndjson(rec.last().to_ndjson()), agent)
    assert replay.divergence is None
    assert replay.result == ran.result


def test_a_processor_with_only_process_approved_is_an_input_or_output_processor() -> None:
    saved: list[list[str]] = []

    class Saver(Processor):
        id = "saver"

        def process_approved(self, args: ApprovedArgs[None]) -> ApprovedResult[None]:
            saved.append([m.text for m in args.messages])
            return Continue()

    for agent in (make_agent(input_processors=[Saver()]),
                  make_agent(output_processors=[Saver()])):
        Simulator(ScriptedModel([Say("answer")])).run(agent, "hi")
    assert saved == [["hi", "answer"], ["hi", "answer"]]


class Profile(msgspec.Struct, frozen=True):
    name: str
    likes: tuple[str, ...] = ()


def test_working_memory_with_a_schema_keeps_only_updates_that_fit_it() -> None:
    store = InMemoryStore()
    model = ScriptedModel([
        Say(calls=[call("update_working_memory", memory={"name": 3})]),  # does not fit
        Say(calls=[call("update_working_memory", memory={"name": "Ann", "likes": ["tea"]})]),
        Say("Hi Ann"),
    ])
    agent = make_agent(input_processors=[WorkingMemory(schema=Profile)])
    ran = Simulator(model, handlers=memory_handlers(store)).run(
        agent, "I am Ann and I like tea", thread_id="t1", resource_id="u1")
    refused = ran.result.steps[0].tool_results[0]
    assert refused.is_error
    (spec,) = [t for t in model.requests[0].tools if t.name == "update_working_memory"]
    assert spec.parameters["required"] == ["memory"]
    saved = store.get_working_memory("resource:u1")
    assert saved is not None
    assert msgspec.json.decode(saved, type=Profile) == Profile("Ann", ("tea",))
    assert '"name":"Ann"' in system_texts(model.requests[2])[-1]


def test_a_schema_template_must_fit_the_schema() -> None:
    with pytest.raises(ProcessorConfigError):
        WorkingMemory(schema=Profile, template='{"likes": 1}')
    with pytest.raises(ProcessorConfigError):
        WorkingMemory(schema=dict)  # type: ignore[arg-type]
    assert WorkingMemory(schema=Profile, template='{"name": "?"}').template


def _memory_agent() -> Agent:
    return make_agent(
        tools=[tool(_echo, name="echo")],
        input_processors=[MessageHistory(), SemanticRecall(), WorkingMemory(scope="thread")],
        output_processors=[processor("redact", process_output_stream=_redact)],
    )


def _memory_script() -> list[Say]:
    return [
        Say("a secret", calls=[call("echo", x="one"),
                              call("update_working_memory", text="likes echoes")]),
        Say("done"), Say("again"),
    ]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_sync_and_async_simulators_store_the_same(backend: str) -> None:
    sync_store = InMemoryStore()
    sim = Simulator(ScriptedModel(_memory_script()),
                    handlers=memory_handlers(sync_store, HashEmbedder()),
                    run_ids=numbered_run_ids())
    sync_results = [sim.run(_memory_agent(), p, thread_id="t1").result for p in ("hi", "more")]
    async_store = InMemoryStore()

    async def main() -> list[RunResult]:
        asim = AsyncSimulator(ScriptedModel(_memory_script()),
                              handlers=async_memory_handlers(async_store, HashEmbedder()),
                              run_ids=numbered_run_ids())
        return [(await asim.run(_memory_agent(), p, thread_id="t1")).result
                for p in ("hi", "more")]

    assert anyio.run(main, backend=backend) == sync_results
    assert async_store.last_messages("t1", 100) == sync_store.last_messages("t1", 100)
    assert async_store.get_working_memory("thread:t1") == "likes echoes"
    assert sync_store.get_working_memory("thread:t1") == "likes echoes"


def test_a_thread_of_another_user_is_refused() -> None:
    store = InMemoryStore()
    model = ScriptedModel([Say("mine"), Say("theirs")])
    sim = Simulator(model, handlers=memory_handlers(store))
    sim.run(history_agent(), "private", thread_id="t1", resource_id="ann")
    result = sim.run(history_agent(), "show me", thread_id="t1", resource_id="bob").result
    assert isinstance(result.error, ProcessorFailed)
    assert result.error.error_type == "ThreadOwnerMismatch"
    assert len(model.requests) == 1  # bob's run never reached the model


def test_recall_from_a_thread_of_another_user_is_refused() -> None:
    store = InMemoryStore()
    handlers = memory_handlers(store, HashEmbedder())
    agent = make_agent(input_processors=[SemanticRecall()])
    model = ScriptedModel([Say("noted"), Say("x")])
    sim = Simulator(model, handlers=handlers)
    sim.run(agent, "my pin is 1234", thread_id="t1", resource_id="ann")
    result = sim.run(agent, "my pin?", thread_id="t1", resource_id="bob").result
    assert isinstance(result.error, ProcessorFailed)
    assert result.error.error_type == "ThreadOwnerMismatch"
    assert len(model.requests) == 1


def test_a_threads_working_memory_is_refused_to_another_user() -> None:
    store = InMemoryStore()
    model = ScriptedModel([Say(calls=[call("update_working_memory", text="ann's notes")]),
                           Say("ok"), Say("x")])
    agent = make_agent(input_processors=[WorkingMemory(scope="thread")])
    sim = Simulator(model, handlers=memory_handlers(store))
    sim.run(make_agent(input_processors=[MessageHistory(), WorkingMemory(scope="thread")]),
            "hi", thread_id="t1", resource_id="ann")
    assert store.get_working_memory("thread:t1") == "ann's notes"
    result = sim.run(agent, "notes?", thread_id="t1", resource_id="bob").result
    assert isinstance(result.error, ProcessorFailed)
    assert result.error.error_type == "ThreadOwnerMismatch"
