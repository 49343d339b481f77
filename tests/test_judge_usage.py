"""Usage and cost that add up: the judge calls processors make (`AskModel`) are counted,
apart from the agent's own calls, and a call a processor stopped is not left out."""

from __future__ import annotations

import logging
from collections.abc import Generator
from decimal import Decimal
from pathlib import Path

import msgspec
import pytest

from effects import Continue
from interpreters.durable.dbos.runs import DurableRuns
from interpreters.observers.logs import LogObserver
from interpreters.record.journal import Recorder
from interpreters.testing import AsyncSimulator, Say, ScriptedModel, Simulator, call
from pipeline import Agent, Processor, abort
from pipeline.processor import (
    AskModel,
    FlushArgs,
    FlushResult,
    InputArgs,
    InputResult,
    ModelAnswer,
    StreamArgs,
    StreamResult,
)
from pipeline.processors.guards.moderation import ModerationProcessor
from pipeline.values import Usage
from pipeline.values.chunks import TextDelta
from pipeline.values.cost import Cost, PriceQuery
from pipeline.values.messages import user
from pipeline.values.model import ModelRequest
from pipeline.values.result import JudgeCall, RunResult

MAIN, JUDGE = Usage(10, 1), Usage(1000, 1000)


def flat(q: PriceQuery) -> Cost | None:
    """One cent per input token, two per output token; nothing known of `unknown/` ids."""
    if q.model.startswith("unknown"):
        return None
    i = Decimal(q.usage.input_tokens) / 100
    o = Decimal(q.usage.output_tokens) * 2 / 100
    return Cost(i + o, i, o)


class AskJudge(Processor):
    """Asks a judge model once on input (any `AskModel`, not a built-in guard)."""

    id = "ask-judge"

    def __init__(self, model: str = "judge") -> None:
        self.model = model

    def process_input(
        self, args: InputArgs[None]
    ) -> Generator[object, object, InputResult[None]]:
        answer = yield AskModel(ModelRequest(
            model=self.model, system=(), messages=(user("judge this", id="j1"),)))
        assert isinstance(answer, ModelAnswer) and answer.text == "ok"
        return Continue()


def _models(judge_usage: Usage = JUDGE) -> tuple[ScriptedModel, dict[str, ScriptedModel]]:
    main = ScriptedModel([Say("an answer", usage=MAIN)])
    return main, {"judge": ScriptedModel([Say("ok", usage=judge_usage)])}


def _check_counted(r: RunResult) -> None:
    assert r.status == "finished", r.error
    assert r.usage == MAIN  # the agent's own calls, as the steps and the finish chunk say
    [j] = r.judges
    assert j == JudgeCall(processor_id="ask-judge", hook="process_input", model="judge",
                          response_model=None, usage=JUDGE, cost=flat(
                              PriceQuery("judge", None, JUDGE, 0)))
    assert r.judge_usage == JUDGE
    assert r.total_usage == MAIN + JUDGE
    main_cost = flat(PriceQuery("m", None, MAIN, 0))
    assert main_cost is not None and j.cost is not None
    assert r.cost == main_cost + j.cost
    assert r.cost.total == Decimal("30.12")


def test_a_judge_call_is_counted_apart_and_in_the_totals_and_cost() -> None:
    main, models = _models()
    agent = Agent.create("m", input_processors=[AskJudge()])
    _check_counted(Simulator(main, models=models, price=flat).run(agent, "hi").result)


@pytest.mark.anyio
async def test_a_judge_call_is_counted_on_the_async_interpreter(anyio_backend: str) -> None:
    main, models = _models()
    agent = Agent.create("m", input_processors=[AskJudge()])
    _check_counted((await AsyncSimulator(main, models=models, price=flat).run(agent, "hi"))
                   .result)


def test_a_judge_model_the_pricer_does_not_know_makes_the_cost_unknown() -> None:
    main = ScriptedModel([Say("an answer", usage=MAIN)])
    models = {"unknown/judge": ScriptedModel([Say("ok", usage=JUDGE)])}
    agent = Agent.create("m", input_processors=[AskJudge("unknown/judge")])
    r = Simulator(main, models=models, price=flat).run(agent, "hi").result
    assert r.judges[0].cost is None and r.judges[0].usage == JUDGE
    assert r.cost is None  # never a sum that leaves a call out
    assert r.total_usage == MAIN + JUDGE


def test_the_built_in_moderation_judge_is_counted() -> None:
    cats = ("hate", "violence")
    clean = msgspec.json.encode(
        {"category_scores": {c: 0.0 for c in cats}, "reason": "r"}).decode()
    main = ScriptedModel([Say("an answer", usage=MAIN)])
    judge = ScriptedModel([Say(clean, usage=JUDGE), Say(clean, usage=JUDGE)])
    agent = Agent.create(
        "m", input_processors=[ModerationProcessor("judge", categories=cats, id="mod-in")],
        output_processors=[ModerationProcessor(
            "judge", categories=cats, moderate_stream=False, id="mod-out")])
    r = Simulator(main, models={"judge": judge}, price=flat).run(agent, "hi").result
    assert r.status == "finished", r.error
    assert [(j.processor_id, j.hook) for j in r.judges] == [
        ("mod-in", "process_input"), ("mod-out", "process_output_step")]
    assert r.judge_usage == JUDGE + JUDGE
    assert r.total_usage == MAIN + JUDGE + JUDGE


