"""A support supervisor whose refunds agent runs in another service, over A2A.

The refunds agent is served over the Agent2Agent protocol (`a2a_app`: its card, its
JSON-RPC endpoint); the supervisor calls it as a child run through a stand-in
(`RemoteAgents.agent`), side by side with a local research agent. The remote refund
needs a person's approval: the remote task asks for input, the whole tree suspends
(the pending call's `path` names the remote child), and the decision resumes the
remote task, which pays once. The supervisor's PII guard covers what the remote agent
says before anything reaches the caller.

    python -m examples.a2a_team     # serves the refunds agent on 127.0.0.1 and runs it

`tests/test_example_a2a_team.py` runs it over loopback. Needs the a2a extra
(`pip install 'pipeline-agents[a2a]'`) and uvicorn.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import anyio
from starlette.applications import Starlette

from effects import AskApproval, Continue
from interpreters import AsyncInterpreter
from interpreters.a2a import RemoteAgents, a2a_app
from interpreters.approvals.store import Approvals, MemoryApprovalStore
from interpreters.providers.provider import AsyncProvider
from interpreters.testing import Say, ScriptedModel, call
from pipeline import Agent, RunResult, ToolCallArgs, ToolCallResult, processor
from pipeline.approval import approve
from pipeline.processors import PIIDetector

REFUNDED: list[tuple[str, int]] = []
"""What the refunds service paid out (the example's side effect)."""


def refund(order: str, amount: int) -> str:
    """Refund an order.

    Args:
        order: The order number.
        amount: The amount to refund, in euros.
    """
    REFUNDED.append((order, amount))
    return f"refunded {amount} EUR on order {order}"


def _approve_refunds(args: ToolCallArgs[None]) -> ToolCallResult[None]:
    if args.tool_name == "refund":
        return AskApproval(f"refund {args.args['amount']} EUR on order {args.args['order']}?")
    return Continue()


def refunds_app(url: str, model: AsyncProvider | None = None) -> Starlette:
    """The refunds service: its agent served over A2A at `url` (its model scripted
    unless one is given)."""
    refunds = Agent.create(
        "sim/refunds", name="refunds", tools=[refund],
        instructions="You refund orders. Use the refund tool.",
        input_processors=[processor("refund-approval", process_tool_call=_approve_refunds)],
    )
    script = ScriptedModel([
        Say(calls=[call("refund", order="42", amount=30)]),
        Say("Refunded 30 EUR on order 42 for anne@example.com."),
    ])
    return a2a_app(refunds, AsyncInterpreter(model or script), url=url,
                   description="Refunds customers' orders (asks a person first).")


def make_supervisor(refunds_url: str) -> tuple[Agent, RemoteAgents]:
    """The supervisor: the remote refunds agent and a local research agent as tools."""
    remote = RemoteAgents({"refunds": refunds_url})
    research = Agent.create("sim/research", name="research",
                            instructions="You look up the support policy.")
    support = Agent.create(
        "sim/support", name="support",
        instructions="You lead customer support: ask research and refunds.",
        tools=[
            remote.agent("refunds").as_tool("refunds", "Refund a customer's order."),
            research.as_tool("research", "Look up the support policy."),
        ],
        output_processors=[PIIDetector(strategy="redact")],
    )
    return support, remote


def scripted_models() -> dict[str, ScriptedModel]:
    """What the local agents' models say."""
    return {
        "sim/support": ScriptedModel([
            Say(calls=[call("refunds", input="Refund order 42: 30 EUR"),
                       call("research", input="Refund policy?")]),
            Say("Your refund of 30 EUR is done; refunds are possible within 30 days."),
        ]),
        "sim/research": ScriptedModel([Say("Within 30 days of delivery.")]),
    }


async def handle(refunds_url: str) -> tuple[RunResult, RunResult]:
    """A support request: the first run suspends on the remote refund; a person
    approves it from the desk; the resumed run answers. Both results."""
    support, remote = make_supervisor(refunds_url)
    models = scripted_models()
    interp = AsyncInterpreter(resolve=remote.resolver(lambda model_id: models[model_id]))
    desk = Approvals(MemoryApprovalStore(), support)
    first = desk.keep(await interp.run(support, "I want my 30 EUR back for order 42."))
    assert first.status == "suspended", (first.status, first.error)
    (waiting,) = desk.suspended()
    go_on = desk.decide(waiting.run_id, [approve(p) for p in waiting.pending])
    return first, await interp.run(support, (), resume=go_on)


@contextmanager
def serve(build: Callable[[str], Starlette]) -> Iterator[str]:
    """The app `build(url)` makes, under uvicorn on 127.0.0.1 (a free port): its URL."""
    import uvicorn

    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{listening.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(build(url), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]},
                              daemon=True)
    thread.start()
    for _ in range(400):  # 20 s at most
        if server.started:
            break
        time.sleep(0.05)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(20)
        listening.close()


if __name__ == "__main__":
    with serve(refunds_app) as url:
        first, done = anyio.run(handle, url)
    for p in first.suspension.pending if first.suspension else ():
        print(f"waited: {'/'.join(p.path)} -> {p.tool_name}: {p.message!r}")
    print(done.text)
    for n in done.children:
        print(f"  {n.agent}: {n.status}")
    print("refunded:", REFUNDED)
