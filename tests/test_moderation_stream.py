"""ModerationProcessor on the stream: text is held back in bounded windows, judged, and
only then released. Nothing the judge has not passed reaches the consumer, `result.text`
or `result.messages`, on the Simulator and the AsyncSimulator: when it is clean, flagged
(block / warn / filter / retry), when the judge fails, and when the run is cancelled
while the judge decides."""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec
import pytest

from interpreters.sim.simulator import Scripted
from interpreters.testing import AsyncSimulator, Fail, Say, ScriptedModel, Simulator
from pipeline import Agent
from pipeline.processors import ModerationProcessor
from pipeline.processors.guards.moderation import ModerationStrategy
from pipeline.values.chunks import Chunk, DataChunk, ReasoningDelta, TextDelta
from pipeline.values.model import ModelRequest
from pipeline.values.result import Cancelled, RunResult

CATS = ("hate", "violence")
BAD = "nasty"


def verdict(**scores: float) -> Say:
    full = {c: 0.0 for c in CATS} | scores
    return Say(msgspec.json.encode({"category_scores": full, "reason": "r"}).decode())


def content_of(request: ModelRequest) -> str:
    text = request.messages[0].text
    start = text.index("<content>\n") + len("<content>\n")
    return text[start : text.rindex("\n</content>")]


@dataclass
class Judge:
    """A scripted judge: flags content containing `nasty`, fails on `boom` (or with
    `fail`), waits `latency` virtual seconds on content containing `slow`. It records each
    content it judged and the text the consumer had seen at that moment."""

    seen: list[str]
    fail: Scripted | None = None
    latency: float = 100.0
    calls: list[tuple[str, str]] = field(default_factory=list)
    raw: list[str] = field(default_factory=list)
    all_slow: bool = False
    """Every content waits `latency`, not only content containing `slow`."""

    def __call__(self, request: ModelRequest) -> Scripted:
        content = content_of(request)
        self.raw.append(request.messages[0].text)
        self.calls.append((content, "".join(self.seen)))
        if "boom" in content:
            return self.fail or Fail(status=500, message="judge down", retryable=False)
        answer = verdict(hate=0.9) if BAD in content else verdict()
        if "slow" in content or self.all_slow:
            return Say(answer.text, latency=self.latency)
        return answer


def mod(
    strategy: ModerationStrategy = "block",
    *,
    window: int = 16,
    fail_open: bool = False,
    moderate_stream: bool = True,
    context_window: int = 0,
    max_in_flight: int = 4,
) -> ModerationProcessor:
    return ModerationProcessor(
        "judge", categories=CATS, strategy=strategy, stream_window=window,
        fail_open=fail_open, moderate_stream=moderate_stream, context_window=context_window,
        max_in_flight=max_in_flight,
    )


@dataclass
class Ran:
    result: RunResult
    chunks: list[Chunk]
    judge: Judge
    model: ScriptedModel

    @property
    def streamed(self) -> str:
        return "".join(c.text for c in self.chunks if isinstance(c, TextDelta))

    @property
    def notes(self) -> list[dict[str, object]]:
        return [c.data for c in self.chunks
                if isinstance(c, DataChunk) and isinstance(c.data, dict)]

    def kept(self) -> str:
        """Every text the result keeps: its text and all its messages."""
        return self.result.text + "".join(m.text for m in self.result.messages.messages)


def _scripts(
    answers: list[Say], fail: Scripted | None
) -> tuple[list[str], Judge, ScriptedModel, dict[str, ScriptedModel]]:
    """The text the caller has seen (the judge reads it), the judge, the model, and the
    simulator's judge model."""
    seen: list[str] = []
    judge = Judge(seen, fail)
    return seen, judge, ScriptedModel(answers), {"judge": ScriptedModel(judge)}


def _saw(c: Chunk, chunks: list[Chunk], seen: list[str]) -> None:
    chunks.append(c)
    if isinstance(c, TextDelta):
        seen.append(c.text)


def run_sync(
    p: ModerationProcessor, answers: list[Say], *, fail: Scripted | None = None,
    timeout: float | None = None,
) -> Ran:
    seen, judge, model, judges = _scripts(answers, fail)
    chunks: list[Chunk] = []
    with Simulator(model, models=judges).stream(
        Agent.create("m", output_processors=[p]), "hi", timeout=timeout
    ) as s:
        for c in s:
            _saw(c, chunks, seen)
    return Ran(s.result, chunks, judge, model)


