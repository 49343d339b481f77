"""Examples for the pairing-repair policy and the cut points."""

from __future__ import annotations

from pipeline.values.messages import Message, Part, Role, TextPart, ToolCallPart, ToolResultPart
from pipeline.values.pairing import MISSING_RESULT, cut_points, is_paired, repair_pairing


def m(
    mid: str, role: Role, *parts: Part, created_at: float = 0.0, thread_id: str | None = None
) -> Message:
    return Message(id=mid, role=role, parts=parts, created_at=created_at, thread_id=thread_id)


def c(i: str, name: str = "f") -> ToolCallPart:
    return ToolCallPart(i, name, {})


def r(i: str, value: object = "ok", name: str = "f") -> ToolResultPart:
    return ToolResultPart(i, name, value)


def missing(i: str, name: str = "f") -> ToolResultPart:
    return ToolResultPart(i, name, MISSING_RESULT, is_error=True)


def shape(messages: tuple[Message, ...]) -> list[tuple[str, str, tuple[Part, ...]]]:
    return [(x.id, x.role, x.parts) for x in messages]


U = m("u", "user", TextPart("q"))
ANSWER = m("z", "assistant", TextPart("done"))


def test_a_paired_history_is_returned_as_is() -> None:
    h = (
        U,
        m("a", "assistant", c("1"), c("2")),
        m("t", "tool", r("2")),
        m("t2", "tool", r("1")),
        ANSWER,
    )
    assert is_paired(h)
    assert repair_pairing(h) is h


def test_a_dangling_call_gets_an_error_result_right_after_its_tool_run() -> None:
    h = (
        U,
        m("a", "assistant", c("1"), c("2", "g"), created_at=5.0, thread_id="th"),
        m("t", "tool", r("1")),
        ANSWER,
    )
    out = repair_pairing(h)
    assert shape(out) == [
        ("u", "user", (TextPart("q"),)),
        ("a", "assistant", (c("1"), c("2", "g"))),
        ("t", "tool", (r("1"),)),
        ("a:results", "tool", (missing("2", "g"),)),
        ("z", "assistant", (TextPart("done"),)),
    ]
    assert (out[3].created_at, out[3].thread_id) == (5.0, "th")


def test_a_cancelled_run_ending_in_calls_gets_error_results() -> None:
    out = repair_pairing((U, m("a", "assistant", TextPart("let me look"), c("1"))))
    assert shape(out)[-1] == ("a:results", "tool", (missing("1"),))
    assert is_paired(out)


def test_orphan_results_are_dropped_with_the_message_they_emptied() -> None:
    h = (U, m("t", "tool", r("ghost")), m("t2", "tool", r("ghost"), TextPart("note")), ANSWER)
    out = repair_pairing(h)
    assert shape(out) == [
        ("u", "user", (TextPart("q"),)),
        ("t2", "tool", (TextPart("note"),)),
        ("z", "assistant", (TextPart("done"),)),
    ]


def test_duplicate_results_keep_the_first() -> None:
    h = (
        U,
        m("a", "assistant", c("1")),
        m("t", "tool", r("1", "first")),
        m("t2", "tool", r("1", "again")),
    )
    out = repair_pairing(h)
    assert shape(out) == shape(h[:3])


def test_a_result_before_its_call_is_moved_after_it() -> None:
    h = (m("t", "tool", r("1", "early")), U, m("a", "assistant", c("1")), ANSWER)
    out = repair_pairing(h)
    assert shape(out) == [
        ("u", "user", (TextPart("q"),)),
        ("a", "assistant", (c("1"),)),
        ("a:results", "tool", (r("1", "early"),)),
        ("z", "assistant", (TextPart("done"),)),
    ]


def test_a_result_after_an_intervening_message_is_moved_into_the_tool_run() -> None:
    # after its call, but providers want it directly after: a user message in between is a 400
    h = (m("a", "assistant", c("1")), m("u", "user", TextPart("hurry")), m("t", "tool", r("1")))
    out = repair_pairing(h)
    assert shape(out) == [
        ("a", "assistant", (c("1"),)),
        ("a:results", "tool", (r("1"),)),
        ("u", "user", (TextPart("hurry"),)),
    ]


