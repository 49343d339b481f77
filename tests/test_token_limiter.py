"""TokenLimiterProcessor: history trimming at pairing-safe cuts, the answer's budget, and
pluggable counting."""

from __future__ import annotations

from typing import cast

import pytest

from interpreters.testing import Say, ScriptedModel, Simulator, call
from pipeline import Agent, DataChunk, Message, MessageList, TextDelta, TextPart
from pipeline.processors import (
    ApproxTokenCounter,
    EncodingCounter,
    TokenCounter,
    TokenLimiterProcessor,
)
from pipeline.processors.token_counting import count_message, longest_prefix_within
from pipeline.processors.token_limiter import trim_start
from pipeline.values import ToolCallPart, ToolResultPart
from pipeline.values.pairing import is_paired


class WordCounter:
    """One token per whitespace-separated word: easy to reason about in tests."""

    def count(self, text: str) -> int:
        return len(text.split())


W = WordCounter()


def msg(mid: str, role: str, text: str) -> Message:
    assert role in ("user", "assistant")
    return Message(id=mid, role="user" if role == "user" else "assistant",
                   parts=(TextPart(text),))


def history() -> MessageList:
    """u0 a0 u1 a1 u2: five messages of 3 words each (+1 overhead = 4 tokens)."""
    out = []
    for i in range(2):
        out += [msg(f"u{i}", "user", f"question {i} here"), msg(f"a{i}", "assistant",
                                                                f"answer {i} here")]
    out.append(msg("u2", "user", "the last question"))
    return MessageList.of(out)


def limiter(
    limit: int, *, start_with_user: bool = True, every_step: bool = True
) -> TokenLimiterProcessor:
    return TokenLimiterProcessor(limit, counter=W, message_overhead=1,
                                 start_with_user=start_with_user, every_step=every_step)


def test_approx_counter_rounds_up_and_counts_bytes() -> None:
    c = ApproxTokenCounter()
    assert (c.count(""), c.count("abc"), c.count("abcd"), c.count("abcde")) == (0, 1, 1, 2)
    assert c.count("日本語") == 3  # 9 bytes
    with pytest.raises(ValueError):
        ApproxTokenCounter(0)


def test_encoding_counter_wraps_any_encode_function() -> None:
    c = EncodingCounter(lambda t: t.split(","))
    assert c.count("a,b,c") == 3


def test_a_counter_without_count_is_refused() -> None:
    with pytest.raises(TypeError, match="count"):
        TokenLimiterProcessor(10, counter=cast(TokenCounter, object()))


def test_message_count_includes_tool_parts_and_files() -> None:
    m = Message(id="a", role="assistant", parts=(ToolCallPart("c", "get", {"q": "x y"}),))
    assert count_message(W, m, overhead=2) == 2 + W.count('get{"q":"x y"}')


def test_longest_prefix_within() -> None:
    assert longest_prefix_within(W, "a b c d", 2) == "a b "
    assert longest_prefix_within(W, "a b", 5) == "a b"
    assert longest_prefix_within(W, "a b", 0) == ""


def test_history_that_fits_is_untouched() -> None:
    model = ScriptedModel([Say("ok")])
    p = limiter(100)
    run = Simulator(model).run(Agent.create("m", input_processors=[p]), history())
    assert len(model.requests[0].messages) == 5
    assert [type(e).__name__ for e in run.trace.effects_of(p.id, "process_input")] == [
        "Continue"
    ]


def test_oldest_messages_go_first_and_the_kept_history_starts_with_a_user() -> None:
    model = ScriptedModel([Say("ok")])
    # 5 messages x 4 tokens = 20; a budget of 13 fits the last three (12)
    Simulator(model).run(Agent.create("m", input_processors=[limiter(13)]), history())
    assert [m.id for m in model.requests[0].messages] == ["u1", "a1", "u2"]
    # 9 fits two (a1, u2) but a1 is not a user message: only u2 is kept
    model = ScriptedModel([Say("ok")])
    Simulator(model).run(Agent.create("m", input_processors=[limiter(9)]), history())
    assert [m.id for m in model.requests[0].messages] == ["u2"]
    model = ScriptedModel([Say("ok")])
    p = limiter(9, start_with_user=False)
    Simulator(model).run(Agent.create("m", input_processors=[p]), history())
    assert [m.id for m in model.requests[0].messages] == ["a1", "u2"]


def test_system_messages_count_against_the_budget() -> None:
    model = ScriptedModel([Say("ok")])
    agent = Agent.create("m", instructions="be brief and kind", input_processors=[limiter(13)])
    Simulator(model).run(agent, history())
    # the instructions take 5 tokens: only 8 are left, so only u2 fits
    assert [m.id for m in model.requests[0].messages] == ["u2"]


