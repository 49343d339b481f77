"""OpenTelemetry spans, events and metrics of runs (interpreters.observers.otel), checked attribute
by attribute with the SDK's in-memory exporter and metric reader."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import anyio
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from examples.quality_guardrail import QualityGuardrail
from interpreters import SyncInterpreter
from interpreters.observers.otel import OTelObserver
from interpreters.record.journal import Recorder
from interpreters.testing import (
    AsyncSimulator,
    Fail,
    Say,
    ScriptedModel,
    Simulator,
    call,
    numbered_run_ids,
)
from pipeline import Agent, OutputStepArgs, OutputStepResult, Processor, RunResult, abort
from pipeline.values import Usage
from pipeline.values.cost import Cost, PriceQuery
from pipeline.values.model import ModelSettings

START = 1_700_000_000.0
SECRET = "the-secret-question"


class Otel:
    def __init__(self) -> None:
        self.spans_out = InMemorySpanExporter()
        tp = TracerProvider()
        tp.add_span_processor(SimpleSpanProcessor(self.spans_out))
        self.reader = InMemoryMetricReader()
        self.observer = OTelObserver(tracer_provider=tp,
                                     meter_provider=MeterProvider(metric_readers=[self.reader]))

    def spans(self) -> list[ReadableSpan]:
        return sorted(self.spans_out.get_finished_spans(), key=lambda s: s.start_time or 0)

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name.startswith(prefix)]

    def points(self, metric: str) -> list[HistogramDataPoint]:
        data = self.reader.get_metrics_data()
        assert data is not None
        out: list[HistogramDataPoint] = []
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name == metric:
                        out.extend(p for p in m.data.data_points
                                   if isinstance(p, HistogramDataPoint))
        return out


@pytest.fixture
def otel() -> Iterator[Otel]:
    yield Otel()


def weather(city: str) -> str:
    """Current weather for a city."""
    return "sunny"


def broken(city: str) -> str:
    """A tool that fails."""
    raise RuntimeError("backend down")


def flat(q: PriceQuery) -> Cost | None:
    return Cost(Decimal(q.usage.input_tokens + q.usage.output_tokens) / 1000)


def agent() -> Agent:
    return Agent.create(
        "openai/gpt-4o-mini", name="weather-bot", tools=[weather, broken],
        output_processors=[QualityGuardrail("openai/judge", threshold=0.5)],
        model_settings=ModelSettings(temperature=0.2, max_tokens=100),
    )


def script() -> ScriptedModel:
    return ScriptedModel([
        Fail(status=429, retry_after=2.0, latency=0.5),
        Say(calls=[call("weather", city="Paris"), call("broken", city="x")], latency=1.0,
            usage=Usage(11, 3, reasoning_tokens=2)),
        Say("Meh.", latency=1.0),
        Say(["It is sunny ", "in Paris."], latency=2.0,
            usage=Usage(40, 6, cached_input_tokens=30, cache_write_tokens=8)),
    ])


def judge() -> ScriptedModel:
    return ScriptedModel([Say("0.1"), Say("0.9")])


def run_sim(otel: Otel) -> None:
    sim = Simulator(script(), models={"openai/judge": judge()}, observers=[otel.observer],
                    start=START, price=flat, run_ids=numbered_run_ids())
    r = sim.run(agent(), f"Weather? {SECRET}", thread_id="thread-7").result
    assert r.status == "finished" and r.retry_count == 1


def test_a_pricer_that_raises_leaves_every_span_without_a_cost(otel: Otel) -> None:
    def broken(q: PriceQuery) -> Cost | None:
        raise RuntimeError("table broken")

    sim = Simulator(script(), models={"openai/judge": judge()}, observers=[otel.observer],
                    start=START, price=broken)
    r = sim.run(agent(), "Weather?").result
    assert r.status == "finished" and r.cost is None
    assert otel.named("chat") and otel.named("invoke_agent")
    for span in otel.spans():
        assert "operation.cost" not in dict(span.attributes or {}), span.name


def test_the_run_span(otel: Otel) -> None:
    run_sim(otel)
    [run] = otel.named("invoke_agent")
    assert run.name == "invoke_agent weather-bot"
    assert run.kind == SpanKind.INTERNAL
    a = dict(run.attributes or {})
    assert a["gen_ai.operation.name"] == "invoke_agent"
    assert a["gen_ai.agent.name"] == "weather-bot"
    assert a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.request.model"] == "gpt-4o-mini"
    assert a["gen_ai.conversation.id"] == "thread-7"
    assert a["pipeline.run_id"] == "run1"
    assert a["pipeline.status"] == "finished"
    assert a["gen_ai.response.finish_reasons"] == ("stop",)
    assert a["gen_ai.usage.input_tokens"] == 11 + 10 + 40
    assert a["gen_ai.usage.output_tokens"] == 3 + 1 + 6
    assert a["gen_ai.usage.reasoning.output_tokens"] == 2
    assert a["pipeline.retry_count"] == 1
    # The run's cost is every call's, the two judge calls' too (10 + 1 tokens each);
    # its usage is the agent's calls', the judges' apart.
    assert a["operation.cost"] == pytest.approx((14 + 11 + 46 + 11 + 11) / 1000)
    assert a["pipeline.judges.calls"] == 2
    assert a["pipeline.judges.usage.input_tokens"] == 20
    assert a["pipeline.judges.usage.output_tokens"] == 2
    assert run.start_time == START * 1e9  # virtual time
    assert run.status.status_code == StatusCode.UNSET
    children = [s for s in otel.spans() if s is not run]
    assert children and all(s.parent is not None and s.parent.span_id == run.context.span_id
                            for s in children)


def test_chat_spans(otel: Otel) -> None:
    run_sim(otel)
    chats = otel.named("chat gpt-4o-mini")
    assert len(chats) == 4   # the 429, the tool step, the discarded step, the answer
    failed, tools, _discarded, answer = chats
    assert failed.status.status_code == StatusCode.ERROR
    assert dict(failed.attributes or {})["error.type"] == "429"
    a = dict(tools.attributes or {})
    assert tools.kind == SpanKind.CLIENT
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.request.model"] == "gpt-4o-mini"
    assert a["gen_ai.response.model"] == "gpt-4o-mini"
    assert a["gen_ai.response.id"] == "resp-1"
    assert a["gen_ai.response.finish_reasons"] == ("tool-calls",)
    assert a["gen_ai.usage.input_tokens"] == 11
    assert a["gen_ai.usage.output_tokens"] == 3
    assert a["gen_ai.usage.reasoning.output_tokens"] == 2
    assert "gen_ai.usage.cache_read.input_tokens" not in a
    last = dict(answer.attributes or {})
    assert last["gen_ai.usage.cache_read.input_tokens"] == 30
    assert last["gen_ai.usage.cache_creation.input_tokens"] == 8
    assert a["gen_ai.request.temperature"] == 0.2
    assert a["gen_ai.request.max_tokens"] == 100
    assert a["pipeline.step"] == 0 and a["pipeline.attempt"] == 1
    assert a["operation.cost"] == pytest.approx(0.014)
    # virtual time: 0.5 s failing, 2 s backoff, then 1 s of latency
    assert tools.start_time == (START + 2.5) * 1e9
    assert tools.end_time == (START + 3.5) * 1e9
    assert dict(answer.attributes or {})["gen_ai.response.finish_reasons"] == ("stop",)
    judges = otel.named("chat judge")
    assert len(judges) == 2
    ja = dict(judges[0].attributes or {})
    assert ja["pipeline.processor.id"] == "quality-guardrail"
    assert ja["gen_ai.request.model"] == "judge"
    assert ja["gen_ai.usage.input_tokens"] == 10 and ja["gen_ai.usage.output_tokens"] == 1
    assert ja["operation.cost"] == pytest.approx(0.011)
    assert judges[0].kind == SpanKind.CLIENT


def test_a_judge_span_carries_its_own_usage_and_cost(otel: Otel) -> None:
    model = ScriptedModel([Say("Fine.", usage=Usage(3, 1))])
    judge = ScriptedModel([Say("0.9", usage=Usage(1000, 1000))])
    sim = Simulator(model, models={"openai/judge": judge}, observers=[otel.observer],
                    start=START, price=flat)
    a = Agent.create("openai/gpt-4o-mini", name="bot",
                     output_processors=[QualityGuardrail("openai/judge", threshold=0.5)])
    r = sim.run(a, "hi").result
    assert r.status == "finished"
    assert r.cost == Cost(Decimal(4 + 2000) / 1000)
    [run] = otel.named("invoke_agent")
    [span] = otel.named("chat judge")
    ja = dict(span.attributes or {})
    assert ja["gen_ai.operation.name"] == "chat"
    assert ja["gen_ai.usage.input_tokens"] == 1000
    assert ja["gen_ai.usage.output_tokens"] == 1000
    assert ja["operation.cost"] == pytest.approx(2.0)
    assert span.parent is not None and span.parent.span_id == run.context.span_id
    assert dict(run.attributes or {})["operation.cost"] == pytest.approx(2.004)
    inputs = [p.sum for p in otel.points("gen_ai.client.token.usage")
              if dict(p.attributes or {}).get("gen_ai.request.model") == "judge"
              and dict(p.attributes or {}).get("gen_ai.token.type") == "input"]
    assert inputs == [1000]


def test_tool_spans(otel: Otel) -> None:
    run_sim(otel)
    ok, bad = otel.named("execute_tool")
    a = dict(ok.attributes or {})
    assert ok.name == "execute_tool weather"
    assert a["gen_ai.operation.name"] == "execute_tool"
    assert a["gen_ai.tool.name"] == "weather"
    assert a["gen_ai.tool.call.id"] == "call_1_0"
    assert a["gen_ai.tool.type"] == "function"
    assert "error.type" not in a
    assert ok.status.status_code == StatusCode.UNSET
    b = dict(bad.attributes or {})
    assert b["gen_ai.tool.name"] == "broken"
    assert b["error.type"] == "RuntimeError"
    assert bad.status.status_code == StatusCode.ERROR


def test_processor_events(otel: Otel) -> None:
    run_sim(otel)
    [run] = otel.named("invoke_agent")
    events = [e for e in run.events if e.name == "pipeline.processor"]
    effects = [(dict(e.attributes or {})["pipeline.effect"]) for e in events]
    assert effects == ["Continue", "Abort", "Continue"]  # the tool step, the retry, the answer
    abort_attrs = dict(events[1].attributes or {})
    assert abort_attrs["pipeline.processor.id"] == "quality-guardrail"
    assert abort_attrs["pipeline.processor.hook"] == "process_output_step"
    assert str(abort_attrs["pipeline.tripwire.reason"]).startswith("Response quality too low")
    assert abort_attrs["pipeline.tripwire.retry"] is True
    assert abort_attrs["pipeline.retry_count"] == 1
    waits = [e for e in run.events if e.name == "pipeline.retry.wait"]
    assert len(waits) == 1 and dict(waits[0].attributes or {})["pipeline.retry.seconds"] == 2.0


def test_a_tripped_run_carries_its_tripwire(otel: Otel) -> None:
    class Block(Processor):
        id = "block"

        def process_output_step(self, args: OutputStepArgs[None]) -> OutputStepResult[None]:
            abort("blocked: off topic")

    a = Agent.create("anthropic/claude-sonnet-4-5", output_processors=[Block()])
    Simulator(ScriptedModel([Say("x")]), observers=[otel.observer]).run(a, "hi")
    [run] = otel.named("invoke_agent")
    attrs = dict(run.attributes or {})
    assert attrs["pipeline.status"] == "tripped"
    assert attrs["gen_ai.provider.name"] == "anthropic"
    assert attrs["pipeline.tripwire.reason"] == "blocked: off topic"
    assert attrs["pipeline.tripwire.processor_id"] == "block"
    [event] = [e for e in run.events if e.name == "pipeline.processor"]
    ea = dict(event.attributes or {})
    assert ea["pipeline.effect"] == "Abort"
    assert ea["pipeline.processor.id"] == "block"
    assert ea["pipeline.tripwire.reason"] == "blocked: off topic"


def test_a_failed_run_is_an_error(otel: Otel) -> None:
    a = Agent.create("m")
    Simulator(ScriptedModel([Fail(status=400, message="bad")]), observers=[otel.observer]).run(
        a, "hi")
    [run] = otel.named("invoke_agent")
    assert run.status.status_code == StatusCode.ERROR
    assert dict(run.attributes or {})["error.type"] == "ApiFailed"
    assert "gen_ai.provider.name" not in dict(run.attributes or {})  # unknown provider


def test_metrics(otel: Otel) -> None:
    run_sim(otel)
    tokens = otel.points("gen_ai.client.token.usage")
    by_type = {dict(p.attributes or {})["gen_ai.token.type"]: p for p in tokens
               if dict(p.attributes or {})["gen_ai.request.model"] == "gpt-4o-mini"}
    assert by_type["input"].sum == 11 + 10 + 40 and by_type["input"].count == 3
    assert by_type["output"].sum == 3 + 1 + 6
    pa = dict(by_type["input"].attributes or {})
    assert pa["gen_ai.operation.name"] == "chat"
    assert pa["gen_ai.provider.name"] == "openai"
    assert pa["gen_ai.response.model"] == "gpt-4o-mini"
    durations = otel.points("gen_ai.client.operation.duration")
    ok = [p for p in durations if "error.type" not in dict(p.attributes or {})]
    err = [p for p in durations if dict(p.attributes or {}).get("error.type") == "429"]
    assert sum(p.count for p in ok) == 3
    assert sum(p.sum for p in ok) == pytest.approx(1.0 + 1.0 + 2.0)  # virtual seconds
    assert err and err[0].count == 1 and err[0].sum == pytest.approx(0.5)


def test_no_content_unless_asked(otel: Otel) -> None:
    run_sim(otel)
    dump = repr([(s.attributes, [e.attributes for e in s.events]) for s in otel.spans()])
    assert SECRET not in dump and "sunny" not in dump and "Paris" not in dump


def test_content_when_asked() -> None:
    otel = Otel()
    otel.observer.content = True
    run_sim(otel)
    [run] = otel.named("invoke_agent")
    assert SECRET in str(dict(run.attributes or {})["gen_ai.input.messages"])
    answer = otel.named("chat gpt-4o-mini")[-1]
    assert "It is sunny in Paris." in str(dict(answer.attributes or {})["gen_ai.output.messages"])
    ok = otel.named("execute_tool")[0]
    assert dict(ok.attributes or {})["gen_ai.tool.call.result"] == '"sunny"'


def test_async_simulator_gives_the_same_spans() -> None:
    sync, aio = Otel(), Otel()
    run_sim(sync)

    async def main() -> None:
        sim = AsyncSimulator(script(), models={"openai/judge": judge()},
                             observers=[aio.observer], start=START, price=flat,
                             run_ids=numbered_run_ids())
        await sim.run(agent(), f"Weather? {SECRET}", thread_id="thread-7")

    anyio.run(main)

    def shape(o: Otel) -> list[object]:
        return [(s.name, s.start_time, s.end_time, dict(s.attributes or {}),
                 [(e.name, e.timestamp, dict(e.attributes or {})) for e in s.events])
                for s in o.spans()]

    assert shape(aio) == shape(sync)


def test_a_replay_gives_the_recorded_spans() -> None:
    rec, live, replayed = Recorder(), Otel(), Otel()
    sim = Simulator(script(), models={"openai/judge": judge()},
                    observers=[rec, live.observer], start=START)
    sim.run(agent(), "Weather?")
    Simulator.replay(rec.last(), agent(), observers=[replayed.observer])
    names = [s.name for s in live.spans()]
    assert [s.name for s in replayed.spans()] == names
    assert [dict(s.attributes or {}) for s in replayed.spans()] == [
        dict(s.attributes or {}) for s in live.spans()]


def test_the_sync_interpreter_traces_with_real_time(otel: Otel) -> None:
    model = ScriptedModel([Say("hello there")])
    SyncInterpreter(model, observers=[otel.observer]).run(Agent.create("openai/gpt-4o"), "hi")
    [chat] = otel.named("chat")
    assert chat.start_time is not None and chat.end_time is not None
    assert chat.end_time >= chat.start_time
    assert dict(chat.attributes or {})["gen_ai.usage.input_tokens"] == 10


def test_judge_calls_started_without_waiting_have_their_spans(otel: Otel) -> None:
    # ModerationProcessor starts a judge call per window of the stream (effects.started):
    # each gets its chat span, from its start to its collect, with its usage.
    from pipeline.processors import ModerationProcessor

    verdict = '{"category_scores": {"hate": 0.0}}'
    model = ScriptedModel([Say(["one two ", "three four ", "five six"], chunk_latency=0.5)])
    judge = ScriptedModel(lambda request: Say(verdict, usage=Usage(7, 2), latency=1.0))
    sim = Simulator(model, models={"openai/judge": judge}, observers=[otel.observer],
                    start=START)
    guard = ModerationProcessor("openai/judge", categories=["hate"], stream_window=10)
    r = sim.run(Agent.create("openai/gpt-4o-mini", output_processors=[guard]), "hi").result
    assert r.status == "finished" and r.text == "one two three four five six"
    spans = otel.named("chat judge")
    assert len(spans) == len(r.judges) >= 3
    for span in spans:
        a = dict(span.attributes or {})
        assert a["gen_ai.usage.input_tokens"] == 7 and a["gen_ai.usage.output_tokens"] == 2
        assert a["pipeline.processor.id"] == "moderation"
        assert (span.end_time or 0) > (span.start_time or 0)


def _team() -> tuple[Agent, dict[str, ScriptedModel]]:
    research = Agent.create("sim/research", name="research", tools=[weather])
    writer = Agent.create("sim/writer", name="writer")
    lead = Agent.create("sim/lead", name="lead", tools=[research, writer])
    models = {
        "sim/lead": ScriptedModel([
            Say(calls=[call("research", input="Paris?"), call("writer", input="a poem")],
                usage=Usage(5, 2)),
            Say("Sunny, and a poem.", usage=Usage(7, 3)),
        ]),
        "sim/research": ScriptedModel([Say(calls=[call("weather", city="Paris")],
                                           usage=Usage(11, 1)),
                                       Say("sunny", usage=Usage(13, 1))]),
        "sim/writer": ScriptedModel([Say("roses", usage=Usage(17, 4))]),
    }
    return lead, models


@pytest.mark.parametrize("backend", ["sync", "asyncio", "trio"])
def test_a_child_runs_span_hangs_under_its_parents_tool_call_with_its_agents_usage(
    backend: str,
) -> None:
    otel = Otel()
    lead, models = _team()
    if backend == "sync":
        r = Simulator(models["sim/lead"], models=models, observers=[otel.observer],
                      start=START).run(lead, "Weather and a poem").result
    else:
        async def main() -> RunResult:
            sim = AsyncSimulator(models["sim/lead"], models=models,
                                 observers=[otel.observer], start=START)
            return (await sim.run(lead, "Weather and a poem")).result
        r = anyio.run(main, backend=backend)
    assert r.status == "finished"
    by_name = {s.name: s for s in otel.spans()}
    root = by_name["invoke_agent lead"]
    assert root.parent is None
    for agent_name in ("research", "writer"):
        span = by_name[f"invoke_agent {agent_name}"]
        call_span = next(s for s in otel.named("execute_tool")
                         if s.attributes and s.attributes["gen_ai.tool.name"] == agent_name)
        assert span.parent is not None and span.parent.span_id == call_span.context.span_id
        assert call_span.parent is not None
        assert call_span.parent.span_id == root.context.span_id
        assert dict(span.attributes or {})["gen_ai.agent.name"] == agent_name
    research = by_name["invoke_agent research"]
    weather_span = by_name["execute_tool weather"]  # the child's own tool, under its run
    assert weather_span.parent is not None
    assert weather_span.parent.span_id == research.context.span_id
    a = dict(research.attributes or {})
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (24, 2)
    assert a["pipeline.parent.run_id"] == dict(root.attributes or {})["pipeline.run_id"]
    b = dict(root.attributes or {})  # the tree's usage, and the lead's own
    assert (b["gen_ai.usage.input_tokens"], b["gen_ai.usage.output_tokens"]) == (
        5 + 7 + 24 + 17, 2 + 3 + 2 + 4)
    assert (b["pipeline.own_usage.input_tokens"], b["pipeline.own_usage.output_tokens"]) == (
        12, 5)
