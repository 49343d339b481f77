"""A remote A2A agent as a child run (`interpreters.a2a.RemoteAgents`), against a real
A2A server on loopback (`a2a_app` under uvicorn): its text reaches the caller only
through the parent's guards, its approvals suspend the tree and a decision resumes the
remote task once, each exchange is bounded (events, bytes, a deadline), and a remote
task whose exchange ended early (a cancelled parent, a bound) is cancelled."""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import anyio.to_thread
import pytest

pytest.importorskip("a2a", reason="the a2a extra")

from effects import Abort, AskApproval, Continue
from interpreters import AsyncInterpreter, CancelSignal
from interpreters.a2a import DECISION_TOOL, RemoteAgents, RemoteLimits, a2a_app
from interpreters.a2a.client import exchange_of
from interpreters.approvals.store import Approvals, MemoryApprovalStore
from interpreters.providers.provider import ProviderError
from interpreters.testing import Say, ScriptedModel, call
from pipeline import Agent, RunResult, ToolCallArgs, ToolCallResult, processor
from pipeline.approval import approve, deny
from pipeline.processors import PIIDetector
from pipeline.values.chunks import Chunk, DataChunk
from pipeline.values.messages import user
from pipeline.values.model import ModelRequest
from tests.a2a_servers import WAIT, serve_a2a

pytestmark = pytest.mark.anyio  # on asyncio and trio (tests/conftest.py)

EMAIL = "ann@example.com"


class Remote:
    """A refunds agent served over A2A (without guards of its own: the parent's guard
    is what covers it), its `pay` tool asking for approval; what it paid."""

    def __init__(self, model: ScriptedModel, *, gate: bool = True) -> None:
        self.paid: list[int] = []

        def pay(amount: int) -> str:
            """Pay a refund."""
            self.paid.append(amount)
            return f"paid {amount}"

        def ask(args: ToolCallArgs[None]) -> ToolCallResult[None]:
            return AskApproval(f"pay {args.args['amount']} EUR?") if args.tool_name == "pay" \
                else Continue()

        self.agent = Agent.create(
            "sim/remote", name="refunds", tools=[pay],
            input_processors=[processor("approve", process_tool_call=ask)] if gate else [],
        )
        self.model = model


@contextmanager
def served(remote: Remote) -> Iterator[str]:
    with serve_a2a(lambda url: a2a_app(remote.agent, AsyncInterpreter(remote.model),
                                       url=url)) as url:
        yield url


def _parent(url: str, script: list[Say], limits: RemoteLimits | None = None
            ) -> tuple[Agent, AsyncInterpreter]:
    remote = RemoteAgents({"refunds": url}, limits=limits)
    support = Agent.create(
        "sim/support", name="support",
        tools=[remote.agent("refunds").as_tool("refunds", "Refund an order.")],
        output_processors=[PIIDetector(strategy="redact")],
    )
    model = ScriptedModel(script)
    return support, AsyncInterpreter(resolve=remote.resolver(lambda _id: model))


async def _run(interp: AsyncInterpreter, agent: Agent, prompt: str | tuple[()] = "refund",
               **options: object) -> tuple[RunResult, list[Chunk]]:
    chunks: list[Chunk] = []
    async with interp.stream(agent, prompt, **options) as stream:  # type: ignore[arg-type]
        async for c in stream:
            chunks.append(c)
    return stream.result, chunks


def _asks_refunds() -> list[Say]:
    return [Say(calls=[call("refunds", input="refund order 7")]), Say("Done.")]


async def test_a_remote_agents_text_reaches_the_caller_only_through_the_parents_guards(
) -> None:
    remote = Remote(ScriptedModel([Say(["Refunded; mail ", "ann@exa", "mple.com", "."])]))
    with served(remote) as url:
        support, interp = _parent(url, _asks_refunds())
        result, chunks = await _run(interp, support)
    assert result.status == "finished", result.error
    assert EMAIL not in repr(chunks)  # the remote said it; the caller never sees it
    (agent_chunk,) = [c.data for c in chunks if isinstance(c, DataChunk)
                      and c.name == "data-agent" and isinstance(c.data, dict)
                      and c.data.get("status") == "finished"]
    assert isinstance(agent_chunk, dict)
    assert agent_chunk["text"] == "Refunded; mail [REDACTED:email]."
    (res,) = [r for m in result.messages.messages for r in m.tool_results()]
    assert res.result == "Refunded; mail [REDACTED:email]."  # what the parent's model read
    (node,) = result.children
    assert (node.agent, node.status) == ("refunds", "finished")


async def test_a_remote_approval_suspends_the_tree_and_a_decision_resumes_the_task_once(
) -> None:
    remote = Remote(ScriptedModel([Say(calls=[call("pay", amount=5)]), Say("Paid 5 EUR.")]))
    with served(remote) as url:
        support, interp = _parent(url, _asks_refunds())
        desk = Approvals(MemoryApprovalStore(), support)
        first, _ = await _run(interp, support)
        desk.keep(first)
        assert first.status == "suspended" and remote.paid == []
        (waiting,) = desk.suspended()
        (p,) = waiting.pending
        assert p.tool_name == DECISION_TOOL and p.path == ("call_0_0",)
        assert "pay 5 EUR?" in p.message  # the remote's question, put to a person
        done, _ = await _run(interp, support, (),
                             resume=desk.decide(waiting.run_id, [approve(p)]))
    assert done.status == "finished", done.error
    assert remote.paid == [5]
    (res,) = [r for m in done.messages.messages for r in m.tool_results()]
    assert res.result == "Paid 5 EUR."


