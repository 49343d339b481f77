"""Recorded runs for the studio's tests: a support agent with a redacting stream
processor, a guard that asks once more, a tool; and a changed agent to replay against.

The model's output carries markup (`<script>`, an `<img onerror>`): the studio must show
it as text.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

from effects import Continue, Replace
from interpreters.approvals.store import Approvals, MemoryApprovalStore
from interpreters.record.journal import Recorder
from interpreters.testing import Say, ScriptedModel, SimRun, Simulator, call, numbered_run_ids
from pipeline import (
    Agent,
    InputArgs,
    InputResult,
    OutputStepArgs,
    OutputStepResult,
    Processor,
    StreamArgs,
    StreamResult,
    TextDelta,
    abort,
)
from pipeline.approval import approve
from pipeline.values.cost import Cost, PriceQuery

HOSTILE = '<script>document.title="pwned"</script>"><img src=x onerror="document.title=\'pwned\'">'
"""Markup in the model's output, as an attacker would put it in a page the model read."""


def order_status(order_id: str) -> str:
    """The status of an order."""
    return f"order {order_id}: shipped <b>today</b>"


class RedactCard(Processor):
    id = "redact-card"

    def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
        if isinstance(args.part, TextDelta) and "4111" in args.part.text:
            return Replace(TextDelta(args.part.id, args.part.text.replace("4111", "****")))
        return Continue()


class NoShortAnswers(Processor):
    id = "no-short-answers"

    def process_output_step(self, args: OutputStepArgs[None]) -> OutputStepResult[None]:
        if len(args.text) < 12 and not args.tool_calls:
            abort("Too short, please elaborate.", retry=True)
        return Continue()


class Shout(Processor):
    """The change a replay tries: every text chunk upper-cased."""

    id = "shout"

    def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
        if isinstance(args.part, TextDelta):
            return Replace(TextDelta(args.part.id, args.part.text.upper()))
        return Continue()


def support_agent() -> Agent:
    return Agent.create(
        "openai/gpt-4o-mini", name="support", instructions="Help with orders.",
        tools=[order_status], output_processors=[RedactCard(), NoShortAnswers()],
        max_processor_retries=2,
    )


def louder_agent() -> Agent:
    return Agent.create(
        "openai/gpt-4o-mini", name="support", instructions="Help with orders.",
        tools=[order_status], output_processors=[RedactCard(), NoShortAnswers(), Shout()],
        max_processor_retries=2,
    )


def record_support_run(directory: Path) -> str:
    """Record one support run into `directory`; its journal's name."""
    model = ScriptedModel([
        Say("Let me check.", calls=[call("order_status", order_id="1042")], latency=0.4),
        Say("Shipped.", latency=0.3),                     # too short: asked again
        Say(["Your order 1042 shipped today; card 4111 ", HOSTILE], latency=0.5),
    ])
    before = set(directory.glob("*.ndjson"))
    run = Simulator(model, observers=[Recorder(directory)], run_ids=numbered_run_ids()).run(
        support_agent(), "Where is order 1042?")
    assert run.result.status == "finished" and run.result.retry_count == 1
    (new,) = set(directory.glob("*.ndjson")) - before
    return new.stem


class NoRefundsOfEverything(Processor):
    id = "no-refund-all"

    def process_input(self, args: InputArgs[None]) -> InputResult[None]:
        if any("everything" in m.text for m in args.messages if m.role == "user"):
            abort("Refunds of everything are not taken here.")
        return Continue()


def guarded_agent() -> Agent:
    return Agent.create("openai/gpt-4o-mini", name="guarded",
                        input_processors=[NoRefundsOfEverything()])


def record_runs(directory: Path) -> dict[str, str]:
    """Runs of every kind the list tells apart, into `directory` (their journals' names by
    what they are): the support run (finished, two guards acted), a tripped one (thread
    t-2, user bob), and an approval's two parts (thread t-3, user carol): the part that
    suspended and the part that went on."""
    from examples.asgi_stream import demo_agent, demo_model

    model = ScriptedModel([
        Say("Let me check.", calls=[call("order_status", order_id="1042")], latency=0.4),
        Say("Shipped.", latency=0.3),
        Say(["Your order 1042 shipped today; card 4111 ", "thanks."], latency=0.5),
    ])
    recorder = Recorder(directory)

    def price(q: PriceQuery) -> Cost:  # every call a quarter
        return Cost(Decimal("0.25"))

    sim = Simulator(model, models={"demo/echo": demo_model()}, observers=[recorder],
                    price=price)
    names: dict[str, str] = {}

    def recorded(what: str, run: Callable[[], SimRun]) -> SimRun:
        before = {p.stem for p in directory.glob("*.ndjson")}
        done = run()
        (names[what],) = {p.stem for p in directory.glob("*.ndjson")} - before
        return done

    support = recorded("support", lambda: sim.run(
        support_agent(), "Where is order 1042?", thread_id="t-1", resource_id="alice"))
    assert support.status == "finished"
    tripped = recorded("tripped", lambda: sim.run(
        guarded_agent(), "refund everything", thread_id="t-2", resource_id="bob"))
    assert tripped.status == "tripped"
    demo = demo_agent()
    waiting = recorded("suspended", lambda: sim.run(
        demo, "refund 250 on order R31", thread_id="t-3", resource_id="carol"))
    assert waiting.suspension is not None
    approvals = Approvals(MemoryApprovalStore())
    approvals.keep(waiting.result)
    [pending] = waiting.suspension.pending
    go_on = approvals.take(demo, waiting.suspension.run_id, [approve(pending)])
    done = recorded("resumed", lambda: sim.run(
        demo, (), resume=go_on, thread_id="t-3", resource_id="carol"))
    assert done.status == "finished"
    assert names["resumed"] == f"{names['suspended']}.resumed-{go_on.suspension.step.step_number}"
    return names


def record_tree_run(directory: Path) -> str:
    """Record a tree of depth 2 into `directory`: a lead calling a researcher (which
    calls a source agent) and a writer; its journal's name (one file for the tree)."""
    source = Agent.create("sim/source", name="source")
    research = Agent.create("sim/research", name="research", tools=[source])
    writer = Agent.create("sim/writer", name="writer")
    lead = Agent.create("sim/lead", name="lead", tools=[research, writer])
    models = {
        "sim/lead": ScriptedModel([
            Say(calls=[call("research", input="policy"), call("writer", input="a note")]),
            Say("All done.")]),
        "sim/research": ScriptedModel([Say(calls=[call("source", input="policy")]),
                                       Say("30 days")]),
        "sim/source": ScriptedModel([Say("the policy says 30 days")]),
        "sim/writer": ScriptedModel([Say("Dear customer")]),
    }
    before = set(directory.glob("*.ndjson"))
    run = Simulator(models["sim/lead"], models=models, observers=[Recorder(directory)],
                    run_ids=numbered_run_ids()).run(lead, "refund policy?")
    assert run.result.status == "finished"
    (new,) = set(directory.glob("*.ndjson")) - before
    return new.stem