async def run_async(
    p: ModerationProcessor, answers: list[Say], *, fail: Scripted | None = None,
    timeout: float | None = None,
) -> Ran:
    seen, judge, model, judges = _scripts(answers, fail)
    chunks: list[Chunk] = []
    async with AsyncSimulator(model, models=judges).stream(
        Agent.create("m", output_processors=[p]), "hi", timeout=timeout
    ) as s:
        async for c in s:
            _saw(c, chunks, seen)
    return Ran(s.result, chunks, judge, model)


def stream_calls(ran: Ran) -> list[tuple[str, str]]:
    """The judge calls made on the stream (the step check judges the whole answer)."""
    return ran.judge.calls[:-1] if ran.result.status == "finished" else ran.judge.calls


CLEAN_TEXT = ["Hello there, my ", "friend. How are you ", "doing on this fine day?"]


def check_clean(ran: Ran) -> None:
    full = "".join(CLEAN_TEXT)
    assert ran.result.status == "finished"
    assert ran.streamed == ran.result.text == full
    windows = stream_calls(ran)
    assert len(windows) >= 3 and all(0 < len(w) <= 16 for w, _ in windows)
    # Judged concurrently, the calls may reach the judge in any order (under trio, say).
    in_order = sorted(windows, key=lambda call: full.index(call[0]))
    assert "".join(w for w, _ in in_order) == full
    for w, seen in windows:
        # At each judge call the consumer had seen at most the text before that window
        # (what the judge passed of it, in order: the rest is still with the judge).
        assert full[: full.index(w)].startswith(seen)


def test_clean_text_is_released_window_by_window_after_the_judge_passed_it() -> None:
    check_clean(run_sync(mod(), [Say(CLEAN_TEXT)]))


@pytest.mark.anyio
async def test_clean_text_on_the_async_simulator() -> None:
    check_clean(await run_async(mod(), [Say(CLEAN_TEXT)]))


FLAGGED = ["All good here. ", "Then some nasty", " words follow. ", "And the end."]


def check_blocked(ran: Ran) -> None:
    assert ran.result.status == "tripped"
    tw = ran.result.tripwire
    assert tw is not None and tw.metadata is not None and tw.metadata["categories"] == ["hate"]
    assert BAD not in ran.streamed and BAD not in ran.kept()
    assert "follow" not in ran.streamed  # nothing after the block either


def test_a_flagged_window_blocks_and_never_reaches_anyone() -> None:
    check_blocked(run_sync(mod(), [Say(FLAGGED)]))


@pytest.mark.anyio
async def test_a_flagged_window_blocks_on_the_async_simulator() -> None:
    check_blocked(await run_async(mod(), [Say(FLAGGED)]))


def test_filter_drops_the_flagged_window_and_goes_on() -> None:
    ran = run_sync(mod("filter"), [Say(FLAGGED)])
    assert ran.result.status == "finished"
    assert BAD not in ran.streamed and BAD not in ran.kept()
    assert ran.streamed.startswith("All good here.") and ran.streamed.endswith("the end.")
    assert ran.result.text == ran.streamed
    note = next(n for n in ran.notes if n.get("action") == "filter")
    assert note["where"] == "stream:text" and note["categories"] == ["hate"]


def test_warn_releases_the_flagged_window_with_a_warning() -> None:
    ran = run_sync(mod("warn"), [Say(FLAGGED)])
    assert ran.result.status == "finished"
    assert ran.streamed == ran.result.text == "".join(FLAGGED)
    assert any(n.get("action") == "warn" and n["where"] == "stream:text" for n in ran.notes)


def test_retry_drops_the_flagged_text_and_asks_the_model_again() -> None:
    ran = run_sync(mod("retry"), [Say(FLAGGED), Say("A kind answer.")])
    assert ran.result.status == "finished" and ran.result.retry_count == 1
    assert ran.result.text == "A kind answer."
    assert BAD not in ran.streamed and BAD not in ran.kept()
    assert "flagged by moderation" in ran.model.requests[1].messages[-1].text


@pytest.mark.parametrize(
    "fail", [Fail(status=500, message="down", retryable=False), Say("I think it is fine")],
    ids=["http-error", "prose"],
)
def test_a_judge_failure_fails_closed_and_releases_nothing_of_the_window(
    fail: Scripted,
) -> None:
    ran = run_sync(mod(), [Say(["Fine words. ", "then boom goes", " the rest"])], fail=fail)
    assert ran.result.status == "tripped"
    assert ran.result.tripwire is not None and "fail closed" in ran.result.tripwire.reason
    assert "boom" not in ran.streamed and "boom" not in ran.kept()
    assert ran.streamed == "Fine words. "


