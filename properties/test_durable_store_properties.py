"""The checkpoint retry, for any run of store faults: the step's body runs once, every
write that is retried is the same step, no wait exceeds the cap, and the faults end
either in the write or, once the deadline passed, in StoreUnavailable; errors that are
not the store's pass through at once."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

from interpreters.durable.dbos.store import (
    Checkpoints,
    Once,
    StepDatabaseError,
    StoreRetry,
    StoreUnavailable,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.waits: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds

    def monotonic(self) -> float:
        return self.now


policies = st.builds(
    lambda initial, factor, deadline: StoreRetry(initial, initial * factor, deadline),
    st.floats(0.001, 1.0), st.floats(1.0, 50.0), st.floats(0.01, 100.0),
)


@given(policies, st.integers(0, 40))
def test_store_faults_are_retried_with_the_body_run_once(policy: StoreRetry, faults: int) -> None:
    clock = FakeClock()
    ran: list[int] = []

    def step() -> str:
        ran.append(1)
        return "outcome"

    body = Once(step)
    left = [faults]

    def write() -> str:
        out = body()
        if left[0]:
            left[0] -= 1
            raise sqlite3.OperationalError("database or disk is full")
        return out

    checkpoints = Checkpoints(policy, clock.sleep, clock.monotonic)
    try:
        got = checkpoints.call("tool:x", write)
    except StoreUnavailable:
        assert faults > 0 and clock.now >= policy.deadline  # only once the deadline passed
    else:
        assert got == "outcome" and left[0] == 0
        assert clock.now <= policy.deadline
    assert ran == [1]
    assert all(0 <= w <= policy.max_wait * 1.5 for w in clock.waits)


@given(policies)
def test_errors_not_of_the_store_are_not_retried(policy: StoreRetry) -> None:
    clock = FakeClock()
    checkpoints = Checkpoints(policy, clock.sleep, clock.monotonic)

    def broken() -> None:
        raise ValueError("the tool's own bug")

    with pytest.raises(ValueError):
        checkpoints.call("tool:x", broken)
    assert clock.waits == []


@given(policies)
def test_a_database_error_of_the_steps_own_code_is_its_outcome_not_retried(
    policy: StoreRetry,
) -> None:
    clock = FakeClock()
    checkpoints = Checkpoints(policy, clock.sleep, clock.monotonic)
    ran: list[int] = []

    def handler() -> None:
        ran.append(1)
        raise sqlite3.OperationalError("no such table: orders")

    body = Once(handler)
    with pytest.raises(StepDatabaseError, match="no such table"):
        checkpoints.call("perform:Lookup", body)
    with pytest.raises(StepDatabaseError):
        body()  # a retried step gets the same outcome
    assert ran == [1] and clock.waits == []


@pytest.mark.parametrize("bad", [0.0, -1.0, float("inf"), float("nan")])
def test_a_retry_policy_not_understood_is_refused(bad: float) -> None:
    with pytest.raises(ValueError):
        StoreRetry(deadline=bad)
    with pytest.raises(ValueError):
        StoreRetry(initial=bad)
