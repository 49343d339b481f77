"""Recorded runs for the studio's tests: a support agent with a redacting stream
processor, a guard that asks once more, a tool; and a changed agent to replay against.

The model's output carries markup (`<script>`, an `<img onerror>`): the studio must show
it as text.
"""

from __future__ import annotations

from pathlib import Path

from effects import Continue, Replace
from interpreters.record.journal import Recorder
from interpreters.testing import Say, ScriptedModel, Simulator, call, numbered_run_ids
from pipeline import (
    Agent,
    OutputStepArgs,
    OutputStepResult,
    Processor,
    StreamArgs,
    StreamResult,
    TextDelta,
    abort,
)

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