@pytest.mark.anyio
async def test_a_judge_failure_fails_closed_on_the_async_simulator() -> None:
    ran = await run_async(mod(), [Say(["Fine words. ", "then boom goes", " the rest"])])
    assert ran.result.status == "tripped"
    assert "boom" not in ran.streamed and "boom" not in ran.kept()


def test_fail_open_releases_the_window_with_a_warning() -> None:
    ran = run_sync(mod(fail_open=True), [Say(["Fine words. ", "then boom goes"])])
    assert ran.result.status == "finished"
    assert ran.streamed == "Fine words. then boom goes"
    assert any(n.get("action") == "judge-failed" for n in ran.notes)


SLOW = ["First part, ok. ", "slow to judge ", "and more text."]


def check_cancelled_while_judging(ran: Ran) -> None:
    assert ran.result.status == "cancelled"
    assert ran.result.error == Cancelled("timed out after 1 s")
    assert ran.streamed == "First part, ok. "  # the window being judged never came out
    assert "slow" not in ran.kept()
    # The step check never approved the answer: the cancelled result keeps none of it.
    assert ran.result.text == ""


def test_a_cancel_while_the_judge_decides_releases_nothing_it_was_judging() -> None:
    check_cancelled_while_judging(run_sync(mod(), [Say(SLOW)], timeout=1))


@pytest.mark.anyio
async def test_a_cancel_while_the_judge_decides_on_the_async_simulator() -> None:
    check_cancelled_while_judging(await run_async(mod(), [Say(SLOW)], timeout=1))


def test_a_long_chunk_is_judged_in_windows_of_bounded_size() -> None:
    text = "word " * 40  # one 200-character delta
    ran = run_sync(mod(window=32), [Say(text)])
    windows = stream_calls(ran)
    assert all(len(w) <= 32 for w, _ in windows) and len(windows) >= 7
    assert ran.streamed == text


def test_reasoning_is_judged_too() -> None:
    p = mod()
    seen: list[str] = []
    judge = Judge(seen)
    sim = Simulator(ScriptedModel([Say("Fine.", reasoning=["I think ", "nasty thoughts"])]),
                    models={"judge": ScriptedModel(judge)})
    run = sim.run(Agent.create("m", output_processors=[p]), "hi")
    assert run.result.status == "tripped"
    assert not any(isinstance(c, ReasoningDelta) and BAD in c.text for c in run.chunks)
    assert all(BAD not in (s.reasoning or "") for s in run.result.steps)


def test_context_window_gives_the_judge_the_text_before() -> None:
    ran = run_sync(mod(context_window=10), [Say(CLEAN_TEXT)])
    assert ran.result.status == "finished"
    windows = stream_calls(ran)
    assert ran.judge.raw[0] == f"<content>\n{windows[0][0]}\n</content>"
    before = (windows[0][0] + windows[1][0])[-10:]
    assert ran.judge.raw[2] == (
        f"<context>\n{before}\n</context>\n<content>\n{windows[2][0]}\n</content>"
    )


def test_short_answers_cost_one_judge_call() -> None:
    # One window holds the whole answer: the step check does not judge it again.
    ran = run_sync(mod(), [Say("Short.")])
    assert ran.result.status == "finished" and ran.result.text == "Short."
    assert [w for w, _ in ran.judge.calls] == ["Short."]


def test_moderate_stream_false_keeps_to_the_step_check() -> None:
    ran = run_sync(mod(moderate_stream=False), [Say(CLEAN_TEXT)])
    assert [w for w, _ in ran.judge.calls] == ["".join(CLEAN_TEXT)]
    assert ran.judge.calls[0][1] == "".join(CLEAN_TEXT)  # the consumer saw it first


def test_bad_window_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="stream_window"):
        ModerationProcessor("judge", stream_window=0)
    with pytest.raises(ValueError, match="context_window"):
        ModerationProcessor("judge", context_window=-1)
    for bad in (0, 65, "4", 2.0, True):
        with pytest.raises(ValueError, match="max_in_flight"):
            ModerationProcessor("judge", max_in_flight=bad)  # type: ignore[arg-type]


# --- pipelining: windows judged while the model streams --------------------------------

SLOW_WORDS = [f"word{i:02d} " for i in range(12)]  # 7 characters each: 2 per window


