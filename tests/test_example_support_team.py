"""examples/support_team.py: on the simulator (sync and async) and over HTTP (Chat
Completions endpoints scripted behind an httpx transport, sync and async)."""

from __future__ import annotations

import json

import anyio
import httpx
import msgspec

from examples import support_team
from examples.support_team import handle, make_team, on_simulator, scripted_models
from interpreters.aio import AsyncInterpreter
from interpreters.providers._async.router import AsyncResolver
from interpreters.providers._sync.router import Resolver
from interpreters.sync import SyncInterpreter
from interpreters.testing import AsyncSimulator
from pipeline import Agent, RunResult
from pipeline.approval import Resumption


def _check(first: RunResult, done: RunResult) -> None:
    assert first.suspension is not None
    (p,) = first.suspension.pending
    assert p.tool_name == "refund" and len(p.path) == 1
    assert done.status == "finished", done.error
    assert "[REDACTED:email]" in done.text and "anne@example.com" not in done.text
    assert {n.agent: n.status for n in done.children} == {
        "refunds": "finished", "research": "finished"}
    assert b"anne@example.com" not in msgspec.json.encode(done.messages)
    assert support_team.REFUNDED == [("42", 30)]  # approved, run once


def test_support_team_on_the_simulator() -> None:
    support_team.REFUNDED.clear()
    _check(*on_simulator())


def test_support_team_on_the_async_simulator() -> None:
    support_team.REFUNDED.clear()
    models = scripted_models()

    async def main() -> tuple[RunResult, RunResult]:
        sim = AsyncSimulator(models["sim/support"], models=models)
        first = (await sim.run(make_team(), "refund please")).result
        from interpreters.approvals.store import Approvals, MemoryApprovalStore
        from pipeline.approval import approve
        desk = Approvals(MemoryApprovalStore(), make_team())
        desk.keep(first)
        assert first.suspension is not None
        go_on = desk.decide(first.suspension.run_id,
                            [approve(p) for p in first.suspension.pending])
        return first, (await sim.run(make_team(), (), resume=go_on)).result

    _check(*anyio.run(main))


# --- over HTTP: each agent's model a scripted Chat Completions endpoint -----------------

_SAY: dict[str, list[object]] = {
    "support": [
        [("refunds", {"input": "Refund order 42: 30 EUR"}), ("research", {"input": "Policy?"})],
        "Your refund of 30 EUR is approved. We wrote to anne@example.com.",
    ],
    "refunds": [[("refund", {"order": "42", "amount": 30})], "Refunded 30 EUR."],
    "research": [[("search_policy", {"topic": "refunds"})], "Within 30 days."],
}


def _sse(reply: object) -> bytes:
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
            "model": "m"}
    events: list[dict[str, object]] = []
    if isinstance(reply, str):
        events.append({**base, "choices": [{"index": 0, "delta": {"content": reply}}]})
        finish = "stop"
    else:
        assert isinstance(reply, list)
        calls = [{"index": i, "id": f"call_{name}_{i}", "type": "function",
                  "function": {"name": name, "arguments": json.dumps(args)}}
                 for i, (name, args) in enumerate(reply)]
        events.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": calls}}]})
        finish = "tool_calls"
    events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    events.append({**base, "choices": [],
                   "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + (
        b"data: [DONE]\n\n")


def _endpoint(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    answered = any(m.get("role") == "tool" for m in body["messages"])
    reply = _SAY[body["model"]][1 if answered else 0]
    return httpx.Response(200, content=_sse(reply),
                          headers={"content-type": "text/event-stream"})


_MODELS = ("openai/support", "openai/refunds", "openai/research")


def test_support_team_over_http_sync() -> None:
    support_team.REFUNDED.clear()
    client = httpx.Client(transport=httpx.MockTransport(_endpoint))
    resolver = Resolver(api_keys={"openai": "sk-test"},
                                 base_urls={"openai": "http://127.0.0.1:9/v1"}, client=client)
    interp = SyncInterpreter(resolve=resolver, observers=[])

    def run(agent: Agent, prompt: str | tuple[()], resume: Resumption | None) -> RunResult:
        return interp.run(agent, prompt, resume=resume)

    _check(*handle(make_team(_MODELS), run, "I want my money back"))


def test_support_team_over_http_async() -> None:
    support_team.REFUNDED.clear()

    async def main() -> tuple[RunResult, RunResult]:
        client = httpx.AsyncClient(transport=httpx.MockTransport(_endpoint))
        resolver = AsyncResolver(api_keys={"openai": "sk-test"},
                                 base_urls={"openai": "http://127.0.0.1:9/v1"},
                                 client=client)
        interp = AsyncInterpreter(resolve=resolver, observers=[])
        team = make_team(_MODELS)
        from interpreters.approvals.store import Approvals, MemoryApprovalStore
        from pipeline.approval import approve
        desk = Approvals(MemoryApprovalStore(), team)
        first = desk.keep(await interp.run(team, "I want my money back"))
        assert first.suspension is not None
        go_on = desk.decide(first.suspension.run_id,
                            [approve(p) for p in first.suspension.pending])
        assert go_on is not None
        return first, await interp.run(team, (), resume=go_on)

    _check(*anyio.run(main))
