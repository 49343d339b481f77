"""process_api_error and transient failures: who sees which error, and every bound."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from effects import Abort, Continue, Out, Retry, Sleep
from interpreters.sim.simulator import Scripted
from interpreters.testing import Fail, Say, call
from pipeline.processor import (
    ApiErrorArgs,
    ApiErrorResult,
    Processor,
    StatefulProcessor,
    processor,
)
from pipeline.tools import tool
from pipeline.values.result import ApiFailed
from pipeline.values.retry import RetryPolicy
from tests.helpers import conversation, make_agent, simulate

REJECT = Fail(status=400, message="context too long", error_type="invalid_request_error")


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return f"found {query}"


class Handler(Processor):
    """Records every error it is offered and answers with a fixed effect."""

    def __init__(self, id: str, answer: ApiErrorResult[None], log: list[str]) -> None:
        self.id = id
        self.answer = answer
        self.log = log
        self.args: list[ApiErrorArgs[None]] = []

    def process_api_error(self, args: ApiErrorArgs[None]) -> ApiErrorResult[None]:
        self.log.append(self.id)
        self.args.append(args)
        return self.answer


def _sleeps(commands: Sequence[object]) -> list[float]:
    return [c.seconds for c in commands if isinstance(c, Sleep)]


def test_an_error_processor_that_always_retries_is_bounded_by_default_at_three() -> None:
    log: list[str] = []
    h = Handler("always", Retry(), log)
    ran = simulate(make_agent(error_processors=[h]), [REJECT] * 10)
    r = ran.result
    assert r.status == "failed"
    assert len(ran.requests) == 4  # the first call and three retries
    assert log == ["always"] * 3
    assert r.api_error_retry_count == 3
    assert [a.retry_count for a in h.args] == [0, 1, 2]
    assert isinstance(r.error, ApiFailed)
    assert (r.error.error.status, r.error.error.message) == (400, "context too long")
    assert ran.types[-1] == "error"


def test_the_api_error_retry_bound_is_configurable() -> None:
    log: list[str] = []
    ran = simulate(
        make_agent(error_processors=[Handler("h", Retry(), log)], max_api_error_retries=1),
        [REJECT] * 10,
    )
    assert len(ran.requests) == 2
    assert ran.result.api_error_retry_count == 1
    assert ran.result.status == "failed"

    ran = simulate(
        make_agent(error_processors=[Handler("h", Retry(), log)], max_api_error_retries=0),
        [REJECT, Say("never")],
    )
    assert len(ran.requests) == 1
    assert ran.result.status == "failed"


def test_the_api_error_bound_is_separate_from_the_processor_retry_bound() -> None:
    log: list[str] = []
    agent = make_agent(
        error_processors=[Handler("h", Retry(), log)],
        max_processor_retries=0,
        max_api_error_retries=2,
    )
    ran = simulate(agent, [REJECT, REJECT, Say("ok")])
    assert ran.result.status == "finished"
    assert (ran.result.api_error_retry_count, ran.result.retry_count) == (2, 0)


def test_retry_with_changed_messages_sends_them_on_the_next_call() -> None:
    def trim(args: ApiErrorArgs[None]) -> ApiErrorResult[None]:
        ml = args.message_list
        return Retry(ml.remove_by_ids([m.id for m in ml.messages[:-1]]))

    agent = make_agent(error_processors=[processor("trim", process_api_error=trim)])
    ran = simulate(agent, [REJECT, Say("fits")], conversation("a", "b", "c"))
    assert [m.id for m in ran.requests[0].messages] == ["m0", "m1", "m2"]
    assert [m.id for m in ran.requests[1].messages] == ["m2"]
    assert ran.result.status == "finished"
    assert ran.result.text == "fits"
    assert [m.id for m in ran.messages] == ["m2", "run1-msg1"]


def test_the_first_retry_wins_and_later_error_processors_are_not_asked() -> None:
    log: list[str] = []
    agent = make_agent(
        error_processors=[
            Handler("pass", Continue(), log),
            Handler("fix", Retry(), log),
            Handler("never", Retry(), log),
        ]
    )
    ran = simulate(agent, [REJECT, Say("ok")])
    assert log == ["pass", "fix"]
    assert ran.result.status == "finished"
    assert ran.result.api_error_retry_count == 1


def test_unhandled_rejection_fails_the_run_after_every_processor_was_asked() -> None:
    log: list[str] = []
    agent = make_agent(
        error_processors=[Handler("a", Continue(), log), Handler("b", Continue(), log)]
    )
    ran = simulate(agent, [REJECT, Say("never")])
    assert log == ["a", "b"]
    assert len(ran.requests) == 1
    err = ran.result.error
    assert isinstance(err, ApiFailed)
    assert (err.step_number, err.attempts) == (0, 1)


def test_a_rejection_without_error_processors_fails_the_run() -> None:
    ran = simulate(make_agent(), [REJECT, Say("never")])
    assert isinstance(ran.result.error, ApiFailed)
    assert len(ran.requests) == 1
    assert [m.role for m in ran.messages] == ["user"]


def test_abort_from_an_error_processor_trips_the_run() -> None:
    log: list[str] = []
    agent = make_agent(
        error_processors=[
            Handler("stop", Abort("give up", metadata={"s": 400}), log),
            Handler("never", Retry(), log),
        ]
    )
    ran = simulate(agent, [REJECT, Say("never")])
    tw = ran.result.tripwire
    assert tw is not None
    assert (tw.reason, tw.processor_id, tw.metadata) == ("give up", "stop", {"s": 400})
    assert log == ["stop"]
    assert ran.chunks[-1] == tw


def test_abort_with_retry_from_an_error_processor_is_a_plain_abort() -> None:
    log: list[str] = []
    ran = simulate(
        make_agent(error_processors=[Handler("h", Abort("x", retry=True), log)]),
        [REJECT, Say("never")],
    )
    assert ran.result.status == "tripped"
    assert len(ran.requests) == 1
    assert ran.result.retry_count == 0


def test_error_processor_args_describe_the_failure() -> None:
    log: list[str] = []
    h = Handler("h", Continue(), log)
    agent = make_agent(tools=[lookup], error_processors=[h])
    rejected = Fail(status=422, message="bad schema", error_type="invalid", body='{"e":1}')
    simulate(agent, [Say(calls=[call("lookup", query="q")]), rejected])
    (a,) = h.args
    assert (a.error.status, a.error.message, a.error.error_type, a.error.body) == (
        422,
        "bad schema",
        "invalid",
        '{"e":1}',
    )
    assert a.error.retryable is False
    assert a.step_number == 1
    assert len(a.steps) == 1
    assert [m.role for m in a.messages] == ["user", "assistant", "tool"]


def test_error_processor_state_persists_between_errors() -> None:
    class CountDown(StatefulProcessor[int]):
        id = "countdown"

        def initial_state(self) -> int:
            return 2

        def process_api_error(self, args: ApiErrorArgs[int]) -> ApiErrorResult[int]:
            if args.state == 0:
                return Continue()
            return Out(Retry(), args.state - 1)

    ran = simulate(
        make_agent(error_processors=[CountDown()], max_api_error_retries=10), [REJECT] * 10
    )
    assert len(ran.requests) == 3
    assert ran.result.api_error_retry_count == 2


# --- transient failures: the retry policy, never the error processors ---------------------


def test_transient_errors_never_reach_error_processors_and_are_retried() -> None:
    log: list[str] = []
    agent = make_agent(error_processors=[Handler("h", Retry(), log)])
    ran = simulate(agent, [Fail(status=429), Fail(status=503), Say("ok")])
    assert log == []
    assert ran.result.status == "finished"
    assert ran.result.text == "ok"
    assert len(ran.requests) == 3
    assert ran.result.api_error_retry_count == 0


def test_backoff_honours_retry_after_in_virtual_time() -> None:
    ran = simulate(make_agent(), [Fail(status=429, retry_after=7.5), Say("ok")])
    assert _sleeps(ran.trace.commands) == [7.5]
    assert ran.run.clock - 1_700_000_000.0 == 7.5


def test_backoff_without_retry_after_grows_with_jitter_and_is_deterministic() -> None:
    policy = RetryPolicy(max_retries=3, base_delay=1.0, jitter=0.25)
    agent = make_agent(retry_policy=policy)
    script: list[Scripted] = [Fail(status=500), Fail(status=502), Fail(status=None), Say("ok")]
    ran = simulate(agent, script)
    sleeps = _sleeps(ran.trace.commands)
    assert len(sleeps) == 3
    for i, s in enumerate(sleeps):
        assert 0.75 * 2**i <= s <= 2**i
    assert ran.run.clock - 1_700_000_000.0 == pytest.approx(sum(sleeps))
    assert _sleeps(simulate(agent, script).trace.commands) == sleeps  # same run, same waits


def test_a_retry_after_past_the_policy_cap_fails_without_retrying_early() -> None:
    # Retrying after our own short backoff when the server asked for an hour would only
    # burn quota: the run fails and the error says how long to wait.
    policy = RetryPolicy(base_delay=1.0, max_retry_after=60.0)
    ran = simulate(make_agent(retry_policy=policy), [Fail(status=429, retry_after=3600), Say("ok")])
    assert _sleeps(ran.trace.commands) == [] and len(ran.requests) == 1
    err = ran.result.error
    assert isinstance(err, ApiFailed) and err.attempts == 1
    assert err.error.retry_after == 3600 and err.error.retryable


def test_a_retry_after_the_policy_allows_is_waited() -> None:
    policy = RetryPolicy(base_delay=1.0, max_retry_after=7200.0)
    ran = simulate(make_agent(retry_policy=policy), [Fail(status=429, retry_after=3600), Say("ok")])
    assert _sleeps(ran.trace.commands) == [3600] and ran.result.status == "finished"


def test_transient_retries_are_bounded_by_the_retry_policy() -> None:
    log: list[str] = []
    agent = make_agent(
        error_processors=[Handler("h", Retry(), log)], retry_policy=RetryPolicy(max_retries=2)
    )
    ran = simulate(agent, [Fail(status=503)] * 5)
    assert log == []
    assert len(ran.requests) == 3
    assert len(_sleeps(ran.trace.commands)) == 2
    err = ran.result.error
    assert isinstance(err, ApiFailed)
    assert (err.attempts, err.error.status, err.error.retryable) == (3, 503, True)


def test_no_retry_policy_means_one_attempt() -> None:
    ran = simulate(
        make_agent(retry_policy=RetryPolicy(max_retries=0)), [Fail(status=429), Say("x")]
    )
    assert len(ran.requests) == 1
    assert _sleeps(ran.trace.commands) == []
    assert ran.result.status == "failed"


def test_a_status_marked_not_retryable_goes_to_the_error_processors() -> None:
    log: list[str] = []
    agent = make_agent(error_processors=[Handler("h", Retry(), log)])
    ran = simulate(agent, [Fail(status=500, retryable=False), Say("ok")])
    assert log == ["h"]
    assert _sleeps(ran.trace.commands) == []
    assert ran.result.status == "finished"
