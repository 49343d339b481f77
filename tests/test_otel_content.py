"""`OTelObserver(content=True)` exports of a model's answer and of a tool's result what the
caller received (after the output guards), on every interpreter; the spans' times are
those of the calls themselves."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import msgspec
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from effects import Abort, Continue
from interpreters import SyncInterpreter
from interpreters.observers.otel import OTelObserver
from interpreters.testing import AsyncSimulator, Say, ScriptedModel, Simulator, call
from pipeline import Agent, OutputStepArgs, OutputStepResult, Processor
from pipeline.processors import PIIDetector
from pipeline.tools import tool

EMAIL = "ada@example.com"
REDACTED = "[REDACTED:email]"


@tool
def crm(name: str) -> str:
    """Look a customer up."""
    return f"{name}: {EMAIL}"


class RetryOnce(Processor):
    """Discards the first final answer (so a chat span's answer is a discarded one)."""

    id = "retry-once"

    def process_output_step(self, args: OutputStepArgs[None]) -> OutputStepResult[None]:
        if not args.tool_calls and args.retry_count == 0:
            return Abort("again", retry=True)
        return Continue()


def _script() -> list[Say]:
    return [
        Say(["Looking up ", "the customer."], calls=[call("crm", name="Ada")]),
        Say(["First try: write to ada@exa", "mple.com."]),
        Say(["Write to ", "ada@example", ".com, she is expecting it."]),
    ]


def _agent() -> Agent:
    return Agent.create("sim/model", tools=[crm],
                        output_processors=[PIIDetector(types=("email",)), RetryOnce()])


def _exporter(content: bool) -> tuple[InMemorySpanExporter, OTelObserver]:
    out = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(out))
    return out, OTelObserver(tracer_provider=tp, content=content)


def _on_simulator(o: OTelObserver) -> None:
    Simulator(ScriptedModel(_script()), observers=[o]).run(_agent(), "hi")


def _on_sync(o: OTelObserver) -> None:
    SyncInterpreter(ScriptedModel(_script()), observers=[o], clock=lambda: 5.0).run(
        _agent(), "hi")


def _on_async_simulator(backend: str) -> Callable[[OTelObserver], None]:
    def go(o: OTelObserver) -> None:
        async def main() -> None:
            await AsyncSimulator(ScriptedModel(_script()), observers=[o]).run(_agent(), "hi")

        anyio.run(main, backend=backend)

    return go


RUNS = {
    "simulator": _on_simulator,
    "sync": _on_sync,
    "async-simulator-asyncio": _on_async_simulator("asyncio"),
    "async-simulator-trio": _on_async_simulator("trio"),
}


def _spans(out: InMemorySpanExporter) -> list[ReadableSpan]:
    return sorted(out.get_finished_spans(), key=lambda s: (s.start_time or 0, s.name))


def _answer(span: ReadableSpan) -> str:
    (message,) = msgspec.json.decode(str(dict(span.attributes or {})["gen_ai.output.messages"]))
    return "".join(p["content"] for p in message["parts"])


@pytest.mark.parametrize("where", list(RUNS))
def test_content_is_what_the_caller_received(where: str) -> None:
    out, observer = _exporter(content=True)
    RUNS[where](observer)
    spans = _spans(out)
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert [_answer(s) for s in chats] == [
        "Looking up the customer.",
        f"First try: write to {REDACTED}.",
        f"Write to {REDACTED}, she is expecting it.",
    ]
    (tool_span,) = [s for s in spans if s.name.startswith("execute_tool")]
    assert dict(tool_span.attributes or {})["gen_ai.tool.call.result"] == f'"Ada: {REDACTED}"'
    (run,) = [s for s in spans if s.name.startswith("invoke_agent")]
    assert _answer(run).endswith(f"Write to {REDACTED}, she is expecting it.")  # result.text
    outputs = repr([
        dict(s.attributes or {}).get(k)
        for s in spans for k in ("gen_ai.output.messages", "gen_ai.tool.call.result")
    ])
    assert EMAIL not in outputs


@pytest.mark.parametrize("where", list(RUNS))
def test_content_changes_no_span_times(where: str) -> None:
    shapes = []
    for content in (False, True):
        out, observer = _exporter(content)
        RUNS[where](observer)
        shapes.append([(s.name, s.start_time, s.end_time) for s in _spans(out)])
    assert shapes[0] == shapes[1]


@pytest.mark.parametrize("where", list(RUNS))
def test_a_requests_tool_results_are_exported_as_the_caller_received_them(where: str) -> None:
    """The model reads a tool's result as the tool returned it, but the export of the
    requests that carry it holds what the caller received (the PII guard's redaction)."""
    out, observer = _exporter(content=True)
    RUNS[where](observer)
    chats = [s for s in _spans(out) if s.name.startswith("chat ")]
    inputs = [str(dict(s.attributes or {})["gen_ai.input.messages"]) for s in chats]
    assert all(EMAIL not in i for i in inputs)
    later = [msgspec.json.decode(i) for i in inputs[1:]]
    results = [p for ms in later for m in ms for p in m["parts"] if p["type"] == "tool-result"]
    assert [p["result"] for p in results] == [f"Ada: {REDACTED}"] * 2
