"""PIIDetector: each kind, each strategy, on input, stream and result, the hold-back
window across chunk boundaries, failing closed, the judge, and the missing-library error."""

from __future__ import annotations

import sys
from collections.abc import Iterable

import pytest

from interpreters.testing import Say
from pipeline.processors import MissingDependency, PIIDetector
from pipeline.processors.guards.common import GuardsExtraMissing
from pipeline.processors.guards.pii_detectors import Span
from pipeline.values.chunks import DataChunk, TextDelta
from pipeline.values.result import RunResult
from tests.helpers import Ran, chunked, make_agent, simulate, streamed_text

VALUES = {
    "email": "john.smith@example.com",
    "phone": "+1 415-555-2671",
    "card": "4111 1111 1111 1111",
    "iban": "DE89 3704 0044 0532 0130 00",
    "national-id": "536-90-4399",
    "ip": "192.168.10.20",
    "secret": "sk-abcdefghijklmnopqrstuvwxyz123456",
}


def stream_run(detector: PIIDetector, text: str, size: int = 3) -> Ran:
    return simulate(make_agent(output_processors=[detector]), [Say(chunked(text, size))])


def nowhere(ran: Ran, value: str) -> bool:
    """The value reached neither the caller's stream nor the result nor the messages."""
    r: RunResult = ran.result
    return (
        value not in streamed_text(ran.chunks)
        and value not in r.text
        and all(value not in m.text for m in r.messages.messages)
    )


@pytest.mark.parametrize("kind", sorted(VALUES))
def test_each_kind_is_found_and_redacted_on_the_stream(kind: str) -> None:
    value = VALUES[kind]
    text = f"Here it is: {value} - keep it safe, please. And some more words after it."
    for size in (1, 4, 9):
        ran = stream_run(PIIDetector(), text, size)
        assert ran.result.status == "finished"
        assert nowhere(ran, value), (kind, size, streamed_text(ran.chunks))
        assert f"[REDACTED:{kind}]" in ran.result.text
        assert streamed_text(ran.chunks) == ran.result.text


def test_text_around_values_is_released_unchanged_and_in_order() -> None:
    text = "a" * 100 + " mail me at x.y@example.org today " + "b" * 100
    ran = stream_run(PIIDetector(), text, 5)
    assert ran.result.text == text.replace("x.y@example.org", "[REDACTED:email]")
    # Released as it becomes safe, not only at the end: several deltas reach the caller.
    assert len([c for c in ran.chunks if isinstance(c, TextDelta)]) > 2


def test_mask_strategy() -> None:
    d = PIIDetector(strategy="mask")
    assert d.redact_text("card 4111 1111 1111 1111") == "card **** **** **** 1111"
    assert d.redact_text("write john.smith@example.com") == "write j*********@example.com"
    assert d.redact_text("ip 10.0.0.1") == "ip **.*.*.*"


def test_hash_strategy_is_deterministic_and_salted() -> None:
    a = PIIDetector(strategy="hash").redact_text("john.smith@example.com")
    b = PIIDetector(strategy="hash").redact_text("john.smith@example.com")
    c = PIIDetector(strategy="hash", salt="s").redact_text("john.smith@example.com")
    assert a == b != c
    assert a.startswith("[email:") and "john" not in a


def test_detect_strategy_passes_the_text_and_reports_kinds_not_values() -> None:
    text = "mail john.smith@example.com now, and then some more text to fill the window."
    ran = stream_run(PIIDetector(strategy="detect"), text)
    assert ran.result.text == text
    reports = [c for c in ran.chunks if isinstance(c, DataChunk) and c.name == "data-pii"]
    assert reports and reports[0].transient
    assert reports[0].data == {"processor_id": "pii-detector", "where": "stream",
                               "found": {"email": 1}}
    assert "john" not in repr(reports)


def test_block_strategy_aborts_before_the_value_reaches_anyone() -> None:
    text = "ok so far. " * 10 + "my card is 4111 1111 1111 1111, bye. " + "tail " * 20
    ran = stream_run(PIIDetector(strategy="block"), text, 2)
    assert ran.result.status == "tripped"
    assert ran.result.tripwire is not None
    assert ran.result.tripwire.reason == "PII detected: card"
    assert nowhere(ran, "4111 1111 1111 1111")
    assert "4111" not in streamed_text(ran.chunks)


