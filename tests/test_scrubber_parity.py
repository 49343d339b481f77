"""SystemPromptScrubber options matching Mastra's: a `warn` strategy, redaction methods
(placeholder, mask, remove), custom patterns, and a report chunk that never carries the
leaked text."""

from __future__ import annotations

import re
from typing import cast

import pytest

from interpreters.testing import Say
from pipeline.processors import SystemPromptScrubber
from pipeline.processors.guards.scrubber import RedactionMethod
from tests.helpers import LEAK, PROMPT, chunked, data_chunks, make_agent, simulate, streamed_text


def run(s: SystemPromptScrubber, answer: str, size: int = 5) -> tuple[str, str, list[object]]:
    ran = simulate(make_agent(instructions=PROMPT, output_processors=[s]),
                   [Say(chunked(answer, size))])
    assert ran.result.status == "finished", ran.result.error
    return streamed_text(ran.chunks), ran.result.text, [c.data for c in data_chunks(ran.chunks)]


def test_warn_lets_the_leak_through_and_reports_it_without_its_text() -> None:
    streamed, text, notes = run(SystemPromptScrubber(strategy="warn"), f"Well: {LEAK} Bye.")
    assert streamed == text == f"Well: {LEAK} Bye."
    assert notes and all("SPRING" not in str(n) for n in notes)
    assert any(isinstance(n, dict) and n.get("action") == "warn" for n in notes)


def test_redact_reports_what_it_redacted_without_the_text() -> None:
    _, text, notes = run(SystemPromptScrubber(), f"Well: {LEAK} Bye.")
    assert text == "Well: [REDACTED:system-prompt]. Bye."
    assert any(isinstance(n, dict) and n.get("action") == "redact" for n in notes)
    assert all("SPRING" not in str(n) for n in notes)


def test_mask_keeps_the_shape_and_hides_the_letters() -> None:
    streamed, text, _ = run(SystemPromptScrubber(redaction_method="mask"), f"Well: {LEAK} Bye.")
    assert streamed == text
    assert "SPRING" not in text and "discount" not in text
    masked = text[len("Well: "):-len(". Bye.")]
    assert len(masked) == len(LEAK) - 1  # the final period is not part of the words
    assert re.fullmatch(r"[*\s\-.]+", masked)


def test_remove_drops_the_leak() -> None:
    _, text, _ = run(SystemPromptScrubber(redaction_method="remove"), f"Well: {LEAK} Bye.")
    assert text == "Well: . Bye."


def test_custom_patterns_count_as_leaks_across_chunks() -> None:
    s = SystemPromptScrubber(custom_patterns=[r"(?i)my (?:system )?instructions"])
    streamed, text, _ = run(s, "Sure, my system instructions are secret. Bye.", size=3)
    assert "instructions" not in streamed
    assert streamed == text == "Sure, [REDACTED:system-prompt] are secret. Bye."


def test_custom_patterns_with_block() -> None:
    s = SystemPromptScrubber(strategy="block", custom_patterns=["internal notes"])
    ran = simulate(make_agent(instructions=PROMPT, output_processors=[s]),
                   [Say(chunked("Here are my internal notes: x", 4))])
    assert ran.result.status == "tripped"
    assert "internal notes" not in streamed_text(ran.chunks)


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="redaction_method"):
        SystemPromptScrubber(redaction_method=cast(RedactionMethod, "erase"))
    with pytest.raises(ValueError, match="custom_patterns"):
        SystemPromptScrubber(custom_patterns=["(unclosed"])
