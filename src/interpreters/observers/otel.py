"""OpenTelemetry traces and metrics for runs, after the GenAI semantic conventions.

An optional extra (`pip install "pipeline-agents[otel]"`): this module needs only
`opentelemetry-api`; the application brings the SDK and its exporters.

    interp = SyncInterpreter(resolve=Resolver(), observers=[OTelObserver()])

Spans (times from the interpreter's clock, so the simulator's spans carry virtual time):
- `invoke_agent {agent name}` per run: agent name, the request model and provider, the
  conversation (thread) id, total usage and cost, the run's status and finish reason;
  an error status for a failed run; the tripwire (reason, processor id) of a tripped one.
  A child run (an agent called as a tool, a handoff: `docs/agents.md`) is a child of its
  parent's `execute_tool` span, with its parent's run and call ids
  (`pipeline.parent.run_id`, `pipeline.parent.tool_call_id`); a run with children has
  the tree's usage and cost (as `RunResult.usage`) and its own model calls' usage apart
  (`pipeline.own_usage.input_tokens`, `..._output_tokens`);
- `chat {model}` per model call, a child of the run's span: provider, request model and
  settings, response model and id, finish reasons, input/output/reasoning/cached tokens,
  the call's cost, and `error.type` for a failed call; also for a judge model a processor
  asks (`AskModel`);
- `execute_tool {name}` per tool call: tool name, call id, type, and `error.type` when the
  tool failed. The calls of one step are carried out as one command (concurrently under
  the async interpreter), so their spans share that command's start and end;
- an event `pipeline.processor` per processor hook with the effect it returned
  (processor id, hook, effect; the tripwire reason on an Abort; the retry count on a
  retry), on the model call's span while its stream runs, else on the run's; the
  `Continue`s of `process_output_stream` (one per chunk) only with `stream_effects=True`;
- an event `pipeline.retry.wait` before a transient failure is retried.

Metrics: `gen_ai.client.token.usage` (input and output tokens per call) and
`gen_ai.client.operation.duration` (seconds per model call), with the conventions'
attributes. Message content (the request's messages, the answer, tool arguments and
results) is recorded only with `content=True`. A model call's answer and a tool's result
are then what the caller received of them, after the output processors (a PII guard's
redaction, a replaced tool result), not what the model or the tool first produced: those
spans get their content once the run hands it out, ended at their own time. A request's
messages are what the model was sent, with the results of the run's own tools as the
caller received them (the model may read them as the tools returned them); a judge's
request (`AskModel`) is recorded as sent.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Sequence

import msgspec
from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from effects import (
    Abort,
    AwaitHook,
    CallModel,
    Continue,
    Perform,
    Publish,
    Pull,
    Retry,
    RunTools,
    Sleep,
)
from effects.started import Collect, Start
from interpreters.observers.observe import RunInfo, RunObserver
from interpreters.providers.codec import put_given
from interpreters.providers.table import ROUTES, split_model
from pipeline.processor import AskModel, ModelAnswer
from pipeline.protocol import EffectRecord, LoopCommand, RunCancelled, ToolInvocation, ToolOutcome
from pipeline.values.chunks import (
    Chunk,
    Finish,
    ModelFinish,
    StepFinish,
    StepStart,
    TextDelta,
    ToolError,
    ToolResult,
    Usage,
)
from pipeline.values.cost import Cost, PriceQuery, Pricer, charge
from pipeline.values.fallback import CircuitStates
from pipeline.values.messages import Message, Part, ToolResultPart
from pipeline.values.model import ModelEnded, ModelFailed, ModelRequest
from pipeline.values.result import RunResult

SCOPE = "pipeline-agents"

TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304,
                 16777216, 67108864)
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24,
                    20.48, 40.96, 81.92)

Attrs = dict[str, str | bool | int | float | Sequence[str]]

RECENT_RUNS = 1024
"""How many runs' span contexts an `OTelObserver` keeps (`span_context`)."""