def test_a_run_without_judges_has_none() -> None:
    r = Simulator(ScriptedModel([Say("hi", usage=MAIN)]), price=flat).run(
        Agent.create("m"), "hi").result
    assert r.judges == () and r.judge_usage == Usage() and r.total_usage == MAIN


# --- a run a stream processor stopped -----------------------------------------------------


class StopAtFlush(Processor):
    """Trips once the model's response has ended (a guard that judges the whole text)."""

    id = "stop-at-flush"

    def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
        return Continue()

    def flush_output_stream(self, args: FlushArgs[None]) -> FlushResult[None]:
        abort("not this one")


class StopOnWord(Processor):
    id = "stop-on-word"

    def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
        if isinstance(args.part, TextDelta) and "bad" in args.part.text:
            abort("bad word")
        return Continue()


def test_a_run_tripped_after_the_model_finished_counts_the_call() -> None:
    model = ScriptedModel([Say(["fine ", "text"], usage=Usage(50, 7))])
    r = Simulator(model, price=flat).run(
        Agent.create("m", output_processors=[StopAtFlush()]), "go").result
    assert r.status == "tripped"
    assert r.usage == Usage(50, 7)
    assert r.cost == flat(PriceQuery("m", None, Usage(50, 7), 0))
    assert r.unmetered_calls == 0


def test_a_run_tripped_mid_stream_says_its_last_call_was_not_metered() -> None:
    model = ScriptedModel([
        Say(calls=[call("echo", x="a")], usage=MAIN),
        Say(["ok ", "bad ", "rest"], usage=Usage(50, 7)),
    ])

    def echo(x: str) -> str:
        """Echo."""
        return x

    r = Simulator(model, price=flat).run(
        Agent.create("m", tools=[echo], output_processors=[StopOnWord()]), "go").result
    assert r.status == "tripped"
    assert r.usage == MAIN  # the provider never reported the stopped call's usage
    assert r.unmetered_calls == 1
    assert r.cost is None  # not the first call's cost, as if the second were free


@pytest.mark.anyio
async def test_a_stopped_call_is_counted_on_the_async_interpreter(anyio_backend: str) -> None:
    model = ScriptedModel([Say(["fine ", "text"], usage=Usage(50, 7))])
    r = (await AsyncSimulator(model, price=flat).run(
        Agent.create("m", output_processors=[StopAtFlush()]), "go")).result
    assert r.status == "tripped" and r.usage == Usage(50, 7) and r.unmetered_calls == 0
    model = ScriptedModel([Say(["ok ", "bad ", "rest"], usage=Usage(50, 7))])
    r = (await AsyncSimulator(model, price=flat).run(
        Agent.create("m", output_processors=[StopOnWord()]), "go")).result
    assert r.status == "tripped" and r.usage == Usage() and r.unmetered_calls == 1
    assert r.cost is None


def test_a_durable_run_counts_its_judge_calls(tmp_path: Path) -> None:
    main, models = _models()

    def resolve(model_id: str) -> ScriptedModel:
        return models.get(model_id, main)

    agent = Agent.create("m", input_processors=[AskJudge()])
    with DurableRuns({"a": agent}, resolve=resolve, price=flat, observers=(),
                     database_url=f"sqlite:///{tmp_path / 'runs.sqlite'}") as runs:
        _check_counted(runs.run("a", "hi", run_id="j", wait=60))


def test_the_debug_log_counts_the_judges_tokens(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="pipeline")
    main, models = _models()
    agent = Agent.create("m", input_processors=[AskJudge()])
    Simulator(main, models=models, observers=[LogObserver()]).run(agent, "hi")
    lines = [r.getMessage() for r in caplog.records if r.name == "pipeline"]
    assert any("1010 in / 1001 out tokens (1 judge call(s))" in m for m in lines), lines


def test_a_run_with_judges_recorded_with_a_pricer_replays_the_same() -> None:
    main, models = _models()
    agent = Agent.create("m", input_processors=[AskJudge()])
    rec = Recorder()
    run = Simulator(main, models=models, price=flat, observers=[rec]).run(agent, "hi")
    _check_counted(run.result)
    journal = rec.last()
    priced = Simulator.replay(journal, agent, price=flat)
    assert priced.divergence is None and priced.result == run.result
    # Without the pricer the recorded costs stand in for it, the judges' included.
    unpriced = Simulator.replay(journal, agent)
    assert unpriced.result.messages == run.result.messages
    assert unpriced.result.judges[0].usage == JUDGE
    assert unpriced.result.cost == run.result.cost and run.result.cost is not None
