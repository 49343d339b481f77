"""Memory as processors: a thread's history, semantic recall, working memory.

Each is pure; what it needs from a store it asks with the requests of
`pipeline.processors.memory.requests`, answered by `interpreters.memory.handlers`.
Nothing is saved before the run's end, and then only what every output processor
approved (`process_approved`): a run that tripped, was retried, cancelled or crashed
saves nothing; a redacted answer is saved redacted. The saves of one run (every memory
processor's) are committed together, in one transaction: all of them or none.

Loaded and recalled messages come in with the source `memory`, so input guards that check
only the new input do not check them again, and every processor after these sees them.

Order, as input processors: `MessageHistory`, then `SemanticRecall` (it skips what the
history loaded), then `WorkingMemory`, then `Summarization` or `TokenLimiterProcessor`
last, so the budget counts everything memory added. Each works alone.
"""

from __future__ import annotations

import re
from collections.abc import Generator
from typing import Literal

import msgspec

from effects import Continue, Out, Replace, ask
from pipeline.processor import (
    ApprovedArgs,
    ApprovedResult,
    InputArgs,
    InputResult,
    InputStepArgs,
    InputStepResult,
    Processor,
    StatefulProcessor,
    StepChange,
    ToolResultArgs,
    ToolResultResult,
)
from pipeline.processors.memory.requests import (
    Embed,
    GetWorkingMemory,
    IndexMessages,
    LoadHistory,
    Recall,
    SaveMessages,
    SetWorkingMemory,
)
from pipeline.processors.options import Options
from pipeline.tools import Tool, tool
from pipeline.values.chunks import DataChunk
from pipeline.values.context import RunContext
from pipeline.values.messages import (
    JsonObject,
    Message,
    MessageList,
    Part,
    Source,
    SystemMessage,
    ToolCallPart,
    ToolResultPart,
)
from pipeline.values.pairing import cut_points, is_paired

__all__ = [
    "InvalidThreadId",
    "MessageHistory",
    "MessageIdClash",
    "OnRecallError",
    "RecallScope",
    "SemanticRecall",
    "WorkingMemory",
    "WorkingMemoryState",
    "paired_tail",
]

RecallScope = Literal["thread", "resource"]
OnRecallError = Literal["fail", "warn"]
MEMORY_WARNING = "data-memory"
"""The data part a recall failure becomes under `on_recall_error="warn"`."""


class InvalidThreadId(TypeError):
    """The run's thread (or resource) id is missing or not a string."""


def _ids(ctx: RunContext, who: str, *, need_resource: bool = False) -> tuple[str, str | None]:
    """The run's thread id and resource id, checked (fail closed: never saved nowhere)."""
    thread, resource = ctx.thread_id, ctx.resource_id
    if not isinstance(thread, str) or not thread:
        raise InvalidThreadId(
            f"{who} needs the run's thread_id, a non-empty string; got {thread!r}"
        )
    if resource is not None and (not isinstance(resource, str) or not resource):
        raise InvalidThreadId(f"{who}: resource_id must be a non-empty string, got {resource!r}")
    if need_resource and resource is None:
        raise InvalidThreadId(f"{who} with scope='resource' needs the run's resource_id")
    return thread, resource


def _stamped(
    messages: tuple[Message, ...], thread: str, resource: str | None
) -> tuple[Message, ...]:
    """The messages with the thread and resource they are saved under."""
    return tuple(
        m if m.thread_id == thread and m.resource_id == resource
        else msgspec.structs.replace(m, thread_id=thread, resource_id=resource)
        for m in messages
    )


