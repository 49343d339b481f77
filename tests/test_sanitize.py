"""Examples for tool-call id and tool-name sanitization."""

from __future__ import annotations

import re

import msgspec
import pytest

from pipeline.values.chunks import TextDelta, ToolCall, ToolCallDelta
from pipeline.values.messages import Message, TextPart, ToolCallPart, ToolResultPart, user
from pipeline.values.model import ModelRequest, StructuredOutput, ToolChoiceTool, ToolSpec
from pipeline.values.pairing import is_paired
from pipeline.values.sanitize import (
    ANTHROPIC,
    MISTRAL,
    OPENAI,
    NameMap,
    Rule,
    SanitizeProfile,
    prepare_request,
    restore_event,
    restore_message,
    sanitize_request,
)


def calls(*ids: str, name: str = "f") -> Message:
    return Message(id="a", role="assistant", parts=tuple(ToolCallPart(i, name, {}) for i in ids))


def request(*messages: Message, tools: tuple[str, ...] = (), **kw: object) -> ModelRequest:
    specs = tuple(ToolSpec(n, "", {}) for n in tools)
    return msgspec.structs.replace(
        ModelRequest(model="m", system=(), messages=messages, tools=specs), **kw
    )


def test_a_colon_id_replayed_to_anthropic_becomes_readable_and_valid() -> None:
    out, names = sanitize_request(request(calls("llm_version:0")), ANTHROPIC)
    assert out.messages[0].tool_calls()[0].tool_call_id == "llm_version_0"
    assert names.original_id("llm_version_0") == "llm_version:0"


def test_outputs_are_pinned_so_every_process_and_version_agrees() -> None:
    # sha256-based, so these never depend on PYTHONHASHSEED; a change here breaks
    # prompt caches and replays of recorded traces, so it must be deliberate
    _, m = sanitize_request(request(calls("call_abc", "")), MISTRAL)
    assert dict(m.ids) == {"call_abc": "V9QSvx9Pt", "": "cT07vNy6A"}
    _, o = sanitize_request(request(calls("a:b", "a.b", "a_b")), OPENAI)
    assert dict(o.ids) == {"a:b": "a_b_PNbecfK", "a.b": "a_b_y25eAYw"}


def test_near_collisions_and_their_valid_twin_stay_distinct() -> None:
    out, names = sanitize_request(request(calls("a:b", "a.b", "a b", "a_b")), OPENAI)
    got = [c.tool_call_id for c in out.messages[0].tool_calls()]
    assert len(set(got)) == 4
    assert got[3] == "a_b"  # the valid one is never displaced
    assert [names.original_id(g) for g in got] == ["a:b", "a.b", "a b", "a_b"]


def test_first_rejected_string_gets_the_plain_cleaned_form() -> None:
    _, names = sanitize_request(request(calls("x"), tools=("get.weather", "get:weather")), OPENAI)
    assert names.sanitized_name("get.weather") == "get_weather"
    assert re.fullmatch(r"get_weather_[a-zA-Z0-9_-]{7}", names.sanitized_name("get:weather"))


def test_empty_ids_and_names_are_rewritten() -> None:
    out, names = sanitize_request(request(calls("", name="")), OPENAI)
    part = out.messages[0].tool_calls()[0]
    assert part.tool_call_id and part.tool_name
    assert names.original_id(part.tool_call_id) == ""
    assert names.original_name(part.tool_name) == ""


def test_openai_ids_are_capped_at_40_and_stay_distinct() -> None:
    long_a = "fc_0f0e50a1476a6c35006912c58dc9f8819192c25864eb16f07f"  # 53 chars, real
    long_b = long_a[:-1] + "0"
    out, _ = sanitize_request(request(calls(long_a, long_b)), OPENAI)
    got = [c.tool_call_id for c in out.messages[0].tool_calls()]
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,40}", g) for g in got)
    assert got[0] != got[1]
    assert got[0].startswith("fc_0f0e50a1")  # still recognisable in logs