def test_a_result_inside_a_non_tool_message_is_moved() -> None:
    h = (m("a", "assistant", c("1"), r("1")), m("u", "user", TextPart("x"), r("1", "dup")))
    out = repair_pairing(h)
    assert shape(out) == [
        ("a", "assistant", (c("1"),)),
        ("a:results", "tool", (r("1"),)),
        ("u", "user", (TextPart("x"),)),
    ]


def test_a_call_outside_an_assistant_message_is_dropped_with_its_result() -> None:
    h = (m("u", "user", TextPart("q"), c("1")), m("t", "tool", r("1")))
    assert shape(repair_pairing(h)) == [("u", "user", (TextPart("q"),))]


def test_repeated_call_ids_get_fresh_ones_that_skip_ids_in_use() -> None:
    h = (
        m("a1", "assistant", c("call_0")),
        m("t1", "tool", r("call_0", 1)),
        m("a2", "assistant", c("call_0"), c("call_0_2")),
        m("t2", "tool", r("call_0", 2), r("call_0_2", 3)),
    )
    out = repair_pairing(h)
    assert shape(out) == [
        ("a1", "assistant", (c("call_0"),)),
        ("t1", "tool", (r("call_0", 1),)),
        ("a2", "assistant", (c("call_0_3"), c("call_0_2"))),
        ("t2", "tool", (r("call_0_3", 2), r("call_0_2", 3))),
    ]


def test_parallel_calls_sharing_an_id_take_results_in_order() -> None:
    h = (
        m("a", "assistant", c("", "weather"), c("", "time")),
        m("t", "tool", r("", "sunny", "weather"), r("", "noon", "time")),
    )
    out = repair_pairing(h)
    assert shape(out) == [
        ("a", "assistant", (c("", "weather"), c("_2", "time"))),
        ("t", "tool", (r("", "sunny", "weather"), r("_2", "noon", "time"))),
    ]


def test_a_result_goes_to_the_closest_unanswered_call() -> None:
    # the first call was cancelled; the result after the second call answers the second
    h = (m("a1", "assistant", c("x")), m("a2", "assistant", c("x")), m("t", "tool", r("x")))
    out = repair_pairing(h)
    assert shape(out) == [
        ("a1", "assistant", (c("x"),)),
        ("a1:results", "tool", (missing("x"),)),
        ("a2", "assistant", (c("x_2"),)),
        ("t", "tool", (r("x_2"),)),
    ]


def test_messages_that_came_in_empty_stay_and_new_ids_avoid_existing_ones() -> None:
    h = (m("a", "assistant", c("1")), m("a:results", "user"))
    out = repair_pairing(h)
    assert shape(out) == [
        ("a", "assistant", (c("1"),)),
        ("a:results-2", "tool", (missing("1"),)),
        ("a:results", "user", ()),
    ]


def test_is_paired_checks_adjacency_uniqueness_and_roles() -> None:
    assert is_paired(())
    assert is_paired((U,))
    assert not is_paired((m("a", "assistant", c("1")), U, m("t", "tool", r("1"))))
    assert not is_paired((m("a", "assistant", c("1")), m("t", "tool", r("1"), r("1"))))
    assert not is_paired((m("a", "user", c("1")), m("t", "tool", r("1"))))
    assert not is_paired((m("a", "assistant", c("1"), r("1")),))
    assert not is_paired((m("t", "tool", r("1")),))


def test_cut_points_avoid_splitting_a_tool_exchange() -> None:
    h = (
        U,  # 0
        m("a", "assistant", c("1"), c("2")),  # 1
        m("t1", "tool", r("1")),  # 2
        m("t2", "tool", r("2")),  # 3
        ANSWER,  # 4
    )
    assert cut_points(h) == (0, 1, 4, 5)
    assert cut_points(()) == (0,)


def test_a_long_history_with_one_reused_id_is_repaired_in_linear_time() -> None:
    # 20 000 calls all with id "": a quadratic matcher would take minutes here
    n = 10_000
    h = tuple(
        x for k in range(n) for x in (m(f"a{k}", "assistant", c("")), m(f"t{k}", "tool", r("", k)))
    )
    out = repair_pairing(h)
    assert is_paired(out)
    assert out[-1].parts == (r(f"_{n}", n - 1),)