class OTelObserver:
    """Traces each run (and records its metrics) through the OpenTelemetry API.

    `tracer_provider` and `meter_provider` default to the global ones. `content=True`
    records message content too. A run's pricer (`price=` on the interpreter) also
    prices the spans; `price` here prices them when the run has none.
    """

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        content: bool = False,
        stream_effects: bool = False,
        price: Pricer | None = None,
    ) -> None:
        self.tracer = trace.get_tracer(SCOPE, tracer_provider=tracer_provider)
        meter = metrics.get_meter(SCOPE, meter_provider=meter_provider)
        self.tokens = meter.create_histogram(
            "gen_ai.client.token.usage", unit="{token}",
            description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration", unit="s",
            description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.content = content
        self.stream_effects = stream_effects
        self.price = price
        self._runs: OrderedDict[str, trace.SpanContext] = OrderedDict()
        self._runs_lock = threading.Lock()
        self._calls: dict[tuple[str, str], Span] = {}
        """The tool-call spans open now, by run id and call id: a child run's span hangs
        under the one of the call that runs it (`RunInfo.parent_call_id`)."""

    def start(self, run: RunInfo) -> RunObserver:
        spans = _RunSpans(self, run)
        with self._runs_lock:
            self._runs[run.run_id] = spans.agent_span.get_span_context()
            self._runs.move_to_end(run.run_id)
            while len(self._runs) > RECENT_RUNS:
                self._runs.popitem(last=False)
        return spans

    def span_context(self, run_id: str) -> trace.SpanContext | None:
        """The span context of a recent run's `invoke_agent` span (the last
        `RECENT_RUNS`), for spans added to it after it ended (an online score's)."""
        with self._runs_lock:
            return self._runs.get(run_id)


def _ns(seconds: float) -> int:
    return round(seconds * 1e9)


def provider_of(model: str) -> tuple[str | None, str]:
    """`gen_ai.provider.name` (None when unknown) and `gen_ai.request.model` of a model id:
    the name is its route's `otel_name` in the table of routes."""
    route, name = split_model(model)
    return (ROUTES[route].otel_name if route is not None else None), name


def _model_attrs(model: str) -> Attrs:
    provider, name = provider_of(model)
    attrs: Attrs = {"gen_ai.request.model": name}
    if provider is not None:
        attrs["gen_ai.provider.name"] = provider
    return attrs


def _json(value: object) -> str:
    return msgspec.json.encode(value, enc_hook=repr).decode()


class _Chat:
    """One open model call: its span and what it has delivered so far."""

    __slots__ = ("attrs", "model", "span", "started", "text")

    def __init__(self, span: Span, model: str, attrs: Attrs, started: float) -> None:
        self.span = span
        self.model = model
        self.attrs = attrs
        self.started = started
        self.text: list[str] = []


class _Answered:
    """A finished model call whose answer is still reaching the caller (`content=True`):
    what the output processors held back comes out after the model's finish."""

    __slots__ = ("end_ns", "finish_reason", "span", "text")

    def __init__(self, span: Span, end_ns: int, finish_reason: str, text: list[str]) -> None:
        self.span = span
        self.end_ns = end_ns
        self.finish_reason = finish_reason
        self.text = text


class _RunSpans(RunObserver):
    def __init__(self, o: OTelObserver, run: RunInfo) -> None:
        self.o = o
        self.run = run
        self.price = run.price or o.price
        agent = run.agent
        attrs: Attrs = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent.name,
            "pipeline.run_id": run.run_id,
            **_model_attrs(agent.model),
        }
        if run.thread_id is not None:
            attrs["gen_ai.conversation.id"] = run.thread_id
        if o.content:
            attrs["gen_ai.input.messages"] = _json(run.messages.messages)
            if run.messages.system or agent.instructions:
                attrs["gen_ai.system_instructions"] = _json(
                    run.messages.system or agent.instructions)
        within = None
        if run.parent_run_id is not None and run.parent_call_id is not None:
            attrs["pipeline.parent.run_id"] = run.parent_run_id
            attrs["pipeline.parent.tool_call_id"] = run.parent_call_id
            call_span = o._calls.get((run.parent_run_id, run.parent_call_id))
            if call_span is not None:  # a child run: under its parent's tool call
                within = trace.set_span_in_context(call_span, otel_context.get_current())
        self.agent_span = o.tracer.start_span(
            f"invoke_agent {agent.name}", context=within, kind=SpanKind.INTERNAL,
            attributes=attrs, start_time=_ns(run.started_at),
        )
        self.parent = trace.set_span_in_context(self.agent_span, otel_context.get_current())
        self.chat: _Chat | None = None
        self.answered: _Answered | None = None
        self.tools: list[tuple[Span, ToolInvocation]] = []
        # Tool spans (content=True) waiting for the result the caller receives, by call id.
        self.tool_results: dict[str, tuple[Span, int]] = {}
        # (content=True) The calls this run's tools ran, and what the caller received of
        # each result: a later request's messages are exported with it in their place.
        self.ran: set[str] = set()
        self.received: dict[str, ToolResultPart] = {}
        self.judge: Span | None = None
        self.started: dict[int, Span] = {}
        """Judge calls started without waiting (`effects.started`), by ticket: a span
        from the start to the collect."""
        self.retries = 0
        self.api_retries = 0
        self.cost: Cost | None = None
        self.cost_known = self.price is not None

    # --- model calls ----------------------------------------------------------------------
    def _open_chat(
        self, request: ModelRequest, at: float, extra: Attrs, judge: str | None = None
    ) -> Span:
        attrs: Attrs = {"gen_ai.operation.name": "chat", **_model_attrs(request.model), **extra}
        s = request.model_settings
        put_given(attrs, (
            ("gen_ai.request.temperature", s.temperature),
            ("gen_ai.request.max_tokens", s.max_tokens), ("gen_ai.request.top_p", s.top_p),
            ("gen_ai.request.seed", s.seed), ("gen_ai.request.stop_sequences", s.stop or None),
        ))
        if self.o.content:
            attrs["gen_ai.input.messages"] = _json(
                self._as_received(request.messages) if judge is None else request.messages)
            if request.system:
                attrs["gen_ai.system_instructions"] = _json(request.system)
        name = attrs["gen_ai.request.model"]
        return self.o.tracer.start_span(
            f"chat {name}", context=self.parent, kind=SpanKind.CLIENT, attributes=attrs,
            start_time=_ns(at),
        )

    def _as_received(self, messages: tuple[Message, ...]) -> tuple[Message, ...]:
        """A request's messages with each result of this run's tools as the caller
        received it (the model reads what the tool returned); one the caller never got
        (a processor dropped it) is exported as withheld."""
        ran = self.ran
        if not ran:
            return messages

        def part(p: Part) -> Part:
            if not isinstance(p, ToolResultPart) or p.tool_call_id not in ran:
                return p
            got = self.received.get(p.tool_call_id)
            return got if got is not None else ToolResultPart(
                p.tool_call_id, p.tool_name, "tool result withheld: not passed on", True)

        return tuple(
            m.with_parts(part(p) for p in m.parts)
            if m.role == "tool" else m
            for m in messages
        )

    def _metric_attrs(self, chat: _Chat) -> Attrs:
        keep = ("gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model",
                "gen_ai.response.model")
        return {k: v for k, v in chat.attrs.items() if k in keep}

    def _finish_chat(self, fin: ModelFinish, at: float) -> None:
        chat = self.chat
        if chat is None:
            return
        self.chat = None
        span = chat.span
        _, name = provider_of(chat.model)
        chat.attrs["gen_ai.response.model"] = fin.model_id or name
        u = fin.usage
        attrs: Attrs = {
            "gen_ai.response.model": fin.model_id or name,
            "gen_ai.response.finish_reasons": (fin.finish_reason,),
            "gen_ai.usage.input_tokens": u.input_tokens,
            "gen_ai.usage.output_tokens": u.output_tokens,
        }
        if fin.response_id is not None:
            attrs["gen_ai.response.id"] = fin.response_id
        _usage_details(attrs, u)
        cost = self._price(chat.model, fin.model_id, fin.usage, at)
        if cost is not None:
            attrs["operation.cost"] = float(cost.total)
        span.set_attributes(attrs)
        if self.o.content:  # the answer, once the caller has it all (`_handed`)
            self._close_answer()
            self.answered = _Answered(span, _ns(at), fin.finish_reason, chat.text)
        else:
            span.end(end_time=_ns(at))
        metric = self._metric_attrs(chat)
        self.o.tokens.record(u.input_tokens, {**metric, "gen_ai.token.type": "input"})
        self.o.tokens.record(u.output_tokens, {**metric, "gen_ai.token.type": "output"})
        self.o.duration.record(max(0.0, at - chat.started), metric)

    def _fail_chat(self, error_type: str, message: str, at: float) -> None:
        chat = self.chat
        if chat is None:
            return
        self.chat = None
        chat.span.set_attribute("error.type", error_type)
        chat.span.set_status(Status(StatusCode.ERROR, message))
        chat.span.end(end_time=_ns(at))
        self.o.duration.record(
            max(0.0, at - chat.started), {**self._metric_attrs(chat), "error.type": error_type}
        )

    def _price(
        self, model: str, response_model: str | None, usage: Usage, at: float
    ) -> Cost | None:
        c, self.cost, self.cost_known = charge(
            self.price, PriceQuery(model, response_model, usage, at), self.cost, self.cost_known
        )
        return c

    def _handed(self, chunks: tuple[Chunk, ...]) -> None:
        """Chunks the run hands to the caller (`content=True`): the answer's text, the
        tool results, as the output processors passed them on."""
        for c in chunks:
            t = type(c)
            if t is TextDelta:
                assert isinstance(c, TextDelta)
                if self.chat is not None:
                    self.chat.text.append(c.text)
                elif self.answered is not None:
                    self.answered.text.append(c.text)
            elif t is ToolResult or t is ToolError:
                assert isinstance(c, ToolResult | ToolError)
                self.received[c.tool_call_id] = (
                    ToolResultPart(c.tool_call_id, c.tool_name, c.result, False)
                    if isinstance(c, ToolResult)
                    else ToolResultPart(c.tool_call_id, c.tool_name, c.error, True)
                )
                waiting = self.tool_results.pop(c.tool_call_id, None)
                if waiting is not None:
                    span, end_ns = waiting
                    span.set_attribute("gen_ai.tool.call.result", _json(
                        c.result if isinstance(c, ToolResult) else c.error))
                    span.end(end_time=end_ns)
            elif t is StepFinish or t is StepStart or t is Finish:
                self._close_answer()  # the step's answer is all out

    def _close_answer(self) -> None:
        a = self.answered
        if a is None:
            return
        self.answered = None
        a.span.set_attribute("gen_ai.output.messages", _json([{
            "role": "assistant", "parts": [{"type": "text", "content": "".join(a.text)}],
            "finish_reason": a.finish_reason,
        }]))
        a.span.end(end_time=a.end_ns)

    def _close_waiting(self) -> None:
        """End what still waits for content: a result the caller never got is not
        exported (a processor dropped it, or the run ended first)."""
        self._close_answer()
        waiting, self.tool_results = self.tool_results, {}
        for span, end_ns in waiting.values():
            span.end(end_time=end_ns)

    def _model_reply(self, reply: object, at: float) -> None:
        t = type(reply)
        if t is ModelFinish:
            assert isinstance(reply, ModelFinish)
            self._finish_chat(reply, at)
        elif t is ModelFailed:
            assert isinstance(reply, ModelFailed)
            err = reply.error
            kind = err.error_type or (str(err.status) if err.status is not None else "connection")
            self._fail_chat(kind, str(err), at)
        elif t is ModelEnded:
            self._fail_chat("stream-ended", "the stream ended before the model finished", at)

    # --- the observer ---------------------------------------------------------------------
    def command(self, cmd: LoopCommand, at: float) -> None:
        t = type(cmd)
        if t is Pull:
            if self.o.content:
                assert isinstance(cmd, Pull)
                self._handed(cmd.publish)
            return
        if t is Publish and self.o.content:
            assert isinstance(cmd, Publish)
            self._handed(cmd.chunks)
        if self.chat is not None and t is not Perform and t is not AwaitHook:
            # The stream was closed before its end: CloseStream (a processor stopped the
            # run) or a cancel, after which the loop's next command is a Publish or Done.
            self._fail_chat("stream-closed", "the stream was closed before it finished", at)
        if isinstance(cmd, CallModel):
            self._close_waiting()
            self.chat = _Chat(
                self._open_chat(cmd.request, at, {
                    "pipeline.step": cmd.step_number, "pipeline.attempt": cmd.attempt,
                }),
                cmd.request.model, _model_attrs(cmd.request.model) | {
                    "gen_ai.operation.name": "chat"}, at,
            )
        elif isinstance(cmd, RunTools):
            if self.o.content:
                self.ran.update(inv.call.tool_call_id for inv in cmd.calls)
            for inv in cmd.calls:
                attrs: Attrs = {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": inv.call.tool_name,
                    "gen_ai.tool.call.id": inv.call.tool_call_id,
                    "gen_ai.tool.type": "function",
                }
                if inv.tool is not None and inv.tool.spec.description:
                    attrs["gen_ai.tool.description"] = inv.tool.spec.description
                if self.o.content:
                    attrs["gen_ai.tool.call.arguments"] = _json(inv.call.args)
                span = self.o.tracer.start_span(
                    f"execute_tool {inv.call.tool_name}", context=self.parent,
                    kind=SpanKind.INTERNAL, attributes=attrs, start_time=_ns(at),
                )
                self.tools.append((span, inv))
                if inv.child is not None:
                    self.o._calls[(self.run.run_id, inv.call.tool_call_id)] = span
        elif isinstance(cmd, Perform) and isinstance(_asked(cmd.request), AskModel):
            asked = _asked(cmd.request)
            assert isinstance(asked, AskModel)
            if type(cmd.request) is Collect:  # the span opened at its start
                self.judge = self.started.pop(cmd.request.job.ticket, None)
                return
            self.judge = self._open_chat(asked.request, at, {
                "pipeline.processor.id": cmd.processor_id, "pipeline.processor.hook": cmd.hook,
            }, judge=cmd.processor_id)
        elif isinstance(cmd, Sleep):
            self.agent_span.add_event("pipeline.retry.wait", {
                "pipeline.retry.seconds": cmd.seconds, "pipeline.retry.reason": cmd.reason,
            }, timestamp=_ns(at))

    def reply(self, cmd: LoopCommand, reply: object, at: float) -> None:
        t = type(cmd)
        if t is Pull or t is CallModel:
            self._model_reply(reply, at)
        elif t is RunTools and isinstance(reply, tuple):
            self._end_tools(reply, None, at)
        elif t is Perform and type(reply) is CircuitStates:
            assert isinstance(reply, CircuitStates)
            if reply.open or reply.watched:  # the breaker's state, as the step saw it
                self.agent_span.add_event("pipeline.circuit", {
                    "pipeline.circuit.open": list(reply.open),
                    "pipeline.circuit.failing": list(reply.watched),
                }, timestamp=_ns(at))
        elif t is Perform and self.judge is not None:
            span, self.judge = self.judge, None
            asked = _asked(cmd.request) if isinstance(cmd, Perform) else None
            if isinstance(cmd, Perform) and type(cmd.request) is Start and type(reply) is int:
                self.started[reply] = span  # in flight: it ends at its collect
                return
            if isinstance(reply, ModelAnswer) and isinstance(asked, AskModel):
                self._judge_usage(span, asked.request.model, reply, at)
            if self.o.content and isinstance(reply, ModelAnswer):
                span.set_attribute("gen_ai.output.messages", _json([{
                    "role": "assistant", "parts": [{"type": "text", "content": reply.text}]}]))
            span.end(end_time=_ns(at))

    def _judge_usage(self, span: Span, model: str, answer: ModelAnswer, at: float) -> None:
        """A judge call's usage and cost on its own `chat` span (and in the metrics), as a
        call of the agent's has them."""
        _, name = provider_of(model)
        u = answer.usage
        attrs: Attrs = {
            "gen_ai.response.model": answer.response_model or name,
            "gen_ai.usage.input_tokens": u.input_tokens,
            "gen_ai.usage.output_tokens": u.output_tokens,
        }
        _usage_details(attrs, u)
        cost = self._price(model, answer.response_model, u, at)
        if cost is not None:
            attrs["operation.cost"] = float(cost.total)
        span.set_attributes(attrs)
        metric: Attrs = {"gen_ai.operation.name": "chat", **_model_attrs(model),
                         "gen_ai.response.model": answer.response_model or name}
        self.o.tokens.record(u.input_tokens, {**metric, "gen_ai.token.type": "input"})
        self.o.tokens.record(u.output_tokens, {**metric, "gen_ai.token.type": "output"})

    def _end_tools(
        self, outcomes: tuple[object, ...], error: BaseException | None, at: float
    ) -> None:
        by_id = {o.tool_call_id: o for o in outcomes if isinstance(o, ToolOutcome)}
        for span, inv in self.tools:
            if inv.child is not None:
                self.o._calls.pop((self.run.run_id, inv.call.tool_call_id), None)
            o = by_id.get(inv.call.tool_call_id)
            if error is not None or o is None:
                kind = type(error).__name__ if error is not None else "no-result"
                span.set_attribute("error.type", kind)
                span.set_status(Status(StatusCode.ERROR, kind))
            elif o.is_error:
                kind = _error_type(o.result)
                span.set_attribute("error.type", kind)
                span.set_status(Status(StatusCode.ERROR, kind))
            if o is not None and error is None and self.o.content:
                # the result as the caller receives it, after the stream processors
                self.tool_results[inv.call.tool_call_id] = (span, _ns(at))
                continue
            span.end(end_time=_ns(at))
        self.tools = []

    def failed(self, cmd: LoopCommand, error: BaseException, at: float) -> None:
        if isinstance(error, RunCancelled):
            self.agent_span.add_event("pipeline.cancelled", {"pipeline.cancel.reason":
                                                             error.reason}, timestamp=_ns(at))
        kind = type(error).__name__
        if isinstance(cmd, RunTools):
            self._end_tools((), error, at)
        elif isinstance(cmd, Perform) and self.judge is not None:
            span, self.judge = self.judge, None
            span.set_attribute("error.type", kind)
            span.set_status(Status(StatusCode.ERROR, kind))
            span.end(end_time=_ns(at))
        elif self.chat is not None and isinstance(error, RunCancelled):
            self._fail_chat("cancelled", error.reason, at)

    def effect(self, record: EffectRecord, at: float) -> None:
        e = record.effect
        if (
            not self.o.stream_effects and record.hook == "process_output_stream"
            and e.__class__ is Continue
        ):
            return
        attrs: Attrs = {
            "pipeline.processor.id": record.processor_id,
            "pipeline.processor.hook": record.hook,
            "pipeline.effect": type(e).__name__,
        }
        if isinstance(e, Abort):
            attrs["pipeline.tripwire.reason"] = e.reason
            attrs["pipeline.tripwire.retry"] = e.retry
            if (
                e.retry and record.hook == "process_output_step"
                and self.retries < self.run.agent.max_processor_retries
            ):
                self.retries += 1
                attrs["pipeline.retry_count"] = self.retries
        elif isinstance(e, Retry):
            self.api_retries += 1
            attrs["pipeline.api_error_retry_count"] = self.api_retries
        span = self.chat.span if self.chat is not None else self.agent_span
        span.add_event("pipeline.processor", attrs, timestamp=_ns(at))

    def end(self, result: RunResult | None, at: float) -> None:
        if self.chat is not None:
            self._fail_chat("stream-closed", "the run ended during the stream", at)
        if self.tools:
            self._end_tools((), RuntimeError("the run ended"), at)
        if self.judge is not None:
            self.judge.end(end_time=_ns(at))
            self.judge = None
        for started in self.started.values():  # never collected: the run dropped them
            started.end(end_time=_ns(at))
        self.started.clear()
        self._close_waiting()
        span = self.agent_span
        if result is None:
            span.set_attribute("pipeline.status", "closed")
            span.set_status(Status(StatusCode.ERROR, "closed before the run finished"))
            span.end(end_time=_ns(at))
            return
        u = result.usage
        attrs: Attrs = {
            "pipeline.status": result.status,
            "gen_ai.response.finish_reasons": (result.finish_reason,),
            "gen_ai.usage.input_tokens": u.input_tokens,
            "gen_ai.usage.output_tokens": u.output_tokens,
            "pipeline.steps": len(result.steps),
            "pipeline.retry_count": result.retry_count,
        }
        if u.reasoning_tokens:
            attrs["gen_ai.usage.reasoning.output_tokens"] = u.reasoning_tokens
        if result.children:  # the usage above is the tree's; the agent's own apart
            own = result.usage_by_agent()["own"]
            attrs["pipeline.own_usage.input_tokens"] = own.input_tokens
            attrs["pipeline.own_usage.output_tokens"] = own.output_tokens
            attrs["pipeline.children"] = len(result.children)
        if result.judges:  # the judges' own spans carry theirs; here, their sum
            ju = result.judge_usage
            attrs["pipeline.judges.calls"] = len(result.judges)
            attrs["pipeline.judges.usage.input_tokens"] = ju.input_tokens
            attrs["pipeline.judges.usage.output_tokens"] = ju.output_tokens
        if result.unmetered_calls:
            attrs["pipeline.unmetered_calls"] = result.unmetered_calls
        cost = result.cost if result.cost is not None else (
            self.cost if self.cost_known else None)
        if cost is not None:
            attrs["operation.cost"] = float(cost.total)
        if result.tripwire is not None:
            attrs["pipeline.tripwire.reason"] = result.tripwire.reason
            attrs["pipeline.tripwire.processor_id"] = result.tripwire.processor_id
        if self.o.content:
            attrs["gen_ai.output.messages"] = json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": result.text}]}])
        span.set_attributes(attrs)
        if result.status == "failed" and result.error is not None:
            span.set_attribute("error.type", type(result.error).__name__)
            span.set_status(Status(StatusCode.ERROR, str(result.error)))
        span.end(end_time=_ns(at))


def _error_type(result: object) -> str:
    """A tool error's type: the exception's name (`RuntimeError: ...`), else generic."""
    head = str(result).split(":", 1)[0]
    return head if head.isidentifier() else "tool_error"


__all__ = ["OTelObserver", "provider_of"]


def _usage_details(attrs: Attrs, u: Usage) -> None:
    """The usage counts beyond input and output, where there are any."""
    if u.reasoning_tokens:
        attrs["gen_ai.usage.reasoning.output_tokens"] = u.reasoning_tokens
    if u.cached_input_tokens:
        attrs["gen_ai.usage.cache_read.input_tokens"] = u.cached_input_tokens
    if u.cache_write_tokens:
        attrs["gen_ai.usage.cache_creation.input_tokens"] = u.cache_write_tokens


def _asked(request: object) -> object:
    """The request a `Perform` carries, or the one a started job carries out."""
    if type(request) is Start:
        assert isinstance(request, Start)
        return request.request
    if type(request) is Collect:
        assert isinstance(request, Collect)
        return request.job.request
    return request
