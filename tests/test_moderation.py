"""ModerationProcessor: input and output checks, each strategy, and fail-closed judging."""

from __future__ import annotations

from typing import Literal

import msgspec
import pytest

from interpreters.testing import Fail, Say, ScriptedModel, Simulator, call
from pipeline import Agent, DataChunk, Message, MessageList, RunResult, TextPart
from pipeline.processors import ModerationProcessor
from pipeline.processors.guards.moderation import ModerationStrategy

CATS = ("hate", "violence")


def verdict(**scores: float) -> Say:
    full = {c: 0.0 for c in CATS} | scores
    return Say(msgspec.json.encode({"category_scores": full, "reason": "r"}).decode())


CLEAN = verdict()
HATEFUL = verdict(hate=0.9)


def mod(
    strategy: ModerationStrategy = "block",
    output_check: Literal["step", "result"] = "step",
    fail_open: bool = False,
) -> ModerationProcessor:
    return ModerationProcessor(
        "judge", categories=CATS, strategy=strategy, output_check=output_check,
        fail_open=fail_open,
    )


def run_with(
    judge: list[Say | Fail],
    agent: Agent,
    prompt: str | MessageList = "hello there",
    answers: list[Say] | None = None,
) -> tuple[ScriptedModel, ScriptedModel, RunResult, list[DataChunk]]:
    model = ScriptedModel(answers or [Say("an answer")])
    judge_model = ScriptedModel(judge)
    run = Simulator(model, models={"judge": judge_model}).run(agent, prompt)
    notes = [c for c in run.chunks if isinstance(c, DataChunk)]
    return model, judge_model, run.result, notes


# --- input -----------------------------------------------------------------------------------


def test_clean_input_passes_and_the_judge_sees_the_text_as_data() -> None:
    model, judge, result, _ = run_with([CLEAN], Agent.create("m", input_processors=[mod()]))
    assert result.status == "finished"
    assert len(model.requests) == 1
    req = judge.requests[0]
    assert req.model == "judge" and "hate, violence" in req.system[0].content
    assert req.messages[0].text == "<content>\nhello there\n</content>"


def test_flagged_input_blocks_before_the_model() -> None:
    model, _, result, _ = run_with([HATEFUL], Agent.create("m", input_processors=[mod()]))
    assert result.status == "tripped"
    assert result.tripwire is not None and result.tripwire.metadata is not None
    assert result.tripwire.metadata["categories"] == ["hate"]  # server-side, not the reason
    assert "hate" not in result.tripwire.reason
    assert model.requests == []


def test_threshold_is_inclusive_and_scores_below_pass() -> None:
    agent = Agent.create("m", input_processors=[mod()])
    assert run_with([verdict(hate=0.49)], agent)[2].status == "finished"
    assert run_with([verdict(hate=0.5)], agent)[2].status == "tripped"


def test_warn_on_input_emits_and_goes_on() -> None:
    model, _, result, notes = run_with(
        [HATEFUL], Agent.create("m", input_processors=[mod("warn")])
    )
    assert result.status == "finished" and len(model.requests) == 1
    assert notes[0].name == "data-moderation"
    assert isinstance(notes[0].data, dict) and notes[0].data["categories"] == ["hate"]


def test_filter_on_input_drops_the_flagged_message() -> None:
    hist = MessageList.of([
        Message(id="u1", role="user", parts=(TextPart("fine"),)),
        Message(id="u2", role="user", parts=(TextPart("hateful"),)),
    ])
    model, judge, result, _ = run_with(
        [CLEAN, HATEFUL], Agent.create("m", input_processors=[mod("filter")]), hist
    )
    assert len(judge.requests) == 2
    assert [m.id for m in model.requests[0].messages] == ["u1"]
    assert result.status == "finished"


@pytest.mark.parametrize(
    "reply",
    [
        Fail(status=400, message="judge rejected"),
        Fail(status=None, message="connection refused"),
        Say("Looks fine to me."),
        Say('{"category_scores": {"hate": 0.1}}'),  # a category missing
        Say('{"category_scores": {"hate": 0.1, "violence": 3}}'),  # out of range
        Say('{"category_scores": "none"}'),
    ],
    ids=["http-error", "connection", "prose", "missing-category", "out-of-range", "wrong-type"],
)
def test_judge_failure_fails_closed_on_input(reply: Say | Fail) -> None:
    model, _, result, _ = run_with([reply], Agent.create("m", input_processors=[mod()]))
    assert result.status == "tripped"
    assert result.tripwire is not None and "fail closed" in result.tripwire.reason
    assert model.requests == []


def test_fail_open_lets_the_text_through_with_a_warning() -> None:
    model, _, result, notes = run_with(
        [Say("???")], Agent.create("m", input_processors=[mod(fail_open=True)])
    )
    assert result.status == "finished" and len(model.requests) == 1
    assert isinstance(notes[0].data, dict) and notes[0].data["action"] == "judge-failed"


