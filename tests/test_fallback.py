"""Fallback models on the simulators: the chain, its policy, what the caller and the
result get, the circuit breaker, what every attempt costs, traces, journals and the
durable fingerprint."""

from __future__ import annotations

from decimal import Decimal

import anyio
import pytest

from effects import Continue, Out, Perform, Replace, Retry
from interpreters.core.breaker import PROCESS_BREAKER, CircuitBreaker
from interpreters.durable.fingerprint import definition
from interpreters.record.journal import Recorder
from interpreters.record.replay import replay_sync
from interpreters.sync import SyncInterpreter
from interpreters.testing import (
    AsyncSimulator,
    Fail,
    Say,
    ScriptedModel,
    Simulator,
    numbered_run_ids,
)
from pipeline import (
    Agent,
    ApiErrorArgs,
    ApiErrorResult,
    FlushArgs,
    FlushResult,
    InputStepArgs,
    InputStepResult,
    StatefulProcessor,
    StepChange,
    StreamArgs,
    StreamResult,
)
from pipeline.values.chunks import DataChunk, StepReset, TextDelta
from pipeline.values.cost import Cost, PriceQuery
from pipeline.values.fallback import (
    CircuitCheck,
    CircuitOutcome,
    CircuitReport,
    CircuitStates,
    FailoverPolicy,
    Fallback,
    FallbackModel,
    failure_kind,
)
from pipeline.values.model import ApiError, ModelSettings
from pipeline.values.retry import RetryPolicy
from tests.test_otel import Otel

NO_RETRY = RetryPolicy(max_retries=0)


def sim(main: list[Say | Fail], backup: list[Say | Fail], **kw: object) -> Simulator:
    return Simulator(ScriptedModel(main), models={"b/backup": ScriptedModel(backup)},
                     run_ids=numbered_run_ids(), **kw)  # type: ignore[arg-type]


def chain(**kw: object) -> Agent:
    return Agent.create(("a/main", "b/backup"), retry_policy=NO_RETRY, **kw)  # type: ignore[arg-type]


# --- the chain as given -----------------------------------------------------------------


def test_a_tuple_of_model_ids_is_a_fallback_chain_and_one_id_is_none() -> None:
    a = Agent.create(("a/main", "b/backup"))
    assert a.model == "a/main"
    assert a.fallback == Fallback.of("a/main", "b/backup")
    assert Agent.create(["a/main"]).fallback is None
    assert Agent.create("a/main").fallback is None


@pytest.mark.parametrize("bad, error", [
    ((), TypeError), (("a/x", 3), TypeError), (("a/x", "a/x"), ValueError),
    (Fallback(models=()), ValueError),
])
def test_a_chain_that_cannot_run_is_refused_at_construction(bad: object, error: type) -> None:
    with pytest.raises(error):
        Agent.create(bad)  # type: ignore[arg-type]


