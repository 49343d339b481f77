"""Budget: a run bounded in tool calls (all, per tool), model calls, tokens and cost."""

from __future__ import annotations

from collections.abc import Generator
from decimal import Decimal

import anyio
import pytest

from effects import Abort, Continue
from interpreters.testing import AsyncSimulator, Say, ScriptedModel, Simulator, call
from pipeline.agent import Agent
from pipeline.processor import (
    AskModel,
    OutputStepArgs,
    OutputStepResult,
    Processor,
    processor,
)
from pipeline.processors import Budget, ProcessorConfigError
from pipeline.values.cost import Cost, PriceQuery, Pricer
from pipeline.values.messages import Message, TextPart
from pipeline.values.model import ModelRequest
from pipeline.values.result import RunResult

ran: list[str] = []


def look(q: str) -> str:
    """Look something up."""
    ran.append(q)
    return f"found {q}"


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ran.clear()


def _looping(n: int = 6) -> ScriptedModel:
    """A model that calls a tool every step, `n` times, then answers."""
    return ScriptedModel([Say(calls=[call("look", q=f"q{i}")]) for i in range(n)] + [Say("ok")])


def _looping_script(n: int = 6) -> list[Say]:
    return [Say(calls=[call("look", q=f"q{i}")]) for i in range(n)] + [Say("ok")]


def _agent(b: Budget) -> Agent:
    return Agent.create("sim/model", tools=[look], input_processors=[b], max_steps=20)


def test_a_tool_call_budget_trips_the_run_at_the_bound() -> None:
    r = Simulator(_looping()).run(_agent(Budget(max_tool_calls=2)), "go").result
    assert r.status == "tripped" and ran == ["q0", "q1"]
    assert r.tripwire is not None and r.tripwire.metadata == {
        "budget": "tool_calls", "tool": "look"
    }


def test_finish_answers_the_call_over_the_bound_and_the_last_step_has_no_tools() -> None:
    model = _looping()
    r = Simulator(model).run(
        _agent(Budget(max_calls_per_tool={"look": 1}, on_limit="finish")), "go"
    ).result
    assert ran == ["q0"]
    # the second call was answered with an error; the next request allowed no tool
    assert model.requests[2].tool_choice == "none"
    second = [p for m in r.messages.messages for p in m.tool_results()][1]
    assert second.is_error and "budget" in str(second.result)


def test_a_model_call_budget_with_finish_gives_the_last_call_without_tools() -> None:
    model = _looping()
    r = Simulator(model).run(_agent(Budget(max_model_calls=3, on_limit="finish")), "go").result
    assert len(model.requests) == 3
    assert [q.tool_choice for q in model.requests] == ["auto", "auto", "none"]
    assert r.status in ("finished", "tripped")


def test_a_model_call_budget_trips_before_the_call_over_it() -> None:
    model = _looping()
    r = Simulator(model).run(_agent(Budget(max_model_calls=2)), "go").result
    assert r.status == "tripped" and len(model.requests) == 2


def test_a_token_budget_counts_the_steps_usage() -> None:
    model = _looping()
    r = Simulator(model).run(_agent(Budget(max_tokens=20)), "go").result
    # each scripted call uses 13 tokens: the second one passes the bound
    assert r.status == "tripped" and len(model.requests) == 2
    assert r.tripwire is not None and r.tripwire.metadata == {"budget": "tokens"}


def test_a_cost_budget_uses_the_pricers_figures_and_fails_closed_without() -> None:
    def price(q: PriceQuery) -> Cost:
        return Cost(Decimal("0.25"))

    model = _looping()
    r = Simulator(model, price=price).run(_agent(Budget(max_cost=0.5)), "go").result
    assert r.status == "tripped" and len(model.requests) == 2
    unpriced = Simulator(_looping()).run(_agent(Budget(max_cost=0.5)), "go").result
    assert unpriced.status == "tripped" and unpriced.tripwire is not None
    assert "unknown" in unpriced.tripwire.reason


