"""Messages with typed parts, and the immutable MessageList.

Everything here is frozen: a change is a new value. Parts form a tagged union on
`type`, so a message encodes to (and decodes from) JSON with msgspec.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Literal, TypeVar

import msgspec

JsonObject = Mapping[str, object]
"""A JSON object as decoded by msgspec (values are JSON values)."""

Role = Literal["user", "assistant", "tool", "system"]
Source = Literal["input", "response", "memory", "system", "context"]
_T = TypeVar("_T")


# gc=False, on every part and on Message: untracked by the collector (what they hold is
# kept as JSON, and a value that encodes cannot refer back to its holder; no cycle goes
# through them: tests/test_gc_untracked.py)
class TextPart(msgspec.Struct, frozen=True, gc=False, tag="text"):
    text: str


class ReasoningPart(msgspec.Struct, frozen=True, gc=False, tag="reasoning"):
    """Model reasoning. `signature` / `redacted` carry what its provider needs sent back
    (Anthropic's and Bedrock's thinking, Gemini's thought signatures); `provider` is the
    route that signed them: a codec sends them back only to that route, and drops them
    (with the reasoning) for any other, so a step that switches provider never sends
    another provider's signature. None: recorded before routes were (sent as it is)."""

    text: str
    signature: str | None = None
    redacted: str | None = None
    provider: str | None = None


# gc=False: untracked by the collector (no cycle goes through it; tests/test_gc_untracked.py)
class ToolCallPart(msgspec.Struct, frozen=True, gc=False, tag="tool-call"):
    tool_call_id: str
    tool_name: str
    args: JsonObject


class ToolResultPart(msgspec.Struct, frozen=True, gc=False, tag="tool-result"):
    tool_call_id: str
    tool_name: str
    result: object
    is_error: bool = False


class ServerToolCallPart(msgspec.Struct, frozen=True, gc=False, tag="server-tool-call"):
    """A tool the provider ran on its side (`ServerToolCall`), in the assistant message
    of the answer that used it. Never run by the agent and never paired with a tool
    message (its result is the `ServerToolResultPart` with the same id, beside it); not
    sent back to a model: the provider's record of it is its own, and the answer that
    followed says what came of it."""

    tool_call_id: str
    tool_name: str
    args: JsonObject


class ServerToolResultPart(msgspec.Struct, frozen=True, gc=False, tag="server-tool-result"):
    """What a provider's own tool returned (`ServerToolResult`), beside its call."""

    tool_call_id: str
    tool_name: str
    result: object
    is_error: bool = False


class FilePart(msgspec.Struct, frozen=True, gc=False, tag="file"):
    """A file or image: `data` is base64 or a URL (see `is_url`)."""

    media_type: str
    data: str
    is_url: bool = False
    filename: str | None = None


class SourcePart(msgspec.Struct, frozen=True, gc=False, tag="source"):
    source_id: str
    url: str
    title: str | None = None


class StepStartPart(msgspec.Struct, frozen=True, gc=False, tag="step-start"):
    step_number: int


class DataPart(msgspec.Struct, frozen=True, gc=False, tag="data"):
    """A custom `data-*` part; `name` includes the `data-` prefix."""

    name: str
    data: object


Part = (
    TextPart
    | ReasoningPart
    | ToolCallPart
    | ToolResultPart
    | ServerToolCallPart
    | ServerToolResultPart
    | FilePart
    | SourcePart
    | StepStartPart
    | DataPart
)


class Message(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """One message. `created_at` is a clock value handed in by the caller or the loop."""

    id: str
    role: Role
    parts: tuple[Part, ...]
    created_at: float = 0.0
    thread_id: str | None = None
    resource_id: str | None = None
    incomplete: bool = False
    """True when the message is what was received of a stream that broke or was cancelled."""
    metadata: JsonObject | None = None

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    def with_parts(self, parts: Iterable[Part]) -> Message:
        return msgspec.structs.replace(self, parts=tuple(parts))

    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        return tuple(p for p in self.parts if isinstance(p, ToolCallPart))

    def tool_results(self) -> tuple[ToolResultPart, ...]:
        return tuple(p for p in self.parts if isinstance(p, ToolResultPart))


class SystemMessage(msgspec.Struct, frozen=True):
    """A system message; `tag` groups the ones one feature added (memory, a processor)."""

    content: str
    tag: str | None = None


INSTRUCTIONS_TAG = "instructions"
"""The tag of the agent's instructions (those without a tag of their own) in a run's
system messages: a run given a conversation that carries them (a previous run's
`result.messages`) replaces them with its own instead of adding them twice."""


def user(text: str, *, id: str | None = None, created_at: float = 0.0) -> Message:
    """A user message with one text part; without an `id`, a fresh random one
    (`user-<32 hex digits>`): give one where the same input must give the same messages
    (tests, replays)."""
    if id is None:
        id = f"user-{uuid.uuid4().hex}"
    return Message(id=id, role="user", parts=(TextPart(text),), created_at=created_at)


class _Log:
    """An append-only log of messages and their sources, shared by the lists `add` made.

    This is how `MessageList.add` costs O(added) instead of copying a long history: a
    list made by `add` views the first n entries of a log, which never change. An add
    from a list whose n is where the log ends appends to the log; any other (a branch
    from an older list) copies its entries into a new log. Two adds racing from one list
    (threads) cannot both append: each extends, then checks that the log grew by its own
    entries alone (`list.extend` and `len` are atomic), and one that finds more copies
    instead, leaving entries past the end of every list, which no list reads.
    """

    __slots__ = ("messages", "sources")

    def __init__(self, messages: list[Message], sources: list[Source]) -> None:
        self.messages = messages
        self.sources = sources

    def append_at(self, n: int, new: tuple[Message, ...], sources: tuple[Source, ...]) -> bool:
        """Append if the log ends at `n`; False (and nothing any list reads changed) if not."""
        msgs = self.messages
        if len(msgs) != n:
            return False
        msgs.extend(new)
        if len(msgs) != n + len(new):
            return False
        self.sources.extend(sources)
        return True


def _prefix(log: list[_T], n: int) -> tuple[_T, ...]:
    t = tuple(log)  # the log may grow meanwhile: one snapshot, then cut
    return t if len(t) == n else t[:n]


_SHARE_FROM = 32
"""Lists shorter than this add by concatenating tuples: a copy that small costs less."""


class _LogView:
    """MessageList's private slot (in a base class: a slots dataclass adds only fields)."""

    __slots__ = ("_view",)
    _view: tuple[_Log, int] | None
    """For a list `add` made from a long one, `(log, n)`: its messages and sources are the
    first n entries of the log, made into tuples when first read. None: they are set."""


@dataclasses.dataclass(frozen=True, slots=True)
class MessageList(_LogView):
    """The conversation as an immutable value: every method returns a new list.

    `messages` excludes system messages, which live in `system` with their tags.
    `sources[i]` says where `messages[i]` came from.

    A frozen dataclass (not a Struct, so that `add` can share structure): msgspec encodes
    it as ``{"messages": [...], "sources": [...], "system": [...]}`` and decodes it
    (``msgspec.json.decode(b, type=MessageList)``), also as a field of a Struct, with no
    hooks; `dataclasses.replace` changes fields. A list made by `add` views a log it
    shares with the list added to (see `_Log`) and makes its `messages` and `sources`
    tuples when first read, then keeps them: adding costs O(added) however long the
    history, and a step that never reads the whole history never pays for it.
    """

    messages: tuple[Message, ...] = ()
    sources: tuple[Source, ...] = ()
    system: tuple[SystemMessage, ...] = ()

    def __post_init__(self) -> None:  # also run by msgspec after decoding
        if len(self.messages) != len(self.sources):
            raise ValueError("MessageList: messages and sources must have the same length")
        _set(self, "_view", None)

    if not TYPE_CHECKING:  # (so that mypy still rejects unknown attributes)

        def __getattr__(self, name: str) -> object:
            """Only reached for an unset slot: the tuples of a list made by `add`."""
            if name == "messages" or name == "sources":
                view = self._view  # unset while msgspec decodes: AttributeError
                if view is not None:
                    log, n = view
                    value = _prefix(log.messages if name == "messages" else log.sources, n)
                    _set(self, name, value)
                    return value
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __reduce__(self) -> tuple[type[MessageList], tuple[object, ...]]:
        # copy and pickle through __init__, with the tuples (never the shared log)
        return MessageList, (self.messages, self.sources, self.system)

    @classmethod
    def of(
        cls,
        messages: Iterable[Message] = (),
        *,
        source: Source = "input",
        system: Iterable[SystemMessage | str] = (),
    ) -> MessageList:
        msgs = tuple(messages)
        return cls(msgs, (source,) * len(msgs), tuple(_system(s) for s in system))

    def __len__(self) -> int:
        view = self._view
        return view[1] if view is not None else len(self.messages)

    def extends(self, earlier: MessageList) -> int | None:
        """len(earlier) when this list's first messages are `earlier`'s (say, it was made
        from `earlier` by `add`), else None: O(1) for lists that share a log, else a
        comparison of the shared length (identity first, then value)."""
        mine, theirs = self._view, earlier._view
        if theirs is not None and mine is not None and mine[0] is theirs[0]:
            return theirs[1] if theirs[1] <= mine[1] else None
        a, b = self.messages, earlier.messages
        n = len(b)
        return n if len(a) >= n and (a is b or a[:n] == b) else None

    # --- views -------------------------------------------------------------------
    @property
    def all(self) -> tuple[Message, ...]:
        return self.messages

    def by_source(self, *sources: Source) -> tuple[Message, ...]:
        return tuple(m for m, s in zip(self.messages, self.sources, strict=True) if s in sources)

    @property
    def input(self) -> tuple[Message, ...]:
        return self.by_source("input")

    @property
    def response(self) -> tuple[Message, ...]:
        return self.by_source("response")

    def source_of(self, message_id: str) -> Source | None:
        for m, s in zip(self.messages, self.sources, strict=True):
            if m.id == message_id:
                return s
        return None

    def system_by_tag(self, tag: str | None) -> tuple[SystemMessage, ...]:
        return tuple(s for s in self.system if s.tag == tag)

    # --- changes -----------------------------------------------------------------
    def add(self, messages: Message | Iterable[Message], source: Source = "input") -> MessageList:
        new = (messages,) if isinstance(messages, Message) else tuple(messages)
        sources = (source,) * len(new)
        view = self._view
        if view is not None:
            log, n = view
            if log.append_at(n, new, sources):
                return _shared(log, n + len(new), self.system)
        elif len(self.messages) + len(new) < _SHARE_FROM:
            return _whole(self.messages + new, self.sources + sources, self.system)
        log = _Log([*self.messages, *new], [*self.sources, *sources])  # a new log, from here
        return _shared(log, len(log.messages), self.system)

    def _add_one(self, message: Message, source: Source) -> MessageList:
        """`add(message, source)` for one message known to be a `Message` (the loop's own
        messages, twice a step): the same list, without the checks and tuples of `add`."""
        view = self._view
        if view is not None:
            log, n = view
            msgs = log.messages
            if len(msgs) == n:  # `_Log.append_at` for one message
                msgs.append(message)
                if len(msgs) == n + 1:
                    log.sources.append(source)
                    return _shared(log, n + 1, self.system)
                # another add raced this one: its entries past n are read by no list
        elif len(self.messages) < _SHARE_FROM - 1:  # `add`'s short list, without its checks
            one, its = (message,), (source,)  # (concatenated: no list made, as by unpacking)
            return _whole(self.messages + one, self.sources + its, self.system)
        return self.add(message, source)

    def remove_by_ids(self, ids: Iterable[str]) -> MessageList:
        drop = frozenset(ids)
        pairs = zip(self.messages, self.sources, strict=True)
        kept = [(m, s) for m, s in pairs if m.id not in drop]
        return MessageList(tuple(m for m, _ in kept), tuple(s for _, s in kept), self.system)

    def replace_messages(
        self, messages: Iterable[Message], default_source: Source = "response"
    ) -> MessageList:
        """New messages, keeping the source of each message whose id was already here."""
        known = dict(zip((m.id for m in self.messages), self.sources, strict=True))
        msgs = tuple(messages)
        return MessageList(
            msgs, tuple(known.get(m.id, default_source) for m in msgs), self.system
        )

    def map_messages(self, fn: Callable[[Message], Message]) -> MessageList:
        return MessageList(tuple(fn(m) for m in self.messages), self.sources, self.system)

    def with_system(self, system: Iterable[SystemMessage | str]) -> MessageList:
        return self._with_system(tuple(_system(s) for s in system))

    def with_messages(self, messages: Iterable[Message], source: Source = "input") -> MessageList:
        """`messages` in place of this list's, keeping its system messages: what a
        `process_input` that trims or rewrites the conversation usually means.

        A message whose id was here keeps its source; a new one gets `source`. (A bare
        `MessageList.of(...)` returned in `Replace` is the whole conversation: its system
        messages, none unless given, replace the run's, instructions included.)
        """
        known = dict(zip((m.id for m in self.messages), self.sources, strict=True))
        msgs = tuple(messages)
        return MessageList(msgs, tuple(known.get(m.id, source) for m in msgs), self.system)

    def with_instructions(self, instructions: Iterable[SystemMessage | str]) -> MessageList:
        """The same messages with `instructions` first (an untagged one tagged
        `INSTRUCTIONS_TAG`), then this list's other system messages, in order.

        A system message here that is tagged `INSTRUCTIONS_TAG`, equals one of the
        instructions, or has no tag and the words of one, is an earlier run's
        instructions: replaced, never repeated.
        """
        own = tuple(
            s if s.tag is not None else SystemMessage(s.content, INSTRUCTIONS_TAG)
            for s in (_system(i) for i in instructions)
        )
        if not self.system:
            return self._with_system(own) if own else self
        texts = {s.content for s in own}
        others = tuple(
            s for s in self.system
            if s.tag != INSTRUCTIONS_TAG and s not in own
            and not (s.tag is None and s.content in texts)  # the same words, untagged
        )
        return self._with_system(own + others)

    def add_system(self, message: SystemMessage | str, tag: str | None = None) -> MessageList:
        sm = _system(message) if tag is None else SystemMessage(_system(message).content, tag)
        return self._with_system((*self.system, sm))

    def clear_system_tag(self, tag: str) -> MessageList:
        return self._with_system(tuple(s for s in self.system if s.tag != tag))

    def _with_system(self, system: tuple[SystemMessage, ...]) -> MessageList:
        """The same messages (viewing this list's log, if any) with other system ones."""
        view = self._view
        if view is None:
            return _whole(self.messages, self.sources, system)
        return _shared(*view, system)


def _whole(
    messages: tuple[Message, ...], sources: tuple[Source, ...], system: tuple[SystemMessage, ...]
) -> MessageList:
    """`MessageList(messages, sources, system)` for arguments known to fit together."""
    ml = _new(MessageList)
    _set(ml, "messages", messages)
    _set(ml, "sources", sources)
    _set(ml, "system", system)
    _set(ml, "_view", None)
    return ml


def _shared(log: _Log, n: int, system: tuple[SystemMessage, ...]) -> MessageList:
    """A list of the first `n` entries of `log`; its tuples are made when first read."""
    ml = _new(MessageList)
    _set(ml, "system", system)
    _set(ml, "_view", (log, n))
    return ml


_new = object.__new__
_set = object.__setattr__  # the frozen dataclass's own way to set its fields


def _system(s: SystemMessage | str) -> SystemMessage:
    return SystemMessage(s) if isinstance(s, str) else s



RunInput = str | Message | Iterable[Message] | MessageList
"""What a run accepts: a user prompt, messages, or a whole MessageList."""


def to_message_list(
    value: RunInput, *, id_prefix: str, created_at: float = 0.0
) -> MessageList:
    """Normalize a run's input; a plain string becomes one user message."""
    if isinstance(value, MessageList):
        return value
    if isinstance(value, str):
        return MessageList.of([user(value, id=f"{id_prefix}-input", created_at=created_at)])
    if isinstance(value, Message):
        return MessageList.of([value])
    return MessageList.of(value)
