"""Messages and the immutable MessageList: values, views, sources, tagged system messages."""

from __future__ import annotations

import copy
import pickle
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import msgspec
import pytest

from pipeline.values.messages import (
    DataPart,
    FilePart,
    Message,
    MessageList,
    Part,
    ReasoningPart,
    Source,
    SourcePart,
    StepStartPart,
    SystemMessage,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    to_message_list,
    user,
)


def msg(id: str, text: str = "", role: str = "user") -> Message:
    return Message(id=id, role=role, parts=(TextPart(text or id),))  # type: ignore[arg-type]


def test_messages_and_lists_are_frozen() -> None:
    m = msg("a")
    ml = MessageList.of([m])
    with pytest.raises(AttributeError):
        m.id = "b"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        ml.messages = ()  # type: ignore[misc]
    assert isinstance(ml.messages, tuple) and isinstance(m.parts, tuple)


def test_add_returns_a_new_list_and_leaves_the_old_one_alone() -> None:
    ml = MessageList.of([msg("a")])
    ml2 = ml.add(msg("b"), "response")
    ml3 = ml2.add([msg("c"), msg("d")], "memory")
    assert [m.id for m in ml.all] == ["a"]
    assert [m.id for m in ml2.all] == ["a", "b"]
    assert [m.id for m in ml3.all] == ["a", "b", "c", "d"]
    assert ml3.sources == ("input", "response", "memory", "memory")
    assert len(ml3) == 4


def test_adding_shares_the_existing_messages() -> None:
    a = msg("a")
    ml = MessageList.of([a]).add(msg("b"))
    assert ml.all[0] is a


def test_remove_by_ids_keeps_order_and_sources() -> None:
    ml = MessageList.of([msg("a")]).add([msg("b"), msg("c")], "response").add(msg("d"), "memory")
    out = ml.remove_by_ids(["b", "nope"])
    assert [m.id for m in out.all] == ["a", "c", "d"]
    assert out.sources == ("input", "response", "memory")
    assert [m.id for m in ml.all] == ["a", "b", "c", "d"]


def test_views_by_source() -> None:
    ml = (
        MessageList.of([msg("in1")])
        .add(msg("r1", role="assistant"), "response")
        .add(msg("mem"), "memory")
        .add(msg("in2"), "input")
        .add(msg("ctx"), "context")
    )
    assert [m.id for m in ml.input] == ["in1", "in2"]
    assert [m.id for m in ml.response] == ["r1"]
    assert [m.id for m in ml.by_source("memory", "context")] == ["mem", "ctx"]
    assert ml.source_of("mem") == "memory"
    assert ml.source_of("missing") is None


def test_replace_messages_keeps_known_sources_and_defaults_new_ones() -> None:
    ml = MessageList.of([msg("a")]).add(msg("b"), "memory")
    out = ml.replace_messages([msg("b", "changed"), msg("new")])
    assert [m.id for m in out.all] == ["b", "new"]
    assert out.sources == ("memory", "response")
    assert out.all[0].text == "changed"
    assert ml.replace_messages([msg("x")], "context").sources == ("context",)


def test_map_messages_keeps_sources_and_system() -> None:
    ml = MessageList.of([msg("a")], system=["sys"]).add(msg("b"), "response")
    out = ml.map_messages(lambda m: m.with_parts((TextPart(m.text.upper()),)))
    assert [m.text for m in out.all] == ["A", "B"]
    assert out.sources == ml.sources
    assert out.system == ml.system


def test_sources_must_match_messages() -> None:
    with pytest.raises(ValueError, match="same length"):
        MessageList((msg("a"),), ())


def test_system_messages_are_separate_and_tagged() -> None:
    ml = MessageList.of([msg("a")], system=["base", SystemMessage("mem", "memory")])
    assert [s.content for s in ml.system] == ["base", "mem"]
    assert len(ml) == 1  # system messages are not among the messages
    ml2 = ml.add_system("extra", tag="proc").add_system(SystemMessage("more", "proc"))
    assert ml2.system_by_tag("proc") == (
        SystemMessage("extra", "proc"),
        SystemMessage("more", "proc"),
    )
    assert ml2.system_by_tag(None) == (SystemMessage("base"),)
    cleared = ml2.clear_system_tag("proc")
    assert cleared.system == ml.system
    assert ml.system_by_tag("proc") == ()  # the original is unchanged
    assert ml.with_system(["only"]).system == (SystemMessage("only"),)
    assert ml.with_system(["only"]).messages == ml.messages