@pytest.mark.parametrize("kw", [
    {"max_tool_calls": -1}, {"max_tool_calls": True}, {"max_model_calls": 0},
    {"max_tokens": "many"}, {"max_cost": 0}, {"max_cost": True},
    {"max_calls_per_tool": {"look": -2}}, {"max_calls_per_tool": {"": 1}},
    {"max_calls_per_tool": ["look"]}, {"max_tool_calls": 1, "on_limit": "stop"}, {},
])
def test_options_are_checked_at_construction(kw: dict[str, object]) -> None:
    with pytest.raises(ProcessorConfigError):
        Budget(**kw)  # type: ignore[arg-type]


# --- every call the run pays for: retried, discarded, and the hooks' judges ------------


def _both(agent: Agent, script: list[Say], *, judge: int = 0,
          price: Pricer | None = None) -> list[tuple[ScriptedModel, ScriptedModel, RunResult]]:
    """The run on the sync simulator and on the async one: (model, judge, result) each."""

    def models() -> tuple[ScriptedModel, ScriptedModel]:
        return ScriptedModel(list(script)), ScriptedModel([Say("fine")] * judge)

    model, judge_model = models()
    out = [(model, judge_model,
            Simulator(model, models={"judge": judge_model}, price=price).run(
                agent, "go").result)]
    a_model, a_judge = models()

    async def go() -> RunResult:
        sim = AsyncSimulator(a_model, models={"judge": a_judge}, price=price)
        return (await sim.run(agent, "go")).result

    out.append((a_model, a_judge, anyio.run(go)))
    return out


def _judged_steps(args: OutputStepArgs[None]) -> Generator[object, object,
                                                           OutputStepResult[None]]:
    """An output guard that asks a judge about every step."""
    yield AskModel(ModelRequest(model="judge", system=(), messages=(
        Message(id="j", role="user", parts=(TextPart(args.text or "calls"),)),)))
    return Continue()


def _retrying(args: OutputStepArgs[None]) -> OutputStepResult[None]:
    return Abort("answer again", retry=True)


def _guarded(b: Budget, guard: Processor | object, retries: int = 0) -> Agent:
    return Agent.create("sim/model", tools=[look], input_processors=[b],
                        output_processors=[guard],  # type: ignore[list-item]
                        max_steps=20, max_processor_retries=retries)


def test_a_cost_budget_counts_the_judges_calls() -> None:
    def price(q: PriceQuery) -> Cost:
        return Cost(Decimal("0.25"))

    judge = processor("judge-steps", process_output_step=_judged_steps)
    for model, judge_model, r in _both(_guarded(Budget(max_cost=1.0), judge),
                                       _looping_script(), judge=10, price=price):
        # each step: the agent's call and the judge's, 0.25 each: two steps spend 1.00
        assert r.status == "tripped" and len(model.requests) == 2
        assert len(judge_model.requests) == 2
        assert r.cost is not None and r.cost.total == Decimal("1.00")
        assert r.tripwire is not None and r.tripwire.metadata == {"budget": "cost"}


def test_a_model_call_budget_counts_the_judges_calls() -> None:
    judge = processor("judge-steps", process_output_step=_judged_steps)
    for model, judge_model, r in _both(_guarded(Budget(max_model_calls=3), judge),
                                       _looping_script(), judge=10):
        assert r.status == "tripped"
        assert len(model.requests) + len(judge_model.requests) == 4  # 3, then one step's judge
        assert len(model.requests) == 2


def test_a_model_call_budget_counts_the_calls_a_retry_discarded() -> None:
    guard = processor("again", process_output_step=_retrying)
    for model, _, r in _both(_guarded(Budget(max_model_calls=2), guard, retries=6),
                             [Say("bad answer")] * 8):
        assert len(model.requests) == 2
        assert r.status == "tripped" and r.tripwire is not None
        assert r.tripwire.metadata == {"budget": "model_calls"}


def test_a_token_budget_counts_the_tokens_of_discarded_calls() -> None:
    guard = processor("again", process_output_step=_retrying)
    for model, _, r in _both(_guarded(Budget(max_tokens=20), guard, retries=6),
                             [Say("bad answer")] * 8):
        # each call uses 12 tokens: the second passes the bound, the third is not made
        assert len(model.requests) == 2
        assert r.usage.input_tokens + r.usage.output_tokens == 24
        assert r.tripwire is not None and r.tripwire.metadata == {"budget": "tokens"}