def test_cards_among_other_numbers_are_found() -> None:
    d = PIIDetector(types=("card",))
    assert d.redact_text("ref 12 4111 1111 1111 1111 9") == "ref 12 [REDACTED:card] 9"
    assert d.redact_text("4111 1111 1111 1111 5500 0000 0000 0004") == (
        "[REDACTED:card] [REDACTED:card]"
    )
    assert d.redact_text("4111 1111 1111 1112") == "4111 1111 1111 1112"  # fails Luhn


def test_an_ipv6_address_before_a_colon_is_found() -> None:
    # found by the property in properties/test_pii_properties.py
    d = PIIDetector(types=("ip",))
    assert d.redact_text(" 2001:db8::8a2e:370:7334: ") == " [REDACTED:ip]: "
    assert d.redact_text("at ::1: down") == "at [REDACTED:ip]: down"


def test_per_kind_strategies() -> None:
    d = PIIDetector(strategy="redact", strategies={"email": "mask"})
    out = d.redact_text("john.smith@example.com 4111 1111 1111 1111")
    assert out == "j*********@example.com [REDACTED:card]"


def test_custom_patterns_and_functions() -> None:
    def badge(text: str) -> Iterable[Span]:
        i = text.find("BADGE")
        return [(i, i + 9)] if i >= 0 else []

    d = PIIDetector(types=(), custom={"employee": r"EMP-\d{6}", "badge": badge})
    assert d.redact_text("EMP-123456 and BADGE-007") == (
        "[REDACTED:employee] and [REDACTED:badge]"
    )


def test_input_and_result_are_redacted() -> None:
    d = PIIDetector()
    model_said = "reach me at jane.doe@example.com"
    agent = make_agent(input_processors=[d], output_processors=[d])
    ran = simulate(agent, [Say(model_said)], "my mail is a.b@example.com")
    assert ran.requests[0].messages[0].text == "my mail is [REDACTED:email]"
    assert nowhere(ran, "a.b@example.com") and nowhere(ran, "jane.doe@example.com")


def test_result_hook_alone_redacts_the_response() -> None:
    d = PIIDetector(on_stream=False)
    ran = simulate(make_agent(output_processors=[d]), [Say(["jane.doe@ex", "ample.com"])])
    assert ran.result.text == "[REDACTED:email]"
    assert ran.messages[-1].text == "[REDACTED:email]"


def test_a_failing_detector_blocks_by_default() -> None:
    def broken(text: str) -> Iterable[Span]:
        raise RuntimeError("detector down")

    text = "nothing personal here, just a long enough answer to pass the window " * 2
    ran = stream_run(PIIDetector(custom={"x": broken}), text)
    assert ran.result.status == "tripped"
    assert ran.result.tripwire is not None
    assert "PII detection failed (RuntimeError)" in ran.result.tripwire.reason
    assert streamed_text(ran.chunks) == ""
    # on input too: the model is never called
    d = PIIDetector(custom={"x": broken})
    ran = simulate(make_agent(input_processors=[d]), [Say("never")])
    assert ran.result.status == "tripped" and ran.requests == []


def test_a_failing_detector_may_be_allowed_through() -> None:
    def broken(text: str) -> Iterable[Span]:
        raise RuntimeError("detector down")

    text = "nothing personal here, just a long enough answer to pass the window " * 2
    ran = stream_run(PIIDetector(custom={"x": broken}, on_error="allow"), text)
    assert ran.result.status == "finished"
    assert ran.result.text == streamed_text(ran.chunks) == text


def test_a_value_longer_than_max_hold_blocks() -> None:
    text = "key: " + "eyJ" + "a" * 400 + " end"
    ran = stream_run(PIIDetector(window=16, max_hold=64), text, 10)
    assert ran.result.status == "tripped"
    assert "max_hold" in (ran.result.tripwire.reason if ran.result.tripwire else "")
    assert "aaaa" not in streamed_text(ran.chunks)


def test_missing_library_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "phonenumbers", None)
    with pytest.raises(MissingDependency, match=r"pipeline-agents\[guards\]"):
        PIIDetector()
    PIIDetector(types=("email",))  # fine without it
    d = PIIDetector(regex_only=True)  # the documented fallback
    assert d.redact_text("call +1 415-555-2671") == "call [REDACTED:phone]"
    assert d.redact_text("card 4111 1111 1111 1111") == "card [REDACTED:card]"


