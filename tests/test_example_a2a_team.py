"""examples/a2a_team.py over loopback: the refunds agent served over A2A by uvicorn on
127.0.0.1, the supervisor calling it as a child run beside a local research agent."""

from __future__ import annotations

import anyio
import msgspec
import pytest

pytest.importorskip("a2a", reason="the a2a extra")

from examples import a2a_team
from examples.a2a_team import handle, refunds_app
from interpreters.a2a import DECISION_TOOL
from tests.a2a_servers import serve_a2a


def test_a2a_team_over_loopback() -> None:
    a2a_team.REFUNDED.clear()
    with serve_a2a(refunds_app) as url:
        first, done = anyio.run(handle, url)
    assert first.suspension is not None
    (p,) = first.suspension.pending
    assert p.tool_name == DECISION_TOOL and p.path == ("call_0_0",)
    assert "refund 30 EUR on order 42?" in p.message  # the remote's question
    assert done.status == "finished", done.error
    assert {n.agent: n.status for n in done.children} == {
        "refunds": "finished", "research": "finished"}
    results = {r.tool_name: r.result for m in done.messages.messages for r in m.tool_results()}
    assert results == {
        "refunds": "Refunded 30 EUR on order 42 for [REDACTED:email].",  # the parent's guard
        "research": "Within 30 days of delivery.",
    }
    assert b"anne@example.com" not in msgspec.json.encode(done.messages)
    assert a2a_team.REFUNDED == [("42", 30)]  # approved, run once