def test_add_system_retags_a_system_message() -> None:
    ml = MessageList().add_system(SystemMessage("x", "old"), tag="new")
    assert ml.system == (SystemMessage("x", "new"),)


def test_message_helpers() -> None:
    call = ToolCallPart("c1", "t", {"a": 1})
    result = ToolResultPart("c1", "t", 2)
    m = Message(id="m", role="assistant", parts=(TextPart("a"), call, TextPart("b"), result))
    assert m.text == "ab"
    assert m.tool_calls() == (call,)
    assert m.tool_results() == (result,)
    m2 = m.with_parts([TextPart("z")])
    assert m2.text == "z" and m2.id == "m" and m.text == "ab"


def test_every_part_type_round_trips_through_json() -> None:
    parts: tuple[Part, ...] = (
        TextPart("t"),
        ReasoningPart("r", signature="sig", redacted=None),
        ToolCallPart("c", "tool", {"x": [1, 2]}),
        ToolResultPart("c", "tool", {"ok": True}, is_error=False),
        FilePart("image/png", "aGk=", filename="a.png"),
        SourcePart("s1", "https://example.com", "Example"),
        StepStartPart(2),
        DataPart("data-x", {"v": 1}),
    )
    ml = MessageList.of(
        [
            Message(
                id="m",
                role="assistant",
                parts=parts,
                created_at=1.5,
                thread_id="t",
                resource_id="r",
                incomplete=True,
                metadata={"k": "v"},
            )
        ],
        source="response",
        system=[SystemMessage("s", "tag")],
    )
    back = msgspec.json.decode(msgspec.json.encode(ml), type=MessageList)
    assert back == ml
    assert [type(p) for p in back.messages[0].parts] == [type(p) for p in parts]


def test_to_message_list_normalizes_run_input() -> None:
    s = to_message_list("hello", id_prefix="run9", created_at=3.0)
    assert [(m.id, m.role, m.text, m.created_at) for m in s.all] == [
        ("run9-input", "user", "hello", 3.0)
    ]
    assert s.sources == ("input",)
    one = user("x", id="u1")
    assert to_message_list(one, id_prefix="p").all == (one,)
    assert to_message_list([one, msg("u2")], id_prefix="p").sources == ("input", "input")
    ml = MessageList.of([one], source="memory")
    assert to_message_list(ml, id_prefix="p") is ml


def test_a_prompt_reads_as_the_message_list_to_message_list_makes() -> None:
    from pipeline.values.validate import read_input

    for prompt in ("hello", "", "é\n" * 3):
        got = read_input(prompt, id_prefix="run9", created_at=3.0)
        assert got == to_message_list(prompt, id_prefix="run9", created_at=3.0)
        assert isinstance(got, MessageList)
        assert (got.messages, got.sources, got.system) == (
            (user(prompt, id="run9-input", created_at=3.0),), ("input",), ())

    class Prompt(str):
        pass

    sub = read_input(Prompt("hi"), id_prefix="r", created_at=0.0)
    assert sub == to_message_list("hi", id_prefix="r")


# --- structure sharing: `add` views a shared log; none of it may show -------------------
# Each test runs on a short list (added to by copying tuples) and on a long one (past the
# length from which `add` shares a log), so that both ways and the switch are covered.

SIZES = pytest.mark.parametrize("h", [0, 40], ids=["short", "long"])


def prior(h: int) -> list[Message]:
    return [msg(f"h{i}") for i in range(h)]


def ids(ml: MessageList) -> list[str]:
    return [m.id for m in ml.all if not m.id.startswith("h")]


@SIZES
def test_lists_made_by_add_equal_lists_made_whole(h: int) -> None:
    a, b, c = msg("a"), msg("b"), msg("c")
    grown = MessageList.of([*prior(h), a], system=["s"]).add(b, "response").add([c], "memory")
    given: Source = "input"
    sources: tuple[Source, ...] = (*(given,) * (h + 1), "response", "memory")
    whole = MessageList((*prior(h), a, b, c), sources, (SystemMessage("s"),))
    assert grown == whole and hash(grown) == hash(whole) and repr(grown) == repr(whole)
    assert type(grown.messages) is tuple and type(grown.sources) is tuple
    assert grown.messages is grown.messages  # made once, then kept
    assert len(grown) == h + 3 and grown.all[h + 1] is b