def test_a_missing_library_is_the_guards_extra_error_with_the_pii_fallback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "phonenumbers", None)
    with pytest.raises(GuardsExtraMissing) as caught:  # one error for every guard's extra
        PIIDetector()
    err = caught.value
    assert isinstance(err, MissingDependency)
    assert (err.feature, err.module, err.package) == (
        "PIIDetector's 'phone' detector", "phonenumbers", "phonenumbers")
    assert "pip install 'pipeline-agents[guards]'" in str(err)
    assert "regex_only=True" in str(err)  # the detector's own way out


def test_judge_names_values_the_patterns_miss() -> None:
    d = PIIDetector(judge_model="judge")
    agent = make_agent(input_processors=[d], output_processors=[d])
    ran = simulate(
        agent, [Say("Hello Ada Lovelace, your mail is ada@example.com")],
        "I am Ada Lovelace",
        models={"judge": [Say('{"values": [{"type": "name", "value": "Ada Lovelace"}]}'),
                          Say('{"values": [{"type": "name", "value": "Ada Lovelace"}]}')]},
    )
    assert ran.requests[0].messages[0].text == "I am [REDACTED:judged]"
    assert ran.result.text == "Hello [REDACTED:judged], your mail is [REDACTED:email]"
    judge = ran.models["judge"]
    assert [r.messages[0].text for r in judge.requests] == [
        "I am Ada Lovelace", "Hello Ada Lovelace, your mail is [REDACTED:email]",
    ]


def test_an_unreadable_judge_reply_blocks() -> None:
    d = PIIDetector(judge_model="judge")
    ran = simulate(make_agent(input_processors=[d]), [Say("never")], "hi there",
                   models={"judge": [Say("I think there is no PII")]})
    assert ran.result.status == "tripped"
    assert ran.requests == []


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match=r"types\[0\]='emails'"):
        PIIDetector(types=("emails",))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_hold"):
        PIIDetector(window=100, max_hold=150)
    with pytest.raises(ValueError, match=r"national_ids.*'xx\.nope'.*'us\.ssn'"):
        PIIDetector(national_ids=("xx.nope",))


def test_reasoning_is_held_and_redacted_too() -> None:
    from pipeline.values.chunks import ReasoningDelta

    reasoning = ["the user is jane.d", "oe@exam", "ple.com, so I will answer politely"]
    ran = simulate(make_agent(output_processors=[PIIDetector()]),
                   [Say("ok", reasoning=reasoning)])
    streamed = "".join(c.text for c in ran.chunks if isinstance(c, ReasoningDelta))
    assert streamed == "the user is [REDACTED:email], so I will answer politely"
    assert ran.result.steps[0].reasoning == streamed


def test_judge_on_the_stream_holds_each_block_and_redacts_what_it_names() -> None:
    d = PIIDetector(judge_model="judge", judge_stream=True)
    named = Say('{"values": [{"type": "name", "value": "Ada Lovelace"}]}')
    ran = simulate(
        make_agent(output_processors=[d]),
        [Say(["Dear Ada Love", "lace, mail me at ada@ex", "ample.com"])],
        models={"judge": [named, named]},
    )
    deltas = [c.text for c in ran.chunks if isinstance(c, TextDelta)]
    assert deltas == ["Dear [REDACTED:judged], mail me at [REDACTED:email]"]
    assert ran.result.text == deltas[0]
    judge = ran.models["judge"]
    assert judge.requests[0].messages[0].text == "Dear Ada Lovelace, mail me at ada@example.com"


def test_judge_on_the_stream_fails_closed_on_an_unreadable_reply() -> None:
    d = PIIDetector(judge_model="judge", judge_stream=True, on_result=False)
    ran = simulate(make_agent(output_processors=[d]), [Say(["Dear Ada ", "Lovelace"])],
                   models={"judge": [Say("no idea")]})
    assert ran.result.status == "tripped"
    assert streamed_text(ran.chunks) == ""
    with pytest.raises(ValueError, match="judge_model"):
        PIIDetector(judge_stream=True)
