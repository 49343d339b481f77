"""A support team: a supervisor that delegates to a refunds agent and a research agent.

The supervisor's model calls both agents in one step; they run as child runs, side by
side (on the async interpreter concurrently, under the step's deadline). The refunds
agent's `refund` tool needs a person's approval: the whole tree suspends, the approval
desk lists the nested call (its `path` names the refunds run), and the resume runs that
one call once, while the research answer, already in, is not asked for again. A PII
guard on the supervisor covers what every child says on its way out, and what the
children save to memory is saved only once the supervisor's answer is approved.

    python -m examples.support_team      # runs it on the simulator and prints the answer

`tests/test_example_support_team.py` runs it on the simulator, sync and async, and over
HTTP against scripted Chat Completions endpoints.
"""

from __future__ import annotations

from collections.abc import Callable

from interpreters.approvals.store import Approvals, MemoryApprovalStore
from interpreters.testing import Say, ScriptedModel, Simulator, call
from pipeline import Agent, RunResult, tool
from pipeline.approval import Resumption, approve
from pipeline.processors import PIIDetector

REFUNDED: list[tuple[str, int]] = []
"""What the refund tool paid out (the example's side effect)."""


def refund(order: str, amount: int) -> str:
    """Refund an order.

    Args:
        order: The order number.
        amount: The amount to refund, in euros.
    """
    REFUNDED.append((order, amount))
    return f"refunded {amount} EUR on order {order}"


def search_policy(topic: str) -> str:
    """Search the support policy.

    Args:
        topic: What to look up.
    """
    return "Refunds are possible within 30 days of delivery."


def make_team(models: tuple[str, str, str] = ("sim/support", "sim/refunds", "sim/research"),
              ) -> Agent:
    """The supervisor, with its two agents as tools."""
    support_model, refunds_model, research_model = models
    refunds = Agent.create(
        refunds_model, name="refunds", tools=[tool(refund, needs_approval=True)],
        instructions="You refund orders. Use the refund tool.",
    )
    research = Agent.create(
        research_model, name="research", tools=[search_policy],
        instructions="You look up the support policy.",
    )
    return Agent.create(
        support_model, name="support",
        instructions="You lead customer support: ask research and refunds.",
        tools=[
            refunds.as_tool("refunds", "Refund a customer's order."),
            research.as_tool("research", "Look up the support policy."),
        ],
        output_processors=[PIIDetector(strategy="redact")],
    )


def scripted_models() -> dict[str, ScriptedModel]:
    """What each agent's model says, for the simulator."""
    return {
        "sim/support": ScriptedModel([
            Say(calls=[call("refunds", input="Refund order 42: 30 EUR"),
                       call("research", input="Refund policy?")]),
            Say("Your refund of 30 EUR is approved; refunds are possible within 30 days. "
                "We wrote to anne@example.com."),
        ]),
        "sim/refunds": ScriptedModel([
            Say(calls=[call("refund", order="42", amount=30)]),
            Say("Refunded 30 EUR on order 42 for anne@example.com."),
        ]),
        "sim/research": ScriptedModel([
            Say(calls=[call("search_policy", topic="refunds")]),
            Say("Within 30 days of delivery."),
        ]),
    }


Run = Callable[[Agent, str | tuple[()], Resumption | None], RunResult]
"""Runs the agent (a prompt, or a resumption): one interpreter or another."""


def handle(team: Agent, run: Run, question: str) -> tuple[RunResult, RunResult]:
    """A support request: the first run suspends on the refund; a person approves it
    from the desk; the resumed run answers. Both results."""
    desk = Approvals(MemoryApprovalStore(), team)
    first = desk.keep(run(team, question, None))
    assert first.status == "suspended", first.status
    (waiting,) = desk.suspended()
    go_on = desk.decide(waiting.run_id, [approve(p, by="support-lead") for p in waiting.pending])
    assert go_on is not None
    return first, run(team, (), go_on)


def on_simulator() -> tuple[RunResult, RunResult]:
    """The example on the simulator."""
    models = scripted_models()
    sim = Simulator(models["sim/support"], models=models)

    def run(agent: Agent, prompt: str | tuple[()], resume: Resumption | None) -> RunResult:
        return sim.run(agent, prompt, resume=resume).result

    return handle(make_team(), run, "I want my 30 EUR back for order 42.")


if __name__ == "__main__":
    first, done = on_simulator()
    for p in first.suspension.pending if first.suspension else ():
        print(f"waited: {'/'.join(p.path)} -> {p.tool_name}: {p.message}")
    print(done.text)
    for n in done.children:
        print(f"  {n.agent}: {n.status}, {n.usage.total_tokens} tokens")
    print("refunded:", REFUNDED)