def timed(p: ModerationProcessor, words: list[str], *, chunk_latency: float = 0.0
          ) -> tuple[Ran, list[float]]:
    """A sync simulator run and the virtual time at which each text delta came out."""
    seen, judge, _, judges = _scripts([], None)
    judge.latency, judge.all_slow = 1.0, True
    model = ScriptedModel([Say(words, chunk_latency=chunk_latency)])
    sim = Simulator(model, models=judges, start=0.0)
    chunks: list[Chunk] = []
    times: list[float] = []
    with sim.stream(Agent.create("m", output_processors=[p]), "hi") as s:
        for c in s:
            _saw(c, chunks, seen)
            if isinstance(c, TextDelta):
                times.append(sim.clock.now)
    return Ran(s.result, chunks, judge, model), times


def test_the_judge_gets_the_next_window_before_the_last_one_is_released() -> None:
    ran, _ = timed(mod(), SLOW_WORDS, chunk_latency=0.2)
    assert ran.result.status == "finished" and ran.streamed == "".join(SLOW_WORDS)
    windows = stream_calls(ran)
    before = ["".join(w for w, _ in windows[:i]) for i in range(len(windows))]
    # While a window was with the judge, the next one was sent: the consumer had not
    # got all the windows before it (and never more than those).
    assert any(seen != b for (_, seen), b in zip(windows, before, strict=True))
    assert all(b.startswith(seen) for (_, seen), b in zip(windows, before, strict=True))


def test_text_comes_out_while_the_model_still_streams() -> None:
    _, times = timed(mod(), SLOW_WORDS, chunk_latency=0.5)
    model_end = 0.5 * (len(SLOW_WORDS) + 2)  # each event after the first, and the finish
    assert times[0] < model_end / 2  # the first window long before the model ended


@pytest.mark.parametrize(("in_flight", "judged_by"), [(1, 6.0), (2, 3.0), (3, 2.0), (6, 1.0)])
def test_at_most_max_in_flight_windows_are_with_the_judge(
    in_flight: int, judged_by: float
) -> None:
    # All 6 windows come at once, each judged for one virtual second: with k at once,
    # the last is judged after 6/k seconds (then the step check judges the whole answer).
    ran, times = timed(mod(max_in_flight=in_flight), SLOW_WORDS)
    assert ran.result.status == "finished" and len(stream_calls(ran)) == 6
    assert ran.streamed == "".join(SLOW_WORDS)
    assert times[-1] == pytest.approx(judged_by + 1.0)


PIPELINED_FLAG = ["Fine start, ok. ", "more fine words ", "then nasty ones ", "never seen. ",
                  "nor this. "]


def check_stopped_at_the_flag(ran: Ran) -> None:
    assert ran.result.status == "tripped"
    tw = ran.result.tripwire
    assert tw is not None and tw.metadata is not None and tw.metadata["categories"] == ["hate"]
    # Exactly the windows before the flagged one came out, in order; nothing after it,
    # though later windows were with the judge already.
    assert ran.streamed == "Fine start, ok. more fine words "
    assert BAD not in ran.kept() and "never" not in ran.kept()


def test_a_flagged_window_stops_the_release_there() -> None:
    ran, _ = timed(mod(window=16), PIPELINED_FLAG, chunk_latency=0.1)
    check_stopped_at_the_flag(ran)
    assert any("never" in w for w, _ in ran.judge.calls)  # sent before the flag came back


@pytest.mark.anyio
async def test_a_flagged_window_stops_the_release_there_on_the_async_simulator() -> None:
    check_stopped_at_the_flag(await run_async(mod(window=16), [Say(PIPELINED_FLAG)]))



@pytest.mark.anyio
async def test_leaving_the_stream_while_windows_are_with_the_judge_ends_it_cleanly() -> None:
    words = ["fast ok ", "fine ok ", "slow one ", "slow two ", "slow six ", "slow ten "]
    _, _, model, judges = _scripts([Say(words, chunk_latency=0.2)], None)
    sim = AsyncSimulator(model, models=judges)
    agent = Agent.create("m", output_processors=[mod()])
    got: list[Chunk] = []
    async with sim.stream(agent, "hi") as s:
        async for c in s:
            got.append(c)
            if isinstance(c, TextDelta):
                break  # the first window passed; the next one's judge call is started
    assert s.result.status == "cancelled"
    assert "".join(c.text for c in got if isinstance(c, TextDelta)) == "fast ok fine ok "
    assert "slow" not in "".join(m.text for m in s.result.messages.messages)