# --- output ----------------------------------------------------------------------------------


def test_flagged_answer_is_blocked_and_not_kept() -> None:
    _, judge, result, _ = run_with([HATEFUL], Agent.create("m", output_processors=[mod()]))
    assert judge.requests[0].messages[0].text == "<content>\nan answer\n</content>"
    assert result.status == "tripped"
    assert result.text == ""
    assert all(m.role != "assistant" for m in result.messages.messages)


def test_clean_answer_is_kept() -> None:
    _, _, result, _ = run_with([CLEAN], Agent.create("m", output_processors=[mod()]))
    assert result.status == "finished" and result.text == "an answer"


def test_tool_call_steps_without_text_are_not_judged() -> None:
    def lookup() -> str:
        """Look up."""
        return "x"

    agent = Agent.create("m", tools=[lookup], output_processors=[mod()])
    _, judge, result, _ = run_with(
        [CLEAN], agent, answers=[Say(calls=[call("lookup")]), Say("an answer")]
    )
    assert len(judge.requests) == 1 and result.status == "finished"


def test_filter_on_output_removes_the_text_and_keeps_tool_calls() -> None:
    def lookup() -> str:
        """Look up."""
        return "x"

    agent = Agent.create("m", tools=[lookup], output_processors=[mod("filter")])
    _, _, result, notes = run_with(
        [HATEFUL, CLEAN], agent,
        answers=[Say("nasty words", calls=[call("lookup")]), Say("a clean answer")],
    )
    assert result.status == "finished"
    assert result.text == "a clean answer"
    first = next(m for m in result.messages.messages if m.role == "assistant")
    assert first.text == "" and first.tool_calls()
    assert len(notes) == 1


def test_warn_on_output_keeps_the_answer_and_emits() -> None:
    _, _, result, notes = run_with([HATEFUL], Agent.create("m", output_processors=[mod("warn")]))
    assert result.status == "finished" and result.text == "an answer"
    assert [n.name for n in notes] == ["data-moderation"]


def test_retry_asks_the_model_again_with_feedback() -> None:
    agent = Agent.create("m", output_processors=[mod("retry")])
    model, _, result, _ = run_with(
        [HATEFUL, CLEAN], agent, answers=[Say("nasty"), Say("nice")]
    )
    assert result.status == "finished" and result.text == "nice"
    assert result.retry_count == 1
    assert "flagged by moderation" in model.requests[1].messages[-1].text


def test_retry_on_input_blocks() -> None:
    _, _, result, _ = run_with([HATEFUL], Agent.create("m", input_processors=[mod("retry")]))
    assert result.status == "tripped"


def test_judge_failure_on_output_fails_closed_and_drops_the_answer() -> None:
    _, _, result, _ = run_with(
        [Fail(status=500, retryable=False)], Agent.create("m", output_processors=[mod()])
    )
    assert result.status == "tripped" and result.text == ""


def test_result_mode_judges_once_at_the_end() -> None:
    def lookup() -> str:
        """Look up."""
        return "x"

    p = ModerationProcessor("judge", categories=CATS, output_check="result",
                            moderate_stream=False)
    agent = Agent.create("m", tools=[lookup], output_processors=[p])
    _, judge, result, _ = run_with(
        [HATEFUL], agent, answers=[Say("first", calls=[call("lookup")]), Say("second")]
    )
    assert len(judge.requests) == 1
    assert judge.requests[0].messages[0].text == "<content>\nfirstsecond\n</content>"
    assert result.status == "tripped" and result.text == ""


def test_result_mode_filter_removes_all_answer_text() -> None:
    agent = Agent.create("m", output_processors=[mod("filter", output_check="result")])
    _, _, result, _ = run_with([HATEFUL], agent)
    assert result.status == "finished" and result.text == ""


def test_no_categories_is_refused() -> None:
    with pytest.raises(ValueError, match="category"):
        ModerationProcessor("judge", categories=())


def test_filtering_every_input_message_aborts() -> None:
    model, _, result, _ = run_with([HATEFUL], Agent.create("m", input_processors=[mod("filter")]))
    assert result.status == "tripped" and model.requests == []
    assert result.tripwire is not None and "filtered" in result.tripwire.reason


def test_last_message_only_judges_only_the_newest_input() -> None:
    hist = MessageList.of([
        Message(id="u1", role="user", parts=(TextPart("an earlier question"),)),
        Message(id="u2", role="user", parts=(TextPart("the new one"),)),
    ])
    p = ModerationProcessor("judge", categories=CATS, last_message_only=True)
    _, judge, result, _ = run_with([CLEAN], Agent.create("m", input_processors=[p]), hist)
    assert result.status == "finished"
    assert [r.messages[0].text for r in judge.requests] == ["<content>\nthe new one\n</content>"]