def test_mistral_ids_are_nine_alphanumerics() -> None:
    out, _ = sanitize_request(
        request(calls("call_0", "toolu_01A09q90qw", "", "abcdefghi")), MISTRAL
    )
    got = [c.tool_call_id for c in out.messages[0].tool_calls()]
    assert all(re.fullmatch(r"[a-zA-Z0-9]{9}", g) for g in got)
    assert got[3] == "abcdefghi"
    assert len(set(got)) == 4


def test_a_conforming_request_is_returned_as_is() -> None:
    r = request(calls("call_1"), tools=("f",), tool_choice=ToolChoiceTool("f"))
    out, names = sanitize_request(r, OPENAI)
    assert out is r
    assert names.is_identity and names == NameMap()


def test_tools_tool_choice_calls_and_results_are_renamed_together() -> None:
    r = request(
        calls("1", name="my.tool"),
        Message(id="t", role="tool", parts=(ToolResultPart("1", "my.tool", 3),)),
        tools=("my.tool", "other"),
        tool_choice=ToolChoiceTool("my.tool"),
        structured_output=StructuredOutput({}, name="final answer"),
    )
    out, names = sanitize_request(r, ANTHROPIC)
    assert [t.name for t in out.tools] == ["my_tool", "other"]
    assert out.tool_choice == ToolChoiceTool("my_tool")
    assert out.messages[0].tool_calls()[0].tool_name == "my_tool"
    assert out.messages[1].tool_results()[0].tool_name == "my_tool"
    assert out.structured_output is not None and out.structured_output.name == "final_answer"
    assert names.original_name("final_answer") == "final answer"


def test_messages_without_changes_are_shared_not_copied() -> None:
    first = user("hi", id="u")
    r = request(first, calls("a:b"))
    out, _ = sanitize_request(r, OPENAI)
    assert out.messages[0] is first
    assert out.messages[1] is not r.messages[1]


def test_restore_event_maps_tool_calls_back_and_leaves_the_rest() -> None:
    _, names = sanitize_request(request(calls("a:b", name="get.weather")), OPENAI)
    sid, sname = names.sanitized_id("a:b"), names.sanitized_name("get.weather")
    assert restore_event(ToolCall(sid, sname, {"x": 1}), names) == ToolCall(
        "a:b", "get.weather", {"x": 1}
    )
    assert restore_event(ToolCallDelta(sid, sname, '{"x"'), names) == ToolCallDelta(
        "a:b", "get.weather", '{"x"'
    )
    # an id the provider made up, and an event without ids, pass through
    fresh = ToolCall("call_new", sname, {})
    assert restore_event(fresh, names) == ToolCall("call_new", "get.weather", {})
    delta = TextDelta("t", "hello")
    assert restore_event(delta, names) is delta


def test_unknown_values_map_to_themselves() -> None:
    names = NameMap.of({"a:b": "a_b"}, {})
    assert names.original_id("zzz") == "zzz"
    assert names.sanitized_id("not in request") == "not in request"
    assert names.original_name("f") == "f"


def test_restore_message_undoes_a_decoded_response() -> None:
    _, names = sanitize_request(request(calls("a:b", name="get.weather")), OPENAI)
    decoded = Message(
        id="r",
        role="assistant",
        parts=(TextPart("x"), ToolCallPart("call_9", names.sanitized_name("get.weather"), {})),
    )
    back = restore_message(decoded, names)
    assert back.parts == (TextPart("x"), ToolCallPart("call_9", "get.weather", {}))


def test_name_map_rejects_back_maps_that_do_not_invert() -> None:
    with pytest.raises(ValueError, match="invert"):
        NameMap({"a": "x"}, {}, {"x": "b"}, {})
    with pytest.raises(ValueError, match="share"):
        NameMap.of({"a": "x", "b": "x"}, {})


def test_rules_validate_and_render_a_pattern() -> None:
    with pytest.raises(ValueError):
        Rule("")
    with pytest.raises(ValueError):
        Rule("aa")
    with pytest.raises(ValueError):
        Rule("ab", min_len=3, max_len=2)
    assert Rule("a-]", 1, 3).pattern == r"^[a\-\]]{1,3}$"
    assert re.fullmatch(Rule("a-]", 1, 3).pattern, "-]a")
    assert Rule("ab", 1, None).pattern == "^[ab]{1,}$"