@SIZES
def test_adding_to_an_older_list_leaves_the_newer_ones_alone(h: int) -> None:
    base = MessageList.of([*prior(h), msg("a")]).add(msg("b"))
    left = base.add(msg("l1"), "response").add(msg("l2"))
    right = base.add(msg("r1"), "memory")  # a branch: base's log already goes on
    again = base.add(msg("r1"), "memory")
    assert ids(base) == ["a", "b"]
    assert ids(left) == ["a", "b", "l1", "l2"]
    assert left.sources[h:] == ("input", "input", "response", "input")
    assert ids(right) == ["a", "b", "r1"] and right == again
    assert ids(right.add(msg("r2"))) == ["a", "b", "r1", "r2"]
    assert ids(left) == ["a", "b", "l1", "l2"] and len(left) == h + 4
    assert base.with_system(["x"]).add(msg("w")).sources == ("input",) * (h + 3)
    assert ids(left.with_system(["x"])) == ["a", "b", "l1", "l2"]
    assert ids(base.add(msg("r3"))) == ["a", "b", "r3"]


def test_adding_past_the_sharing_length_one_at_a_time_and_all_at_once() -> None:
    one_by_one, at_once = MessageList(), MessageList().add(prior(100))
    for m in prior(100):
        one_by_one = one_by_one.add(m)
    assert one_by_one == at_once == MessageList.of(prior(100))
    assert len(one_by_one) == 100 and one_by_one.sources == ("input",) * 100


@SIZES
def test_a_list_made_by_add_stays_frozen(h: int) -> None:
    ml = MessageList.of([*prior(h), msg("a")]).add(msg("b"))
    with pytest.raises(AttributeError):
        ml.messages = ()  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del ml.sources
    with pytest.raises(AttributeError):
        ml.nope  # type: ignore[attr-defined]  # noqa: B018


@SIZES
def test_lists_made_by_add_encode_copy_and_pickle_as_values(h: int) -> None:
    ml = MessageList.of([*prior(h), msg("a")], system=["s"]).add(msg("b"), "response")
    data = msgspec.json.encode(ml)
    assert data == msgspec.json.encode(MessageList(ml.messages, ml.sources, ml.system))
    back = msgspec.json.decode(data, type=MessageList)
    assert back == ml and ids(back.add(msg("c"))) == ["a", "b", "c"]

    class Holder(msgspec.Struct):
        messages: MessageList

    held = msgspec.json.decode(msgspec.json.encode(Holder(ml)), type=Holder)
    assert held.messages == ml
    assert msgspec.convert(msgspec.to_builtins(ml), MessageList) == ml
    for copied in (copy.copy(ml), copy.deepcopy(ml), pickle.loads(pickle.dumps(ml))):
        assert copied == ml
        assert ids(copied.add(msg("c"))) == ["a", "b", "c"]
    assert ids(ml.add(msg("d"))) == ["a", "b", "d"]


def test_decoding_checks_a_list_as_the_constructor_does() -> None:
    assert msgspec.json.decode(b"{}", type=MessageList) == MessageList()
    with pytest.raises(msgspec.ValidationError, match="same length"):
        msgspec.json.decode(b'{"sources": ["input"]}', type=MessageList)


@SIZES
def test_adds_racing_from_one_list_in_threads_each_get_their_own(h: int) -> None:
    threads, rounds = 8, 100
    tips = [MessageList.of([*prior(h), msg("a")]).add(msg("b")) for _ in range(rounds)]
    start = threading.Barrier(threads)

    def add_to_each(t: int) -> list[MessageList]:
        out = []
        for tip in tips:
            start.wait()  # all threads add to the same list at once
            out.append(tip.add(msg(f"t{t}"), "response"))
        return out

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        with ThreadPoolExecutor(threads) as pool:
            results = list(pool.map(add_to_each, range(threads)))
    finally:
        sys.setswitchinterval(old)
    for t, lists in enumerate(results):
        for ml in lists:
            assert ids(ml) == ["a", "b", f"t{t}"]
            assert ml.sources[h:] == ("input", "input", "response")
    assert all(ids(tip) == ["a", "b"] for tip in tips)