async def test_a_remote_call_denied_by_a_person_never_runs() -> None:
    remote = Remote(ScriptedModel([Say(calls=[call("pay", amount=5)]), Say("Not paid.")]))
    with served(remote) as url:
        support, interp = _parent(url, _asks_refunds())
        desk = Approvals(MemoryApprovalStore(), support)
        first, _ = await _run(interp, support)
        desk.keep(first)
        (waiting,) = desk.suspended()
        done, _ = await _run(interp, support, (), resume=desk.decide(
            waiting.run_id, [deny(p, "no") for p in waiting.pending]))
    assert done.status == "finished" and remote.paid == []
    (res,) = [r for m in done.messages.messages for r in m.tool_results()]
    assert res.result == "Not paid."


def _error_result(result: RunResult) -> str:
    (res,) = [r for m in result.messages.messages for r in m.tool_results()]
    assert res.is_error, res
    return str(res.result)


async def test_a_remote_stream_past_its_event_cap_fails_the_call() -> None:
    remote = Remote(ScriptedModel([Say([f"word{i} " for i in range(40)])]))
    with served(remote) as url:
        support, interp = _parent(url, _asks_refunds(), RemoteLimits(max_events=5))
        result, chunks = await _run(interp, support)
    assert result.status == "finished"  # the parent goes on: its model read an error
    assert "more than 5 events" in _error_result(result)
    (node,) = result.children
    assert node.status == "failed"
    assert "word30" not in repr(chunks)


async def test_a_remote_past_its_byte_cap_fails_the_call() -> None:
    remote = Remote(ScriptedModel([Say("x" * 5_000)]))
    with served(remote) as url:
        support, interp = _parent(url, _asks_refunds(), RemoteLimits(max_bytes=2_000))
        result, chunks = await _run(interp, support)
    assert "more bytes than max_bytes" in _error_result(result)
    assert "x" * 100 not in repr(chunks)


class Held:
    """A remote model held until cancelled: `waiting` once it waits, `cancelled` once
    its wait was cancelled."""

    def __init__(self) -> None:
        self.waiting = threading.Event()
        self.cancelled = threading.Event()

    async def sleep(self, seconds: float) -> None:
        self.waiting.set()
        try:
            await anyio.sleep(WAIT)
        except BaseException:
            self.cancelled.set()
            raise


async def test_a_remote_past_its_deadline_fails_the_call_and_its_task_is_cancelled() -> None:
    held = Held()
    remote = Remote(ScriptedModel([Say("late", latency=1.0)], async_sleep=held.sleep))
    with served(remote) as url:
        support, interp = _parent(url, _asks_refunds(), RemoteLimits(timeout=0.5))
        result, _ = await _run(interp, support)
        assert await anyio.to_thread.run_sync(held.cancelled.wait, WAIT)  # CancelTask
    assert "deadline" in _error_result(result)


async def test_cancelling_the_parent_cancels_the_remote_task() -> None:
    held = Held()
    remote = Remote(ScriptedModel([Say("late", latency=1.0)], async_sleep=held.sleep))
    signal = CancelSignal()
    with served(remote) as url:
        support, interp = _parent(url, _asks_refunds())
        async with anyio.create_task_group() as tg:
            async def cancel_once_waiting() -> None:
                assert await anyio.to_thread.run_sync(held.waiting.wait, WAIT)
                signal.cancel("the user left")
            tg.start_soon(cancel_once_waiting)
            result, _ = await _run(interp, support, signal=signal)
        assert await anyio.to_thread.run_sync(held.cancelled.wait, WAIT)
    assert result.status == "cancelled"


async def test_a_remote_task_that_is_rejected_fails_the_call() -> None:
    remote = Remote(ScriptedModel([Say("never")]))
    remote.agent = Agent.create("sim/remote", name="refunds", input_processors=[
        processor("closed", process_input=lambda a: Abort("refunds are closed"))])
    with served(remote) as url:
        support, interp = _parent(url, _asks_refunds())
        result, _ = await _run(interp, support)
    error = _error_result(result)
    assert "rejected" in error and "refunds are closed" in error


def _request(*messages: object) -> ModelRequest:
    return ModelRequest(model="a2a/refunds", system=(), messages=messages)  # type: ignore[arg-type]


def test_an_exchange_sends_the_last_user_messages_text() -> None:
    assert exchange_of(_request(user("first"), user("refund 7"))).text == "refund 7"
    with pytest.raises(ValueError, match="last user message"):
        exchange_of(_request())


async def test_a_stand_in_model_call_without_text_fails_without_calling_out() -> None:
    provider = RemoteAgents({"refunds": "http://127.0.0.1:9"}).provider("a2a/refunds")
    with pytest.raises(ProviderError, match="last user message"):
        async for _ in provider.astream(_request()):
            pass


def test_settings_that_cannot_work_fail_at_construction() -> None:
    with pytest.raises(ValueError, match="timeout"):
        RemoteLimits(timeout=0)
    with pytest.raises(ValueError, match="max_events"):
        RemoteLimits(max_events=0)
    with pytest.raises(ValueError, match="http"):
        RemoteAgents({"refunds": "ftp://x"})
    with pytest.raises(ValueError, match="name"):
        RemoteAgents({"a/b": "http://x"})
    remote = RemoteAgents({"refunds": "http://x"})
    with pytest.raises(KeyError, match="refunds"):
        remote.agent("billing")
    with pytest.raises(ValueError, match="no provider"):
        remote.resolver()("openai/gpt-4o")


def test_without_the_sdk_the_import_error_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ours = ("a2a.", "interpreters.a2a")
    for name in [m for m in sys.modules if m == "a2a" or m.startswith(ours)]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "a2a", None)
    with pytest.raises(ImportError, match=r"pipeline-agents\[a2a\]"):
        importlib.import_module("interpreters.a2a")