def test_a_tiny_rule_uses_its_whole_space_then_refuses() -> None:
    # "a"/"b" with length 1..2: six strings in all, so hashing alone cannot place them
    tiny = SanitizeProfile.custom("tiny", id_chars="ab", id_max_len=2)
    six = [f"id{k}" for k in range(6)]
    out, _ = sanitize_request(request(calls(*six)), tiny)
    assert sorted(c.tool_call_id for c in out.messages[0].tool_calls()) == sorted(
        ["a", "b", "aa", "ab", "ba", "bb"]
    )
    with pytest.raises(ValueError, match="no room"):
        sanitize_request(request(calls(*six, "id6")), tiny)


def test_a_custom_profile_without_separator_drops_forbidden_characters() -> None:
    alnum = SanitizeProfile.custom("alnum", id_chars="abc123", id_max_len=12)
    _, names = sanitize_request(request(calls("a-b-c", "a.b.c")), alnum)
    assert names.sanitized_id("a-b-c") == "abc"
    assert re.fullmatch(r"[abc123]{1,12}", names.sanitized_id("a.b.c"))
    assert names.sanitized_id("a.b.c") != "abc"


def test_prepare_request_repairs_then_sanitizes() -> None:
    # a server that numbers calls per response, replayed to a Mistral-style server
    history = (
        user("q", id="u"),
        calls("call_0"),
        Message(id="t1", role="tool", parts=(ToolResultPart("call_0", "f", 1),)),
        Message(id="a2", role="assistant", parts=(ToolCallPart("call_0", "f", {}),)),
        Message(id="t2", role="tool", parts=(ToolResultPart("call_0", "f", 2),)),
    )
    out, names = prepare_request(request(*history), MISTRAL)
    assert is_paired(out.messages)
    ids = [p.tool_call_id for m in out.messages for p in m.parts if isinstance(p, ToolCallPart)]
    assert len(set(ids)) == 2 and all(re.fullmatch(r"[a-zA-Z0-9]{9}", i) for i in ids)
    assert {names.original_id(i) for i in ids} == {"call_0", "call_0_2"}


# --- pinned outputs: a change to any of these must be deliberate ------------


def test_an_over_long_openai_id_is_pinned() -> None:
    long_id = "fc_0f0e50a1476a6c35006912c58dc9f8819192c25864eb16f07f"  # 53 chars, real
    out, names = sanitize_request(request(calls(long_id)), OPENAI)
    assert dict(names.ids) == {long_id: "fc_0f0e50a1476a6c35006912c58dc9f_A3r-LsF"}
    assert out.messages[0].tool_calls()[0].tool_call_id == names.ids[long_id]
    assert len(names.ids[long_id]) == 40


def test_mistral_ids_longer_than_nine_are_pinned() -> None:
    _, names = sanitize_request(request(calls("toolu_01A09q90qw", "call_0123456789")), MISTRAL)
    assert dict(names.ids) == {"toolu_01A09q90qw": "vmp6ExzRX", "call_0123456789": "xNuNNbq0M"}


def test_a_rewritten_mixed_case_name_keeps_its_case() -> None:
    out, names = sanitize_request(
        request(calls("x", name="Get.Weather"), tools=("Get.Weather",)), OPENAI)
    assert dict(names.names) == {"Get.Weather": "Get_Weather"}
    assert out.tools[0].name == "Get_Weather"
    assert out.messages[0].tool_calls()[0].tool_name == "Get_Weather"


def test_a_definition_keeps_the_readable_form_over_a_message_name_that_cleans_alike() -> None:
    # "get.weather" (the tool defined) and "get:weather" (a call in the history) both
    # clean to "get_weather": the definition gets it, the history's name the hashed form.
    for profile in (OPENAI, ANTHROPIC):
        out, names = sanitize_request(
            request(calls("x", name="get:weather"), tools=("get.weather",)), profile)
        assert dict(names.names) == {
            "get.weather": "get_weather", "get:weather": "get_weather_iE8wAxI"}
        assert out.tools[0].name == "get_weather"
        assert out.messages[0].tool_calls()[0].tool_name == "get_weather_iE8wAxI"
