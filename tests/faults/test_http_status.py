"""Fault matrix, HTTP statuses: every status from 400 to 529 with and without the retry
hints (Retry-After in seconds, retry-after-ms, x-should-retry either way), through the
sync and the async interpreter. Each cell checks the typed error, what the retry policy
did with it, and that the messages so far are intact and paired."""

from __future__ import annotations

import json

import pytest

from pipeline.values.model import is_retryable_status
from pipeline.values.result import ApiFailed
from tests.faults.harness import JSON, agent, both, expect
from tests.providers.server import ReplayServer, Reply

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # slow: the full status matrix, over HTTP

STATUSES = (400, 401, 403, 404, 408, 409, 413, 422, 429, 500, 502, 503, 504, 529)
HINTS: dict[str, tuple[tuple[str, str], ...]] = {
    "none": (),
    "retry-after": (("retry-after", "1"),),
    "retry-after-ms": (("retry-after-ms", "1500"),),
    "should-retry-true": (("x-should-retry", "true"),),
    "should-retry-false": (("x-should-retry", "false"), ("retry-after", "1")),
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the status cells do not depend on the event loop; trio runs below


def _body(status: int) -> bytes:
    return json.dumps({"error": {"message": f"failed with {status}", "type": f"t{status}",
                                 "code": f"c{status}"}}).encode()


@pytest.mark.parametrize("hint", list(HINTS))
@pytest.mark.parametrize("status", STATUSES)
async def test_status(server: ReplayServer, status: int, hint: str) -> None:
    reply = Reply(status, (*JSON, *HINTS[hint], ("x-request-id", f"req_{status}")), _body(status))
    override = {"should-retry-true": True, "should-retry-false": False}.get(hint)
    retryable = is_retryable_status(status) if override is None else override
    hinted = {"retry-after": 1.0, "retry-after-ms": 1.5}.get(hint)
    runs = await both(server, reply, reply, ag=agent(retries=1))
    expect(runs, f"t{status}")
    for ran in runs:
        err = ran.api_error
        assert (err.status, err.retryable, err.code, err.request_id) == (
            status, retryable, f"c{status}", f"req_{status}")
        assert err.message == f"failed with {status}"
        assert err.retry_after == (hinted if retryable else None)
        failed = ran.result.error
        assert isinstance(failed, ApiFailed)
        if retryable:  # retried once, after the server's hint when it gave one
            assert failed.attempts == 2 and ran.requests == 3
            assert len(ran.waits) == 1
            if hinted is not None:
                assert ran.waits == [hinted]
        else:  # offered to the error processors (none here), never retried
            assert failed.attempts == 1 and ran.requests == 2 and ran.waits == []


async def test_retry_after_past_the_policy_cap_fails_without_retrying_early(
    server: ReplayServer,
) -> None:
    # The server asks for two minutes; the policy waits at most one. Retrying after the
    # policy's own backoff would burn quota: the run fails and says how long to wait.
    reply = Reply(429, (*JSON, ("retry-after", "120")), _body(429))
    runs = await both(server, reply, reply, ag=agent(retries=2, max_retry_after=60))
    expect(runs, "t429")
    for ran in runs:
        assert ran.waits == [] and ran.requests == 2
        assert ran.api_error.retry_after == 120.0 and ran.api_error.retryable
        failed = ran.result.error
        assert isinstance(failed, ApiFailed) and failed.attempts == 1


async def test_retry_after_within_a_policy_that_allows_it_is_waited(
    server: ReplayServer,
) -> None:
    reply = Reply(429, (*JSON, ("retry-after", "120")), _body(429))
    runs = await both(server, reply, reply, ag=agent(retries=1, max_retry_after=300))
    expect(runs, "t429")
    for ran in runs:
        assert ran.waits == [120.0] and ran.requests == 3
