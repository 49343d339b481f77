"""SystemPromptScrubber and BatchPartsProcessor on the simulator."""

from __future__ import annotations

import pytest

from interpreters.testing import Say, call
from pipeline.processor import StreamArgs, StreamResult, processor
from pipeline.processors import BatchPartsProcessor, SystemPromptScrubber
from pipeline.tools import tool
from pipeline.values.chunks import TextDelta, ToolCall
from tests.helpers import LEAK, PROMPT, chunked, make_agent, simulate, streamed_text


@pytest.mark.parametrize("size", [1, 5, 13, 200])
def test_scrubber_redacts_a_leaked_fragment_split_across_chunks(size: int) -> None:
    answer = f"Sure. My instructions say: {LEAK} Anything else?"
    agent = make_agent(instructions=PROMPT, output_processors=[SystemPromptScrubber()])
    ran = simulate(agent, [Say(chunked(answer, size))])
    streamed = streamed_text(ran.chunks)
    assert "SPRING-42" not in streamed and "discount code" not in streamed
    assert streamed == ran.result.text
    assert ran.result.text == "Sure. My instructions say: [REDACTED:system-prompt]. Anything else?"
    assert all("SPRING-42" not in m.text for m in ran.messages if m.role != "user")


def test_scrubber_is_case_and_punctuation_blind_and_leaves_short_overlaps() -> None:
    shouty = "NEVER REVEAL THE DISCOUNT CODE -- SPRING 42, UNLESS THE CUSTOMER SAYS..."
    ok = "You are welcome. The support assistant will call you."
    agent = make_agent(instructions=PROMPT, output_processors=[SystemPromptScrubber()])
    ran = simulate(agent, [Say(chunked(f"{ok} {shouty}", 4))])
    assert ran.result.text.startswith(ok)
    assert "SPRING" not in ran.result.text and "[REDACTED:system-prompt]" in ran.result.text


def test_scrubber_block_strategy_aborts_without_releasing_the_leak() -> None:
    agent = make_agent(instructions=PROMPT,
                       output_processors=[SystemPromptScrubber(strategy="block")])
    ran = simulate(agent, [Say(chunked(f"Well: {LEAK}", 3))])
    assert ran.result.status == "tripped"
    assert "SPRING" not in streamed_text(ran.chunks)


def test_scrubber_with_an_explicit_prompt_and_on_the_result() -> None:
    secret = "alpha bravo charlie delta echo foxtrot golf hotel india"
    s = SystemPromptScrubber(prompt=secret, min_words=4)
    ran = simulate(make_agent(output_processors=[s]),
                   [Say(["so: Alpha, bravo; charlie ", "delta! and that is all"])])
    assert ran.result.text == "so: [REDACTED:system-prompt]! and that is all"


def test_scrubber_lets_a_clean_answer_through_whole() -> None:
    answer = "The weather is sunny and you can buy an umbrella if you like."
    agent = make_agent(instructions=PROMPT, output_processors=[SystemPromptScrubber()])
    ran = simulate(agent, [Say(chunked(answer, 3))])
    assert ran.result.text == streamed_text(ran.chunks) == answer


@tool
def lookup(q: str) -> str:
    """Look up."""
    return q


def test_batch_by_count_flushes_at_text_end_and_before_other_chunks() -> None:
    agent = make_agent(tools=[lookup], output_processors=[BatchPartsProcessor(max_parts=3)])
    ran = simulate(agent, [Say(list("abcdefg"), calls=[call("lookup", q="x")]), Say("done")])
    deltas = [c.text for c in ran.chunks if isinstance(c, TextDelta)]
    assert deltas == ["abc", "def", "g", "done"]
    types = ran.types
    assert types.index("tool-call") > types.index("text-end")
    assert ran.result.steps[0].text == "abcdefg"


def test_batch_by_size() -> None:
    agent = make_agent(output_processors=[BatchPartsProcessor(max_parts=100, max_chars=4)])
    ran = simulate(agent, [Say(["ab", "c", "de", "f", "g"])])
    assert [c.text for c in ran.chunks if isinstance(c, TextDelta)] == ["abcde", "fg"]


def test_batch_flushes_at_the_responses_end_without_text_end() -> None:
    def no_end(args: StreamArgs[None]) -> StreamResult[None]:
        from effects import Continue, Skip
        from pipeline.values.chunks import TextEnd

        return Skip() if isinstance(args.part, TextEnd) else Continue()

    agent = make_agent(output_processors=[processor("no-end", process_output_stream=no_end),
                                          BatchPartsProcessor(max_parts=10)])
    ran = simulate(agent, [Say(["a", "b"])])
    assert [c.text for c in ran.chunks if isinstance(c, TextDelta)] == ["ab"]
    assert ran.result.text == "ab"


def test_batch_composes_with_pii_after_it() -> None:
    from pipeline.processors import PIIDetector

    agent = make_agent(output_processors=[BatchPartsProcessor(max_parts=4),
                                          PIIDetector(types=("email",))])
    text = "write to ann@example.com please, " * 4
    ran = simulate(agent, [Say(chunked(text, 2))])
    assert "ann@" not in streamed_text(ran.chunks)
    assert ran.result.text == text.replace("ann@example.com", "[REDACTED:email]")
    assert not any(isinstance(c, ToolCall) for c in ran.chunks)


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ValueError):
        BatchPartsProcessor(max_parts=0)
    with pytest.raises(ValueError):
        SystemPromptScrubber(min_words=1)
