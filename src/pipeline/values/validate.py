"""Caller input, checked at the door, the same way under every interpreter.

A run's input (and any messages a hook puts in its place) must be a conversation the
library can send: `Message` values with a known role, parts given as a tuple of part
values with fields of the right types, encodable as JSON. Anything else is refused before
any model call with an `InvalidInput` error naming the message and the field, rather than
being sent as something else (an unknown role as "user", a string of parts as nothing)
or failing later as a provider bug. OpenAI-style dicts are refused with a pointer to
`from_openai`, which converts them.

Pure: `agent_loop` checks its `MessageList`; interpreters read a run's input with
`read_input` and start `rejected(...)` for input that is not even a list of messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import NoneType, UnionType
from typing import Any, Union, cast, get_args, get_origin, get_type_hints

import msgspec

from pipeline.values.bounds import MAX_JSON_DEPTH, json_too_deep
from pipeline.values.messages import (
    Message,
    MessageList,
    Part,
    Role,
    Source,
    SystemMessage,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    to_message_list,
)
from pipeline.values.result import InvalidInput

__all__ = ["InvalidInputError", "check_messages", "read_input"]

_ROLES: frozenset[str] = frozenset(get_args(Role))
_SOURCES: frozenset[str] = frozenset(get_args(Source))
_INPUT: tuple[Source] = ("input",)
_OPENAI_HINT = "an OpenAI-style dict; convert such messages with from_openai(...)"


def _field_types(part: type[msgspec.Struct]) -> tuple[tuple[str, tuple[type, ...]], ...]:
    """Each field of a part and the classes it must hold, read off its annotations (a
    union's members; a generic by its origin: `JsonObject` -> Mapping). A field of any
    value (`object`: a result, a data part's data) is checked when it is encoded."""
    hints = get_type_hints(part)
    out: list[tuple[str, tuple[type, ...]]] = []
    for name in part.__struct_fields__:
        t = hints[name]
        if t is not object:
            members = get_args(t) if isinstance(t, UnionType) or get_origin(t) is Union else (t,)
            out.append((name, tuple(get_origin(m) or m for m in members)))
    return tuple(out)


_PART_FIELDS: dict[type, tuple[tuple[str, tuple[type, ...]], ...]] = {
    part: _field_types(part) for part in get_args(Part)
}
"""What each part's fields must hold (msgspec does not check types at construction)."""


class InvalidInputError(ValueError):
    """Raised by the input helpers (`from_openai`); carries the typed error."""

    def __init__(self, error: InvalidInput) -> None:
        super().__init__(str(error))
        self.error = error


def read_input(value: object, *, id_prefix: str, created_at: float) -> MessageList | InvalidInput:
    """A run's input as a MessageList (a prompt string becomes one user message), or why
    it is not one. The messages' contents are checked by `check_messages`."""
    t = type(value)
    if type(value) is str:  # a prompt (`to_message_list`'s, without its calls)
        return MessageList(
            (Message(id=f"{id_prefix}-input", role="user", parts=(TextPart(value),),
                     created_at=created_at),),
            _INPUT,
        )
    if t is list or t is tuple:  # the common case, before the ABC checks below
        return MessageList.of(cast("Iterable[Message]", value))
    if isinstance(value, str | MessageList | Message):
        return to_message_list(value, id_prefix=id_prefix, created_at=created_at)
    if isinstance(value, Mapping):
        return InvalidInput(None, "messages", f"got a dict, {_OPENAI_HINT}")
    if isinstance(value, bytes | bytearray) or not isinstance(value, Iterable):
        return InvalidInput(
            None, "messages",
            "expected a prompt (str), a Message, an iterable of Messages or a MessageList, "
            f"got {_type(value)}",
        )
    # Each item is checked by `check_messages` (agent_loop), in the same pass as the rest.
    return MessageList.of(cast("Iterable[Message]", value))


def check_messages(ml: object, call_ids: set[str] | None = None) -> InvalidInput | None:
    """What is wrong with `ml` as a conversation to send, or None. Linear time.

    `call_ids`, when given, receives the id of every tool call and result (the loop keeps
    tool-call ids unique run-wide, and this pass reads every part anyway)."""
    if not isinstance(ml, MessageList):
        return InvalidInput(None, "messages", f"expected a MessageList, got {_type(ml)}")
    system = ml.system
    if type(system) is not tuple and not isinstance(system, tuple | list):
        return InvalidInput(
            None, "system", f"expected a tuple of SystemMessage, got {_type(system)}"
        )
    for k, s in enumerate(system):
        if not isinstance(s, SystemMessage):
            return InvalidInput(None, f"system[{k}]", f"expected a SystemMessage, got {_type(s)}")
        if not isinstance(s.content, str):
            return InvalidInput(
                None, f"system[{k}].content", f"expected a str, got {_type(s.content)}"
            )
    ids = call_ids if call_ids is not None else set()
    free: list[object] = []  # values of any JSON type (arguments, results...): encoded once
    messages = ml.messages
    sources = ml.sources
    start = 0
    if type(sources) is tuple and len(sources) == len(messages) and _known_sources(sources):
        start = _plainly_fine_prefix(messages, ids, free)  # the common case: all of them
    rest = (
        () if start == len(messages)
        else zip(messages[start:], sources[start:], strict=True) if start
        else zip(messages, sources, strict=True)
    )
    for i, (m, source) in enumerate(rest, start):
        if _plainly_fine_prefix((m,), ids, free) and type(source) is str and source in _SOURCES:
            continue  # the common case, in a fraction of the full check's time
        if not isinstance(m, Message):
            return _not_a_message(i, m)
        found = _message_problem(m)
        if found is None:
            found = _unencodable(m)
        if found is None and not (isinstance(source, str) and source in _SOURCES):
            found = ("source", f"unknown source {source!r}")
        if found is not None:
            mid = m.id if isinstance(m.id, str) else None
            return InvalidInput(i, found[0], found[1], mid)
        ids.update(p.tool_call_id for p in m.parts if isinstance(p, ToolCallPart | ToolResultPart))
    if free:
        try:
            # one pass in C (the list is one level more); on failure, find the message
            if not json_too_deep(_encode(free), MAX_JSON_DEPTH + 1):
                return None
        except (TypeError, ValueError, RecursionError):
            pass
        for i, m in enumerate(messages):
            found = _unencodable(m)
            if found is not None:
                return InvalidInput(i, found[0], found[1], m.id)
    return None


_encode = msgspec.json.Encoder().encode


MESSAGE_FIELDS = (
    "id", "role", "parts", "created_at", "thread_id", "resource_id", "incomplete", "metadata"
)
"""`Message`'s fields in order, each of which `_plainly_fine_prefix` reads (a test checks
that there are no others: a new field needs its check there)."""


def _known_sources(sources: tuple[object, ...]) -> bool:
    """Every source is a str the full check accepts (a known one): a short input as exact
    strs in one loop, a long one in two passes in C (`join` refuses what is no str)."""
    if len(sources) < 8:  # a short input: no sets to make
        known = _SOURCES
        for s in sources:  # (a loop, not all(...): no generator to make)  # noqa: SIM110
            if type(s) is not str or s not in known:
                return False
        return True
    try:
        "".join(cast("tuple[str, ...]", sources))  # a TypeError for anything not a str
        return _SOURCES.issuperset(sources)
    except TypeError:  # no str, or unhashable: the full check says which
        return False


def _plainly_fine_prefix(
    messages: tuple[Message, ...] | list[Message], ids: set[str], free: list[object]
) -> int:
    """How many messages from the start are plainly fine (sources aside): exact types
    only (what the library and msgspec make); the check every run pays once per input
    message (docs/DESIGN.md, decisions made for speed). A message that is not plainly
    fine goes to `_message_problem`, which says what is wrong, if anything. Adds the
    tool-call ids to `ids` and the values of any JSON type (arguments, results,
    metadata) to `free`, to be encoded once.

    Written for the interpreter's speed: builtins and classes in locals, fields read as
    attributes (no tuple per message), no index kept (found again after a failure), a
    float `created_at` tested first."""
    message, text_part, call_part, result_part = Message, TextPart, ToolCallPart, ToolResultPart
    type_, str_, bool_, float_, int_, dict_, tuple_ = type, str, bool, float, int, dict, tuple
    roles = _ROLES
    for m in messages:
        if type_(m) is not message:
            break
        role = m.role
        t = type_(m.created_at)
        if not (
            type_(m.id) is str_ and type_(role) is str_ and role in roles
            and type_(m.incomplete) is bool_ and (t is float_ or t is int_)
            and (m.thread_id is None or type_(m.thread_id) is str_)
            and (m.resource_id is None or type_(m.resource_id) is str_)
        ):
            break
        metadata = m.metadata
        if metadata is not None:
            if type_(metadata) is not dict_:
                break
            free.append(metadata)
        parts: tuple[Any, ...] = m.parts  # told apart by exact type, which mypy cannot
        if type_(parts) is not tuple_:  # narrow through the local `type_`
            break
        for p in parts:
            t = type_(p)
            if t is text_part:
                if type_(p.text) is not str_:
                    break
            elif t is call_part:
                if not (type_(p.tool_call_id) is str_ and type_(p.tool_name) is str_
                        and type_(p.args) is dict_):
                    break
                ids.add(p.tool_call_id)
                free.append(p.args)
            elif t is result_part:
                if not (type_(p.tool_call_id) is str_ and type_(p.tool_name) is str_
                        and type_(p.is_error) is bool_):
                    break
                ids.add(p.tool_call_id)
                free.append(p.result)
            else:
                break
        else:
            continue  # every part plainly fine: the next message
        break  # a part was not
    else:
        return len(messages)
    # `m` stopped the pass: its first place (an earlier place would have stopped it there)
    return next(i for i, x in enumerate(messages) if x is m)


def _message_problem(m: Message) -> tuple[str, str] | None:
    if not isinstance(m.id, str):
        return "id", f"expected a str, got {_type(m.id)}"
    role = m.role
    if not (isinstance(role, str) and role in _ROLES):
        return "role", f"unknown role {role!r} (expected one of {', '.join(sorted(_ROLES))})"
    parts = m.parts
    if isinstance(parts, str):
        return "parts", "expected a tuple of parts, got str (text goes in (TextPart(...),))"
    if not isinstance(parts, tuple | list):
        return "parts", f"expected a tuple of parts, got {_type(parts)}"
    for j, p in enumerate(parts):
        fields = _PART_FIELDS.get(type(p))
        if fields is None:
            hint = f", {_OPENAI_HINT}" if isinstance(p, Mapping) else ""
            return f"parts[{j}]", f"expected a part (TextPart...), got {_type(p)}{hint}"
        for name, types in fields:
            v = getattr(p, name)
            if not isinstance(v, types) or (bool not in types and isinstance(v, bool)):
                want = " or ".join("None" if t is NoneType else t.__name__ for t in types)
                return f"parts[{j}].{name}", f"expected {want}, got {_type(v)}"
    for name, types in (
        ("created_at", (int, float)), ("thread_id", (str, NoneType)),
        ("resource_id", (str, NoneType)), ("incomplete", (bool,)),
        ("metadata", (Mapping, NoneType)),
    ):
        v = getattr(m, name)
        if not isinstance(v, types) or (bool not in types and isinstance(v, bool)):
            want = " or ".join("None" if t is NoneType else t.__name__ for t in types)
            return name, f"expected {want}, got {_type(v)}"
    return None


def _unencodable(m: Message) -> tuple[str, str] | None:
    """Why a message cannot be kept as JSON: it does not encode, or its values (a tool
    call's arguments, a result, metadata: one level inside the message's own JSON) nest
    deeper than `MAX_JSON_DEPTH`."""
    try:
        encoded = _encode(m)
    except RecursionError:  # too deep for the encoder (or a value containing itself)
        return "parts", f"a value nested deeper than {MAX_JSON_DEPTH} levels (or in itself)"
    except (TypeError, ValueError) as e:
        return "parts", f"cannot be encoded as JSON: {type(e).__name__}: {e}"
    # a message is an object of a tuple of part objects: its values start 3 levels in
    if json_too_deep(encoded, MAX_JSON_DEPTH + 3):
        return "parts", f"a value nested deeper than {MAX_JSON_DEPTH} levels"
    return None


def _not_a_message(i: int, m: object) -> InvalidInput:
    hint = f", {_OPENAI_HINT}" if isinstance(m, Mapping) else ""
    return InvalidInput(i, "message", f"expected a Message, got {_type(m)}{hint}")


def _type(v: object) -> str:
    return type(v).__name__