def test_a_policy_naming_an_unknown_failure_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown failure kinds"):
        FailoverPolicy(on=("server", "meteor"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="CircuitBreaker"):
        CircuitBreaker(failures=0)


@pytest.mark.parametrize("error, kind", [
    (ApiError(status=None, message="reset"), "connection"),
    (ApiError(status=None, message="t", error_type="timeout"), "timeout"),
    (ApiError(status=200, message="t", error_type="read_timeout"), "timeout"),
    (ApiError(status=503, message="down"), "server"),
    (ApiError(status=529, message="x", error_type="overloaded_error"), "server"),
    (ApiError(status=429, message="slow down"), "rate-limit"),
    (ApiError(status=404, message="no", code="model_not_found"), "unavailable"),
    (ApiError(status=401, message="key"), "auth"),
    (ApiError(status=200, message="x", error_type="content_blocked", code="SAFETY"),
     "content-filter"),
    (ApiError(status=400, message="x", code="content_policy_violation"), "content-filter"),
    (ApiError(status=400, message="bad"), "invalid-request"),
    (ApiError(status=None, message="x", error_type="configuration"), "configuration"),
    (ApiError(status=None, message="x", error_type="limit_exceeded"), "other"),
])
def test_failures_are_sorted_by_kind(error: ApiError, kind: str) -> None:
    assert failure_kind(error) == kind


def test_each_model_is_asked_with_its_own_settings() -> None:
    agent = Agent.create(
        Fallback.of("a/main", FallbackModel(model="b/backup",
                                            model_settings=ModelSettings(max_tokens=7),
                                            provider_options={"b": {"x": 1}})),
        model_settings=ModelSettings(max_tokens=100), retry_policy=NO_RETRY,
    )
    main, backup = ScriptedModel([Fail(status=500)]), ScriptedModel([Say("ok")])
    run = Simulator(main, models={"b/backup": backup}).run(agent, "hi")
    assert run.result.text == "ok"
    assert main.requests[0].model_settings.max_tokens == 100
    assert backup.requests[0].model_settings.max_tokens == 7
    assert backup.requests[0].provider_options == {"b": {"x": 1}}


def test_a_step_that_switches_model_tries_it_first_then_the_chain() -> None:
    def to_other(args: InputStepArgs[None]) -> InputStepResult[None]:
        return Replace(StepChange(model="c/other"))

    other = ScriptedModel([Fail(status=503)])
    run = Simulator(ScriptedModel([Fail(status=500)]), models={"c/other": other,
                                               "b/backup": ScriptedModel([Say("ok")])}).run(
        chain(prepare_step=to_other), "hi")
    assert run.result.text == "ok"
    assert [a.model for a in run.result.steps[0].attempts] == ["c/other", "a/main"]


def test_a_step_may_drop_the_chain() -> None:
    def alone(args: InputStepArgs[None]) -> InputStepResult[None]:
        return Replace(StepChange(fallback=Fallback(models=())))

    run = sim([Fail(status=503)], [Say("never")]).run(chain(prepare_step=alone), "hi")
    assert run.result.status == "failed"


# --- the policy -------------------------------------------------------------------------


class Fix(StatefulProcessor[int]):
    id = "fix"

    def initial_state(self) -> int:
        return 0

    def process_api_error(self, args: ApiErrorArgs[int]) -> ApiErrorResult[int]:
        return Out(Retry(), args.state + 1)


def test_an_invalid_request_goes_to_the_error_processors_not_to_the_next_model() -> None:
    run = sim([Fail(status=400), Say("fixed")], [Say("never")]).run(
        chain(error_processors=[Fix()]), "hi")
    assert run.result.text == "fixed" and run.result.api_error_retry_count == 1
    assert run.result.steps[0].attempts == ()


def test_a_content_filter_block_fails_over_only_when_the_policy_says() -> None:
    blocked = Fail(status=400, error_type="content_blocked", message="SAFETY")
    run = sim([blocked], [Say("ok")]).run(chain(), "hi")
    assert run.result.status == "failed"
    agent = Agent.create(Fallback.of("a/main", "b/backup", on=("content-filter",)),
                         retry_policy=NO_RETRY)
    run = sim([blocked], [Say("ok")]).run(agent, "hi")
    assert run.result.text == "ok"
    assert run.result.steps[0].attempts[0].kind == "content-filter"


def test_a_rate_limit_is_retried_on_its_model_first() -> None:
    agent = Agent.create(("a/main", "b/backup"), retry_policy=RetryPolicy(max_retries=2))
    run = sim([Fail(status=429)] * 3, [Say("ok")]).run(agent, "hi")
    assert run.result.text == "ok"
    sleeps = [c for c in run.trace.commands if type(c).__name__ == "Sleep"]
    assert len(sleeps) == 2, "two retries on the model, then the next model"


def test_every_model_failing_fails_the_run_naming_each_attempt() -> None:
    run = sim([Fail(status=503)], [Fail(status=502)]).run(chain(), "hi")
    assert run.result.status == "failed"
    assert "after a/main: HTTP 503" in str(run.result.error)


# --- what the caller gets -----------------------------------------------------------------


class HoldAll(StatefulProcessor[tuple[str, ...]]):
    """Holds every text delta until the response ends; counts what it has seen."""

    id = "hold"

    def initial_state(self) -> tuple[str, ...]:
        return ()

    def process_output_stream(
        self, args: StreamArgs[tuple[str, ...]]
    ) -> StreamResult[tuple[str, ...]]:
        if isinstance(args.part, TextDelta):
            return Out(Replace(()), (*args.state, args.part.text))
        return Continue()

    def flush_output_stream(self, args: FlushArgs[tuple[str, ...]]) -> FlushResult[tuple[str, ...]]:
        seen = sum(1 for c in args.stream_parts if isinstance(c, TextDelta))
        return Out(Replace((TextDelta("t", "".join(args.state)),
                            DataChunk("data-seen", seen))), ())


def test_text_held_back_from_a_model_that_broke_is_dropped_with_it() -> None:
    broken = Say(["secret ", "half "], break_after=3)
    run = sim([broken], [Say(["whole ", "answer"])]).run(
        chain(output_processors=[HoldAll()]), "hi")
    assert run.result.status == "finished", run.result.error
    assert run.result.text == "whole answer"
    assert "secret" not in "".join(c.text for c in run.chunks if isinstance(c, TextDelta))
    # the stream processor saw the next model's deltas only (what it saw was rewound)
    [seen] = [c.data for c in run.chunks if isinstance(c, DataChunk)]
    assert seen == 2


def test_text_released_before_a_break_fails_the_run_without_after_output() -> None:
    run = sim([Say(["told ", "you"], break_after=3)], [Say("other")]).run(chain(), "hi")
    assert run.result.status == "failed"
    assert not [c for c in run.chunks if isinstance(c, StepReset)]


def test_after_output_resets_the_step_for_the_next_model() -> None:
    agent = Agent.create(Fallback.of("a/main", "b/backup", after_output=True),
                         retry_policy=NO_RETRY)
    run = sim([Say(["told ", "you"], break_after=3)], [Say("other")]).run(agent, "hi")
    assert run.result.text == "other"
    [reset] = [c for c in run.chunks if isinstance(c, StepReset)]
    assert (reset.model, reset.next_model) == ("a/main", "b/backup")
    after = run.chunks[run.chunks.index(reset):]
    assert "".join(c.text for c in after if isinstance(c, TextDelta)) == "other"
    assert run.result.steps[0].attempts[0].released


# --- what it costs ----------------------------------------------------------------------------


def test_every_attempt_is_counted_and_an_unmetered_one_makes_the_cost_unknown() -> None:
    def price(q: PriceQuery) -> Cost:
        return Cost(Decimal(1))

    agent = chain()
    ok = sim([Fail(status=503)], [Say("ok")], price=price).run(agent, "hi").result
    assert ok.cost == Cost(Decimal(1)), "a call refused before it streamed costs nothing"
    broke = sim([Say(["a", "b"], break_after=1)], [Say("ok")], price=price).run(agent, "hi")
    assert broke.result.unmetered_calls == 1 and broke.result.cost is None


def test_each_attempt_has_its_own_span_naming_its_provider_and_model() -> None:
    otel = Otel()
    agent = Agent.create(("openai/gpt-4.1", "anthropic/claude-sonnet-4-5"),
                         retry_policy=NO_RETRY)
    Simulator(ScriptedModel([Fail(status=503)]),
              models={"anthropic/claude-sonnet-4-5": ScriptedModel([Say("ok")])},
              observers=[otel.observer]).run(agent, "hi")
    chats = otel.named("chat")
    assert [(s.attributes or {}).get("gen_ai.provider.name") for s in chats] == [
        "openai", "anthropic"]
    assert [(s.attributes or {}).get("gen_ai.request.model") for s in chats] == [
        "gpt-4.1", "claude-sonnet-4-5"]


# --- the circuit breaker -------------------------------------------------------------------------


def test_the_breaker_opens_after_its_failures_and_half_opens_after_its_cooldown() -> None:
    now = [0.0]
    b = CircuitBreaker(failures=2, cooldown=10.0, clock=lambda: now[0])
    report = CircuitReport((CircuitOutcome("m", "server"),))
    b.report(report)
    assert b.check(CircuitCheck(("m",))) == CircuitStates((), ("m",))
    b.report(report)
    assert b.check(CircuitCheck(("m", "n"))) == CircuitStates(("m",), ("m",))
    now[0] = 10.0
    assert b.circuit("m").state == "half-open"
    assert b.check(CircuitCheck(("m",))).open == ()
    b.report(report)  # the trial failed: open again
    assert b.circuit("m").state == "open"
    b.report(CircuitReport((CircuitOutcome("m"),)))
    assert b.circuit("m").state == "closed"
    b.report(CircuitReport((CircuitOutcome("m", "invalid-request"),)))
    assert b.circuit("m").failures == 0, "a failure it does not count"


def test_interpreters_share_the_process_breaker_unless_given_one() -> None:
    model = ScriptedModel([])
    assert SyncInterpreter(model).breaker is PROCESS_BREAKER
    assert Simulator(model).breaker is not PROCESS_BREAKER


def test_a_skipped_model_is_in_the_trace_and_a_replay_takes_the_same_path() -> None:
    recorder = Recorder()
    s = sim([Fail(status=503)], [Say("one"), Say("two")], observers=[recorder])
    s.breaker.failures = 1
    first = s.run(chain(), "hi")
    second = s.run(chain(), "hi")
    assert second.result.text == "two"
    assert [a.kind for a in second.result.steps[0].attempts] == ["circuit-open"]
    [check] = [c for c in second.trace.commands
               if isinstance(c, Perform) and isinstance(c.request, CircuitCheck)]
    assert check.request == CircuitCheck(("a/main", "b/backup")), "asked, in the trace"
    replayed = replay_sync(recorder.journal("run2"), chain())
    assert replayed.identical, replayed.divergence
    assert replayed.result == second.result
    assert first.result.steps[0].attempts[0].kind == "server"


def test_the_async_simulator_fails_over_as_the_sync_one() -> None:
    agent = chain(output_processors=[HoldAll()])
    script: tuple[list[Say | Fail], list[Say | Fail]] = (
        [Say(["x ", "y"], break_after=2)], [Say(["ok"])])

    async def main() -> object:
        return (await AsyncSimulator(ScriptedModel(script[0]), models={
            "b/backup": ScriptedModel(script[1])}, run_ids=numbered_run_ids()).run(
                agent, "hi")).result

    for backend in ("asyncio", "trio"):
        assert anyio.run(main, backend=backend) == sim(*script).run(agent, "hi").result


# --- durable runs ---------------------------------------------------------------------------------


def test_the_durable_fingerprint_names_the_chain_and_keeps_older_digests() -> None:
    plain = definition(Agent.create("a/main"))
    assert plain.model == "a/main"
    chained = definition(chain())
    assert "a/main" in chained.model and "b/backup" in chained.model