def test_nothing_fits_aborts_instead_of_exceeding_the_budget() -> None:
    model = ScriptedModel([Say("ok")])
    run = Simulator(model).run(Agent.create("m", input_processors=[limiter(3)]), history())
    assert run.result.status == "tripped" and model.requests == []
    assert run.result.tripwire is not None and "token budget" in run.result.tripwire.reason


def tool_history() -> MessageList:
    """u0, an assistant call, its result, an answer, then the question: the call and its
    result must never be split."""
    return MessageList.of([
        msg("u0", "user", "what is x"),
        Message(id="a0", role="assistant", parts=(ToolCallPart("c1", "get", {}),)),
        Message(id="t0", role="tool",
                parts=(ToolResultPart("c1", "get", "a very long result " * 5),)),
        msg("a1", "assistant", "x is y"),
        msg("u1", "user", "thanks and now z"),
    ])


def test_trim_never_cuts_between_a_call_and_its_result() -> None:
    ml = tool_history()
    p = limiter(100, start_with_user=False)
    costs = tuple(p.message_tokens(m) for m in ml.messages)
    for budget in range(1, sum(costs) + 1):
        start = trim_start(ml.messages, costs, budget, start_with_user=False)
        if start is None:
            continue
        assert start != 2  # between a0 (the call) and t0 (its result)
        assert is_paired(ml.messages[start:])
        assert sum(costs[start:]) <= budget


def test_every_step_trims_a_growing_tool_loop() -> None:
    def get() -> str:
        """Get."""
        return "one two three four five six"

    model = ScriptedModel(
        [Say("a b", calls=[call("get")]) for _ in range(4)] + [Say("done")]
    )
    p = limiter(30, start_with_user=False)
    agent = Agent.create("m", tools=[get], input_processors=[p], max_steps=10)
    run = Simulator(model).run(agent, "start the loop")
    assert run.result.status == "finished"
    for req in model.requests:
        assert p.history_tokens(req.messages, req.system) <= 30
        assert is_paired(req.messages)
    assert len(model.requests[-1].messages) < 2 + 4 * 2  # something was dropped


def test_every_step_off_only_trims_once() -> None:
    p = limiter(100, every_step=False)
    run = Simulator(ScriptedModel([Say("ok")])).run(
        Agent.create("m", input_processors=[p]), history()
    )
    assert [type(e).__name__ for e in run.trace.effects_of(p.id, "process_input_step")] == [
        "Continue"
    ]


# --- output -----------------------------------------------------------------------------------


def streamed(p: TokenLimiterProcessor, chunks: list[str]) -> tuple[list[str], str, str]:
    sim = Simulator(ScriptedModel([Say(chunks)]))
    agent = Agent.create("m", output_processors=[p])
    with sim.stream(agent, "go") as s:
        got = list(s)
    assert s.result is not None
    texts = [c.text for c in got if isinstance(c, TextDelta)]
    names = ",".join(c.name for c in got if isinstance(c, DataChunk))
    return texts, s.result.text, f"{s.result.status}:{names}"


def test_output_truncate_cuts_the_crossing_chunk_and_drops_the_rest() -> None:
    texts, text, status = streamed(limiter(5), ["one two ", "three four ", "five six ", "seven"])
    assert texts == ["one two ", "three four ", "five "]
    assert text == "one two three four five "
    assert status == "finished:data-token-limiter"


def test_output_abort_stops_the_run_and_keeps_nothing_unapproved() -> None:
    p = TokenLimiterProcessor(5, counter=W, strategy="abort")
    texts, text, status = streamed(p, ["one two ", "three four ", "five six ", "seven"])
    assert texts == ["one two ", "three four "]
    assert status.startswith("tripped")
    assert "five" not in text


def test_output_part_mode_limits_each_chunk() -> None:
    p = TokenLimiterProcessor(2, counter=W, count_mode="part")
    texts, _, _ = streamed(p, ["one two three ", "four ", "five six seven"])
    assert texts == ["one two ", "four ", "five six "]


def test_output_counts_the_whole_run_across_steps() -> None:
    def get() -> str:
        """Get."""
        return "r"

    model = ScriptedModel([Say("one two three", calls=[call("get")]), Say("four five six")])
    agent = Agent.create("m", tools=[get], output_processors=[limiter(4)])
    run = Simulator(model).run(agent, "go")
    assert run.result.text == "one two threefour "  # the steps' texts, joined