def paired_tail(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """The longest tail of `messages` in which every tool call has its result and every
    result its call (a history loaded by count may start inside a tool exchange)."""
    for i in cut_points(messages):
        tail = messages[i:]
        if is_paired(tail):
            return tail
    return ()


class MessageIdClash(ValueError):
    """A stored message and one of the run's have one id but differ: saving would keep
    the stored one and lose the run's (message ids must be unique across runs: give
    each run its own run id)."""


def _before(ml: MessageList, messages: tuple[Message, ...]) -> MessageList:
    """`messages` (source memory) before the run's, skipping those it holds already."""
    have = {m.id: m for m in ml.messages}
    for m in messages:
        same = have.get(m.id)
        if same is not None and same.parts != m.parts:
            raise MessageIdClash(
                f"stored message {m.id!r} differs from the run's message of that id"
            )
    new = tuple(m for m in messages if m.id not in have)
    if not new:
        return ml
    memory: Source = "memory"
    sources = (memory,) * len(new)
    return MessageList((*new, *ml.messages), (*sources, *ml.sources), ml.system)


class MessageHistory(Processor):
    """Loads the thread's last `last_messages` messages before the run (as memory) and,
    once every output processor approved the run, saves its new messages to the thread.

    An input processor (it also saves from there). The run must have a `thread_id`
    (a string): without one the run fails rather than keep nothing silently."""

    def __init__(self, *, last_messages: int = 20, id: str = "message-history") -> None:
        o = Options(type(self).__name__)
        self.last_messages = o.integer("last_messages", last_messages, min=0)
        o.id(id)
        self.id = id

    def process_input(self, args: InputArgs[None]) -> Generator[object, object, InputResult[None]]:
        thread, resource = _ids(args.context, self.id)
        if self.last_messages == 0:
            return Continue()
        loaded = yield from ask(
            LoadHistory(thread_id=thread, resource_id=resource, limit=self.last_messages)
        )
        ml = _before(args.message_list, paired_tail(tuple(loaded)))
        return Continue() if ml is args.message_list else Replace(ml)

    def process_approved(
        self, args: ApprovedArgs[None]
    ) -> Generator[object, object, ApprovedResult[None]]:
        thread, resource = _ids(args.context, self.id)
        if args.messages:
            yield from ask(SaveMessages(
                thread_id=thread, resource_id=resource,
                messages=_stamped(args.messages, thread, resource),
                created_at=args.started_at,
            ))
        return Continue()


def _query(ml: MessageList) -> str:
    """The text recall searches with: the run's newest user message."""
    for m, s in zip(reversed(ml.messages), reversed(ml.sources), strict=True):
        if s == "input" and m.role == "user":
            return m.text
    return ""


def _keep_pairs(group: tuple[Message, ...]) -> tuple[Message, ...]:
    """The group with every tool call and result that lacks its partner in the group
    taken out (a message left empty goes), so what is recalled is paired."""
    calls = {p.tool_call_id for m in group for p in m.parts if isinstance(p, ToolCallPart)}
    results = {p.tool_call_id for m in group for p in m.parts if isinstance(p, ToolResultPart)}
    both = calls & results

    def keep(p: Part) -> bool:
        return not isinstance(p, ToolCallPart | ToolResultPart) or p.tool_call_id in both

    out: list[Message] = []
    for m in group:
        parts = tuple(p for p in m.parts if keep(p))
        if len(parts) == len(m.parts):
            out.append(m)
        elif parts:
            out.append(m.with_parts(parts))
    return tuple(out)


def _warning(processor_id: str, what: str, error: Exception) -> DataChunk:
    return DataChunk(MEMORY_WARNING, {
        "processor_id": processor_id, "what": what,
        "error_type": type(error).__name__, "message": str(error),
    })


class SemanticRecall(Processor):
    """Recalls the `top_k` stored messages most like the run's new user message, each with
    `message_range` messages before and after it, from the thread or from every thread of
    the resource (`scope`), as memory messages before the history; and, once the run is
    approved, indexes its new messages for later recalls.

    A recalled tool call always comes with its result (a part whose partner is not in the
    recalled range is left out). It saves the approved messages it indexes (so it also
    works without `MessageHistory`). `on_recall_error="warn"` turns a failed recall (the
    store or the embedder) into a `data-memory` part and the run goes on without it;
    `"fail"` (the default) fails the run."""

    def __init__(
        self,
        *,
        top_k: int = 3,
        message_range: int = 1,
        scope: RecallScope = "thread",
        on_recall_error: OnRecallError = "fail",
        id: str = "semantic-recall",
    ) -> None:
        o = Options(type(self).__name__)
        self.top_k = o.integer("top_k", top_k, min=1, max=100)
        self.message_range = o.integer("message_range", message_range, min=0, max=50)
        o.choice("scope", scope, RecallScope)
        o.choice("on_recall_error", on_recall_error, OnRecallError)
        o.id(id)
        self.scope: RecallScope = scope
        self.on_recall_error: OnRecallError = on_recall_error
        self.id = id

    def process_input(self, args: InputArgs[None]) -> Generator[object, object, InputResult[None]]:
        thread, resource = _ids(args.context, self.id, need_resource=self.scope == "resource")
        query = _query(args.message_list)
        if not query:
            return Continue()
        try:
            (vector,) = yield from ask(Embed(texts=(query,)))
            groups = yield from ask(Recall(
                vector=vector, k=self.top_k,
                thread_id=thread if self.scope == "thread" else None,
                resource_id=resource,
                before=self.message_range, after=self.message_range,
            ))
        except Exception as e:
            if self.on_recall_error == "fail":
                raise
            return Out(Continue(), emit=(_warning(self.id, "recall", e),))
        seen: set[str] = set()
        recalled: list[Message] = []
        for group in groups:
            for m in _keep_pairs(tuple(group)):
                if m.id not in seen:
                    seen.add(m.id)
                    recalled.append(m)
        ml = _before(args.message_list, tuple(recalled))
        return Continue() if ml is args.message_list else Replace(ml)

    def process_approved(
        self, args: ApprovedArgs[None]
    ) -> Generator[object, object, ApprovedResult[None]]:
        thread, resource = _ids(args.context, self.id, need_resource=self.scope == "resource")
        texts = tuple((m.id, m.text) for m in args.messages if m.role in ("user", "assistant"))
        texts = tuple((i, t) for i, t in texts if t.strip())
        if not texts:
            return Continue()
        # What is indexed must be stored to be recalled: saved here too (by id, so with
        # a MessageHistory before it this saves nothing twice).
        yield from ask(SaveMessages(
            thread_id=thread, resource_id=resource,
            messages=_stamped(args.messages, thread, resource),
            created_at=args.started_at,
        ))
        try:
            vectors = yield from ask(Embed(texts=tuple(t for _, t in texts)))
        except Exception as e:
            if self.on_recall_error == "fail":
                raise
            return Out(Continue(), emit=(_warning(self.id, "index", e),))
        yield from ask(IndexMessages(
            thread_id=thread, resource_id=resource,
            vectors=tuple((i, v) for (i, _), v in zip(texts, vectors, strict=True)),
        ))
        return Continue()


class WorkingMemoryState(msgspec.Struct, frozen=True):
    """Per run: the document as stored when the run started, and each document its tool
    received this run (with the call's id), in order: only a call whose tool ran (not
    one a gate or the approver answered) and returned no error."""

    stored: str = ""
    updates: tuple[tuple[str, str], ...] = ()


WORKING_MEMORY_TAG = "working-memory"
_TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")


def _update_working_memory(text: str) -> str:
    """Replace your working memory (the whole document) with `text`."""
    if "\x00" in text:  # (no store keeps one in a text; the model is told, and retries)
        raise ValueError("working memory cannot hold a NUL character")
    return "saved"


_DESCRIBE = (
    "Replace your working memory (the whole document) with `{arg}`: what you should "
    "remember about the user and the conversation."
)


class WorkingMemory(StatefulProcessor[WorkingMemoryState]):
    """A document the model keeps about the thread or the user (`scope`), shown in a
    system message every step and replaced by the model through a tool this processor
    adds (`tool_name`). The model's update is saved only once the run is approved; within
    the run, later steps see it at once. What is shown and saved is the document the tool
    received (as a `process_tool_call` gate or the approver left it), noted in
    `process_tool_result`; nothing of a call answered in its place (`SkipCall`, a denial)
    or whose result is an error.

    Free text by default; with `schema` (a msgspec Struct class) the tool takes a value
    of it (`memory`), an update that does not fit is an error result the model sees
    (and is not kept), and the document is the value's JSON.

    An input processor. `template` is the document a thread or user starts with (with a
    `schema`: JSON of it)."""

    def __init__(
        self,
        *,
        scope: RecallScope = "resource",
        template: str = "",
        schema: type[msgspec.Struct] | None = None,
        tool_name: str = "update_working_memory",
        id: str = "working-memory",
    ) -> None:
        o = Options(type(self).__name__)
        o.choice("scope", scope, RecallScope)
        o.text("template", template, empty=True)
        if schema is not None and not (
            isinstance(schema, type) and issubclass(schema, msgspec.Struct)
        ):
            raise o.fail("schema", schema, "None or a msgspec.Struct class")
        if schema is not None and template:
            try:
                msgspec.json.decode(template, type=schema)
            except (msgspec.DecodeError, msgspec.ValidationError) as e:
                raise o.fail("template", template, f"JSON of {schema.__name__} ({e})") from e
        if not isinstance(tool_name, str) or not _TOOL_NAME.fullmatch(tool_name):
            raise o.fail("tool_name", tool_name, "1 to 64 letters, digits, _ or -")
        o.id(id)
        self.scope: RecallScope = scope
        self.template = template
        self.schema = schema
        self.tool_name = tool_name
        self.id = id
        if schema is None:
            self.tool: Tool = tool(
                _update_working_memory, name=tool_name, description=_DESCRIBE.format(arg="text")
            )
        else:
            (ref,), defs = msgspec.json.schema_components((schema,))
            self.tool = Tool.define(
                tool_name, _DESCRIBE.format(arg="memory"),
                {"type": "object", "properties": {"memory": ref}, "required": ["memory"],
                 "$defs": defs},
                self._check_update,
            )
        self.tools = (self.tool,)  # added per step: a resumed step finds it here

    def _check_update(self, memory: object) -> str:
        """The schema tool: an update that does not fit the schema is an error result."""
        assert self.schema is not None
        msgspec.convert(memory, self.schema)
        return "saved"

    def _document(self, call_args: JsonObject) -> str | None:
        """The document an update call sets (None: it sets none)."""
        if self.schema is None:
            text = call_args.get("text")
            return text if isinstance(text, str) else None
        try:
            value = msgspec.convert(call_args.get("memory"), self.schema)
        except msgspec.ValidationError:
            return None
        return msgspec.json.encode(value).decode()

    def initial_state(self) -> WorkingMemoryState:
        return WorkingMemoryState()

    def _ids(self, ctx: RunContext) -> tuple[str, str | None]:
        return _ids(ctx, self.id, need_resource=self.scope == "resource")

    def process_input(
        self, args: InputArgs[WorkingMemoryState]
    ) -> Generator[object, object, InputResult[WorkingMemoryState]]:
        thread, resource = self._ids(args.context)
        text = yield from ask(
            GetWorkingMemory(thread_id=thread, resource_id=resource, scope=self.scope)
        )
        return Out(Continue(), WorkingMemoryState(text or self.template))

    def process_tool_result(
        self, args: ToolResultArgs[WorkingMemoryState]
    ) -> ToolResultResult[WorkingMemoryState]:
        """Note the document the tool received (after the gates), if it ran and did not
        fail: what is shown and saved is that, never what a gate or the approver
        answered in its place."""
        if args.call.tool_name != self.tool_name or not args.ran or args.is_error:
            return Continue()
        doc = self._document(args.call.args)
        if doc is None:
            return Continue()
        state = args.state
        updates = (*state.updates, (args.call.tool_call_id, doc))
        return Out(Continue(), msgspec.structs.replace(state, updates=updates))

    def _latest(
        self, state: WorkingMemoryState, messages: tuple[Message, ...]
    ) -> str | None:
        """The last document the tool received whose call's result is among `messages`,
        not an error (a result withheld, or dropped, keeps nothing)."""
        ok = {
            p.tool_call_id for m in messages for p in m.parts
            if isinstance(p, ToolResultPart) and p.tool_name == self.tool_name and not p.is_error
        }
        latest: str | None = None
        for call_id, doc in state.updates:
            if call_id in ok:
                latest = doc
        return latest

    def process_input_step(
        self, args: InputStepArgs[WorkingMemoryState]
    ) -> InputStepResult[WorkingMemoryState]:
        ml = args.message_list
        own = tuple(m for m, s in zip(ml.messages, ml.sources, strict=True) if s == "response")
        doc = self._latest(args.state, own)
        text = args.state.stored if doc is None else doc
        shown = SystemMessage(
            "Your working memory (keep it current with the "
            f"{self.tool_name} tool):\n<working_memory>\n{text}\n</working_memory>",
            WORKING_MEMORY_TAG,
        )
        tools = args.tools if any(t.name == self.tool_name for t in args.tools) else (
            *args.tools, self.tool)
        return Replace(StepChange(system_messages=(*args.system_messages, shown), tools=tools))

    def process_approved(
        self, args: ApprovedArgs[WorkingMemoryState]
    ) -> Generator[object, object, ApprovedResult[WorkingMemoryState]]:
        doc = self._latest(args.state, args.messages)
        if doc is not None and doc != args.state.stored:
            thread, resource = self._ids(args.context)
            yield from ask(SetWorkingMemory(
                thread_id=thread, resource_id=resource, scope=self.scope, text=doc))
        return Continue()
