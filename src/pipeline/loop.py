"""The agent loop: a pure state machine that yields commands and is sent their replies.

`agent_loop(...)` returns a generator. An interpreter drives it:

    cmd = next(gen)
    while not isinstance(cmd, Finish):
        cmd = gen.send(reply_to(cmd))      # or gen.throw(exc) when carrying it out failed

To cancel a run, an interpreter throws `RunCancelled(reason)` in at the pending command
(`cmd = gen.throw(RunCancelled("timeout"))`): the loop then yields only `Publish` and
`Finish`, so it finishes with no further I/O (see `RunCancelled`).

Nothing here does I/O or reads a clock: ids come from `Ids`, time from the `clock`
the interpreter hands in. So one agent, input and model script always give one run.

Order of a run: process_input once; then per step: process_input_step (+ prepare_step
last), the model call (transient failures retried by the RetryPolicy, rejections offered
to process_api_error), every streamed chunk through process_output_stream,
process_output_step (which may discard the response and retry), tools; finally
process_output_result. See DESIGN.md for the contract.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from types import GeneratorType
from typing import TypeVar, cast, overload

import msgspec

from effects import (
    Abort,
    AwaitHook,
    CallModel,
    Continue,
    Finish,
    Perform,
    Publish,
    Pull,
    Replace,
    Retry,
    RunTools,
    Skip,
    Sleep,
)
from pipeline.agent import Agent
from pipeline.chunks import (
    Chunk,
    DataChunk,
    ErrorChunk,
    FinishReason,
    ModelFinish,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    SourceChunk,
    StepFinish,
    StepStart,
    TextDelta,
    TextEnd,
    TextStart,
    ToolCall,
    ToolCallDelta,
    ToolError,
    ToolResult,
    Tripwire,
    Usage,
)
from pipeline.chunks import Finish as FinishChunk
from pipeline.hooks import Bound, HookFailure, Outcome, bind, call, check, invoke, settle
from pipeline.messages import (
    DataPart,
    JsonObject,
    Message,
    MessageList,
    Part,
    ReasoningPart,
    SourcePart,
    SystemMessage,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from pipeline.model import (
    ApiError,
    ModelEnded,
    ModelFailed,
    ModelRequest,
    ModelSettings,
    StructuredOutput,
    ToolChoice,
)
from pipeline.processor import (
    ApiErrorArgs,
    BaseProcessor,
    InputArgs,
    InputStepArgs,
    OutputResultArgs,
    OutputStepArgs,
    RunContext,
    StepChange,
    StreamArgs,
    TripWire,
)
from pipeline.result import (
    ApiFailed,
    Cancelled,
    OutputResult,
    ProcessorFailed,
    RunError,
    RunResult,
    StepResult,
    StreamFailed,
)
from pipeline.tools import Tool, ToolSpec

_T = TypeVar("_T")


class ToolInvocation(msgspec.Struct, frozen=True):
    """A tool call the interpreter should run: `kwargs` are validated, or `error` says why not."""

    call: ToolCallPart
    tool: Tool | None
    kwargs: dict[str, object] | None
    error: str | None = None


class ToolOutcome(msgspec.Struct, frozen=True):
    """An interpreter's reply for one ToolInvocation."""

    tool_call_id: str
    result: object
    is_error: bool = False


ModelReply = (
    TextStart
    | TextDelta
    | TextEnd
    | ReasoningStart
    | ReasoningDelta
    | ReasoningEnd
    | ToolCallDelta
    | ToolCall
    | SourceChunk
    | DataChunk
    | ModelFinish
    | ModelFailed
    | ModelEnded
)
"""What an interpreter sends in reply to CallModel and Pull."""

LoopCommand = (
    CallModel[ModelRequest]
    | Pull[Chunk]
    | Publish[Chunk]
    | RunTools[ToolInvocation]
    | Perform[object]
    | AwaitHook
    | Sleep
    | Finish[RunResult]
)
AgentLoop = Generator[LoopCommand, object, RunResult]


class EffectRecord(msgspec.Struct, frozen=True):
    """One processor decision, for traces."""

    processor_id: str
    hook: str
    effect: object


Recorder = Callable[[EffectRecord], None]


class Ids:
    """Deterministic ids for one run: `<run_id>-<kind><n>`."""

    __slots__ = ("_n", "_run")

    def __init__(self, run_id: str) -> None:
        self._run = run_id
        self._n = 0

    def next(self, kind: str) -> str:
        self._n += 1
        return f"{self._run}-{kind}{self._n}"


class _Seen(msgspec.Struct, frozen=True, eq=False):
    """An immutable view of the first `n` chunks of an append-only list: O(1) to make.

    A Struct (made in C, about half the cost of a Python `__init__`, and it is made once
    per chunk per stream processor) registered as a `Sequence`; `_view` is its typed
    constructor.
    """

    _items: list[Chunk]
    _n: int

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> Chunk: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Chunk]: ...
    def __getitem__(self, i: int | slice) -> Chunk | Sequence[Chunk]:
        if isinstance(i, slice):
            return tuple(self._items[: self._n][i])
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(i)
        return self._items[i]

    def __iter__(self) -> Iterator[Chunk]:
        items = self._items
        for k in range(self._n):
            yield items[k]

    def __reversed__(self) -> Iterator[Chunk]:
        items = self._items
        for k in range(self._n - 1, -1, -1):
            yield items[k]

    def __contains__(self, value: object) -> bool:
        return any(c is value or c == value for c in self)

    def index(self, value: object, start: int = 0, stop: int | None = None) -> int:
        seen = tuple(self._items[: self._n])
        return seen.index(value, start, len(seen) if stop is None else stop)

    def count(self, value: object) -> int:
        return tuple(self._items[: self._n]).count(value)

    def __repr__(self) -> str:
        return f"stream_parts({self._items[: self._n]!r})"


Sequence.register(_Seen)
_view = cast(Callable[[list[Chunk], int], Sequence[Chunk]], _Seen)
"""`_Seen(items, n)`, typed as the Sequence it is."""


class _Tripped(Exception):
    def __init__(self, tripwire: Tripwire) -> None:
        self.tripwire = tripwire


class _Failed(Exception):
    def __init__(self, error: RunError) -> None:
        self.error = error


class RunCancelled(BaseException):
    """Thrown into the loop by an interpreter (`gen.throw`) to cancel the run.

    A BaseException, like GeneratorExit, so no hook's `except Exception` swallows it.
    The loop runs no more hooks: it finishes with status "cancelled" and a `Cancelled`
    error; text streamed so far is kept in a message marked `incomplete` (without its
    tool calls); every tool call of the response still without a result (tools not run
    yet, or in flight) gets an error result, streamed as a tool-error chunk too.
    """

    def __init__(self, reason: str = "cancelled") -> None:
        super().__init__(reason)
        self.reason = reason


class _StepContent:
    """What one model response has delivered so far (after the stream processors)."""

    __slots__ = ("finish", "parts", "reasoning", "renamed", "sources", "texts", "tool_calls")

    def __init__(self) -> None:
        # Parts in arrival order; text/reasoning accumulate in lists joined at the end.
        self.parts: list[list[str] | ToolCallPart | SourcePart | DataPart | ReasoningPart] = []
        self.texts: dict[str, list[str]] = {}
        self.reasoning: dict[str, tuple[int, list[str]]] = {}
        self.tool_calls: list[ToolCallPart] = []
        # Ids the model reused within this response -> the fresh id its open call got.
        self.renamed: dict[str, str] = {}
        self.sources = 0
        self.finish: ModelFinish | None = None

    def add(self, c: Chunk) -> None:
        t = type(c)
        if t is TextDelta:
            assert isinstance(c, TextDelta)
            buf = self.texts.get(c.id)
            if buf is None:
                buf = self.texts[c.id] = []
                self.parts.append(buf)
            buf.append(c.text)
        elif t is ReasoningDelta or t is ReasoningEnd:
            assert isinstance(c, ReasoningDelta | ReasoningEnd)
            entry = self.reasoning.get(c.id)
            if entry is None:
                entry = self.reasoning[c.id] = (len(self.parts), [])
                self.parts.append(ReasoningPart(""))
            if isinstance(c, ReasoningDelta):
                entry[1].append(c.text)
            else:
                self.parts[entry[0]] = ReasoningPart("", c.signature, c.redacted)
        elif t is ToolCall:
            assert isinstance(c, ToolCall)
            part = ToolCallPart(c.tool_call_id, c.tool_name, c.args)
            self.tool_calls.append(part)
            self.parts.append(part)
        elif t is SourceChunk:
            assert isinstance(c, SourceChunk)
            self.parts.append(SourcePart(c.source_id, c.url, c.title))
            self.sources += 1
        elif t is DataChunk:
            assert isinstance(c, DataChunk)
            if not c.transient:
                self.parts.append(DataPart(c.name, c.data))

    def message_parts(self, *, complete: bool) -> tuple[Part, ...]:
        """The assistant message's parts; a broken stream keeps no tool call."""
        reasoning_at = (
            {idx: "".join(buf) for idx, buf in self.reasoning.values()} if self.reasoning else {}
        )
        out: list[Part] = []
        for i, p in enumerate(self.parts):
            # Exact types (this class made every part): `type(p) is` costs less than a
            # failing isinstance against a Struct class (its metaclass is asked).
            if isinstance(p, list):
                out.append(TextPart("".join(p)))
            elif type(p) is ReasoningPart:
                assert isinstance(p, ReasoningPart)
                out.append(ReasoningPart(reasoning_at[i], p.signature, p.redacted))
            elif type(p) is ToolCallPart and not complete:
                continue
            else:
                out.append(p)
        return tuple(out)

    @property
    def text(self) -> str:
        # `texts` holds the same buffers as `parts`, in the same (arrival) order.
        return "".join("".join(buf) for buf in self.texts.values()) if self.texts else ""

    @property
    def reasoning_text(self) -> str:
        if not self.reasoning:
            return ""
        return "".join("".join(buf) for _, buf in self.reasoning.values())


class _StepConfig(msgspec.Struct, frozen=True, kw_only=True):
    model: str
    tool_choice: ToolChoice
    active_tools: tuple[str, ...] | None
    tools: tuple[Tool, ...]
    system: tuple[SystemMessage, ...]
    provider_options: JsonObject | None
    model_settings: ModelSettings
    structured_output: StructuredOutput | None


_NON_PROCESSED = (Tripwire, ErrorChunk)


def agent_loop(
    agent: Agent,
    messages: MessageList,
    *,
    context: RunContext,
    clock: Callable[[], float] = lambda: 0.0,
    record: Recorder | None = None,
) -> AgentLoop:
    """The run of `agent` on `messages`, as a command generator. See the module doc."""
    return _Run(agent, messages, context, clock, record).run()


class _Run:
    """One run's state. Only `run()` is a generator; helpers that yield are sub-generators."""

    def __init__(
        self,
        agent: Agent,
        messages: MessageList,
        context: RunContext,
        clock: Callable[[], float],
        record: Recorder | None,
    ) -> None:
        self.agent = agent
        self.ctx = context
        self.clock = clock
        self.record = record
        self.ids = Ids(context.run_id)
        procs = agent.all_processors()
        slots = {id(p): i for i, p in enumerate(procs)}
        self.states: list[object] = [p.initial_state() for p in procs]
        self.h_input = bind(agent.input_processors, "process_input", slots)
        self.h_input_step = bind(agent.input_processors, "process_input_step", slots)
        self.h_error = bind(agent.error_processors, "process_api_error", slots)
        self.h_stream = bind(agent.output_processors, "process_output_stream", slots)
        self.h_output_step = bind(agent.output_processors, "process_output_step", slots)
        self.h_result = bind(agent.output_processors, "process_output_result", slots)
        if agent.prepare_step is not None:
            prep = BaseProcessor()
            prep.id = "prepare_step"
            self.states.append(None)
            self.h_input_step += (
                Bound(prep, "prepare_step", "process_input_step", agent.prepare_step,
                      len(self.states) - 1, False),
            )
        self.stream_io = any(
            inspect.iscoroutinefunction(b.fn) or inspect.isgeneratorfunction(b.fn)
            for b in self.h_stream
        )
        # Every chunk each stream processor has seen (its stream_parts), append-only.
        self.seen: list[list[Chunk]] = [[] for _ in self.h_stream]
        # While every stream hook has seen the very same chunks (none was skipped, replaced
        # or held back from a later one), they share one list, so one view per chunk and,
        # for equal states, one args value; the first divergence splits it (`_unshare`).
        self.shared: list[Chunk] | None = [] if self.h_stream and not self.stream_io else None
        # What the per-chunk hot path needs of each stream hook, unpacked once.
        self.stream_plan = tuple((b, b.fn, b.slot, b.data_parts) for b in self.h_stream)
        self.data_all = all(b.data_parts for b in self.h_stream)
        self.data_any = any(b.data_parts for b in self.h_stream)
        # An input with its own system messages (say, a previous run's result.messages,
        # which already holds the instructions) keeps them; otherwise the agent's apply.
        self.ml = messages if messages.system else messages.with_system(agent.instructions)
        if "response" in self.ml.sources:
            # A previous run's answer is this run's memory: `response` (the result's text,
            # what process_output_result sees and may drop) is only what this run adds.
            self.ml = MessageList(
                self.ml.messages,
                tuple("memory" if s == "response" else s for s in self.ml.sources),
                self.ml.system,
            )
        self.steps: list[StepResult] = []
        self._steps_t: tuple[StepResult, ...] = ()
        # Made from the step's tools, kept while the step's tools are the same tuple.
        self._specs_of: tuple[Tool, ...] | None = None
        self._specs: tuple[ToolSpec, ...] = ()
        self._by_name_of: tuple[Tool, ...] | None = None
        self._by_name: dict[str, Tool] = {}
        self.usage = Usage()
        self.retry_count = 0
        self.api_retry_count = 0
        self.finish_reason: FinishReason = "stop"
        self.pending: list[Chunk] = []
        """Chunks processed but not yet handed to the interpreter."""

    # --- helpers -----------------------------------------------------------------------
    def _apply(self, b: Bound, o: Outcome) -> object:
        """Keep state and emits of a hook outcome; return its effect (tripwire on Abort)."""
        if o.changed_state:
            self.states[b.slot] = o.state
        if o.emit:
            self.pending.extend(o.emit)
        if self.record is not None:
            self.record(EffectRecord(b.processor_id, b.hook, o.effect))
        return o.effect

    def _trip(self, b: Bound, a: Abort) -> _Tripped:
        return _Tripped(Tripwire(a.reason, a.retry, b.processor_id, a.metadata))

    def _steps_tuple(self) -> tuple[StepResult, ...]:
        """The steps so far as the tuple hooks see: made once per step, not once per hook."""
        if len(self._steps_t) != len(self.steps):
            self._steps_t = tuple(self.steps)
        return self._steps_t

    # --- the run ---------------------------------------------------------------------------
    def run(self) -> AgentLoop:
        status_error: RunError | None = None
        tripwire: Tripwire | None = None
        try:
            yield from self._process_input()
            base_system = self.ml.system
            step = 0
            while step < self.agent.max_steps:
                more = yield from self._step(step, base_system)
                if more is None:  # the step was discarded by a processor retry: run it again
                    continue
                step += 1
                if not more:
                    break
            yield from self._process_output_result()
            # Inside the try: a stream processor may abort (or fail) on the finish chunk too.
            yield from self._stream_through([FinishChunk(self.finish_reason, self.usage)])
        except _Tripped as t:
            tripwire = t.tripwire
        except _Failed as f:
            status_error = f.error
        except HookFailure as h:
            status_error = ProcessorFailed(h.processor_id, h.hook, h.error_type, h.message)
        except RunCancelled as c:
            status_error = Cancelled(c.reason)
            self._answer_dangling_calls(c.reason)

        if tripwire is not None:
            self.finish_reason = "tripwire"
            self.pending.append(tripwire)
            status = "tripped"
        elif status_error is not None:
            cancelled = isinstance(status_error, Cancelled)
            self.finish_reason = "cancelled" if cancelled else "error"
            self.pending.append(ErrorChunk(type(status_error).__name__, str(status_error)))
            status = "cancelled" if cancelled else "failed"
        else:
            status = "finished"
        result = RunResult(
            status=status,  # type: ignore[arg-type]
            text=_response_text(self.ml),
            messages=self.ml,
            steps=self._steps_tuple(),
            usage=self.usage,
            finish_reason=self.finish_reason,
            tripwire=tripwire,
            error=status_error,
            retry_count=self.retry_count,
            api_error_retry_count=self.api_retry_count,
        )
        if self.pending:
            yield Publish(tuple(self.pending))
            self.pending = []
        yield Finish(result)
        return result

    def _process_input(self) -> Generator[LoopCommand, object, None]:
        for b in self.h_input:
            args = InputArgs(
                system_messages=self.ml.system,
                message_list=self.ml,
                state=self.states[b.slot],
                retry_count=0,
                context=self.ctx,
            )
            eff = self._apply(b, (yield from call(b, args)))
            if isinstance(eff, Abort):
                raise self._trip(b, eff)
            if isinstance(eff, Replace):
                self.ml = eff.value

    def _input_step(
        self, step: int, base_system: tuple[SystemMessage, ...]
    ) -> Generator[LoopCommand, object, _StepConfig]:
        a = self.agent
        cfg = _StepConfig(
            model=a.model,
            tool_choice=a.tool_choice,
            active_tools=None,
            tools=a.tools,
            system=base_system,  # reset every step: step changes last one step only
            provider_options=a.provider_options,
            model_settings=a.model_settings,
            structured_output=a.structured_output,
        )
        record = self.record
        steps = self._steps_tuple() if self.h_input_step else ()
        for b in self.h_input_step:
            args = InputStepArgs(
                message_list=self.ml,
                step_number=step,
                steps=steps,
                system_messages=cfg.system,
                model=cfg.model,
                tool_choice=cfg.tool_choice,
                active_tools=cfg.active_tools,
                tools=cfg.tools,
                provider_options=cfg.provider_options,
                model_settings=cfg.model_settings,
                structured_output=cfg.structured_output,
                state=self.states[b.slot],
                retry_count=self.retry_count,
                context=self.ctx,
            )
            raw = invoke(b, args)
            if raw.__class__ is Continue and record is None:
                continue  # a pass-through: nothing to check, keep or record
            eff = self._apply(b, (yield from settle(b, raw)))
            if isinstance(eff, Abort):
                raise self._trip(b, eff)
            if isinstance(eff, Replace):
                ch: StepChange = eff.value
                if ch.message_list is not None:
                    self.ml = ch.message_list
                cfg = msgspec.structs.replace(
                    cfg,
                    model=_or(ch.model, cfg.model),
                    tool_choice=_or(ch.tool_choice, cfg.tool_choice),
                    active_tools=_or(ch.active_tools, cfg.active_tools),
                    tools=_or(ch.tools, cfg.tools),
                    system=_or(ch.system_messages, cfg.system),
                    provider_options=_or(ch.provider_options, cfg.provider_options),
                    model_settings=_or(ch.model_settings, cfg.model_settings),
                    structured_output=_or(ch.structured_output, cfg.structured_output),
                )
        return cfg

    @staticmethod
    def _step_tools(cfg: _StepConfig) -> tuple[Tool, ...]:
        """The tools of this step: `tools` narrowed to `active_tools` when set."""
        if cfg.active_tools is None:
            return cfg.tools
        active = frozenset(cfg.active_tools)
        return tuple(t for t in cfg.tools if t.name in active)

    def _request(self, cfg: _StepConfig) -> ModelRequest:
        tools = self._step_tools(cfg)
        if tools is not self._specs_of:  # the same tools step after step: specs made once
            self._specs_of, self._specs = tools, tuple(t.spec for t in tools)
        return ModelRequest(
            model=cfg.model,
            system=cfg.system,
            messages=self.ml.messages,
            tools=self._specs,
            tool_choice=cfg.tool_choice,
            model_settings=cfg.model_settings,
            provider_options=cfg.provider_options,
            structured_output=cfg.structured_output,
        )

    def _step(
        self, step: int, base_system: tuple[SystemMessage, ...]
    ) -> Generator[LoopCommand, object, bool | None]:
        """One step. Returns whether to continue (tools ran), or None to rerun it."""
        cfg = yield from self._input_step(step, base_system)
        yield from self._stream_through([StepStart(step)])
        content, first_reply = yield from self._call_model(step, cfg)
        yield from self._consume(step, content, first_reply)
        fin = content.finish
        assert fin is not None
        # Every response the model sent was billed, also one a processor discards.
        self.usage = self.usage + fin.usage
        response_id = self.ids.next("msg")
        response = Message(
            id=response_id,
            role="assistant",
            parts=content.message_parts(complete=True),
            created_at=self.clock(),
            thread_id=self.ctx.thread_id,
            resource_id=self.ctx.resource_id,
        )
        before = self.ml
        self.ml = added = self.ml.add(response, "response") if response.parts else self.ml
        try:
            keep = yield from self._output_step(step, cfg, content, fin, before)
        except HookFailure:
            self.ml = before  # fail closed: a response whose check crashed is not kept
            raise
        if not keep:
            return None
        self.finish_reason = fin.finish_reason
        # Tools run for the calls still present in the (possibly replaced) response.
        if self.ml is added and response.parts:  # no processor replaced the messages
            kept: Message | None = response
            calls = tuple(content.tool_calls)
        else:
            kept = next((m for m in reversed(self.ml.messages) if m.id == response_id), None)
            calls = kept.tool_calls() if kept is not None else ()
        results: tuple[ToolResultPart, ...] = ()
        if calls:
            results = yield from self._run_tools(calls, self._step_tools(cfg))
        self.steps.append(
            StepResult(
                step_number=step,
                model=cfg.model,
                text=content.text,
                reasoning=content.reasoning_text,
                tool_calls=calls,
                tool_results=results,
                sources=(
                    tuple(p for p in response.parts if isinstance(p, SourcePart))
                    if content.sources else ()
                ),
                finish_reason=fin.finish_reason,
                usage=fin.usage,
            )
        )
        yield from self._stream_through([StepFinish(step, fin.finish_reason, fin.usage)])
        return bool(calls)

    def _output_step(
        self,
        step: int,
        cfg: _StepConfig,
        content: _StepContent,
        fin: ModelFinish,
        before: MessageList,
    ) -> Generator[LoopCommand, object, bool]:
        """process_output_step over the response just added: False when a processor
        discarded it for a retry (the feedback is then added after `before`)."""
        if self.h_output_step:
            record = self.record
            steps = self._steps_tuple()
            tool_calls = tuple(content.tool_calls)
            text = content.text
        for b in self.h_output_step:
            args = OutputStepArgs(
                message_list=self.ml,
                step_number=step,
                steps=steps,
                finish_reason=fin.finish_reason,
                tool_calls=tool_calls,
                text=text,
                system_messages=cfg.system,
                state=self.states[b.slot],
                retry_count=self.retry_count,
                context=self.ctx,
            )
            raw = invoke(b, args)
            if raw.__class__ is Continue and record is None:
                continue  # a pass-through: nothing to check, keep or record
            eff = self._apply(b, (yield from settle(b, raw)))
            if isinstance(eff, Abort):
                if eff.retry and self.retry_count < self.agent.max_processor_retries:
                    self.retry_count += 1
                    feedback = Message(
                        id=self.ids.next("feedback"),
                        role="user",
                        parts=(TextPart(eff.reason),),
                        created_at=self.clock(),
                        thread_id=self.ctx.thread_id,
                        resource_id=self.ctx.resource_id,
                        metadata={"feedback_from": b.processor_id, "retry": self.retry_count},
                    )
                    # Feedback goes after the conversation so a prompt cache stays valid.
                    self.ml = before.add(feedback, "context")
                    yield from self._stream_through(
                        [DataChunk("data-step-discarded", {
                            "step_number": step,
                            "processor_id": b.processor_id,
                            "reason": eff.reason,
                            "retry_count": self.retry_count,
                        }, transient=True)]
                    )
                    return False
                self.ml = before  # a blocked response is not kept (as in output_result)
                raise self._trip(b, eff)
            if isinstance(eff, Replace):
                self.ml = eff.value
        return True

    def _call_model(
        self, step: int, cfg: _StepConfig
    ) -> Generator[LoopCommand, object, tuple[_StepContent, object]]:
        """Call the model until it starts streaming, retrying what may be retried."""
        transient = 0
        attempts = 0
        while True:
            request = self._request(cfg)
            attempts += 1
            publish = tuple(self.pending)
            self.pending = []
            if publish:
                yield Publish(publish)
            reply = yield CallModel(request, step, attempts - 1)
            if not isinstance(reply, ModelFailed):
                return _StepContent(), reply
            err = reply.error
            policy = self.agent.retry_policy
            if err.retryable:
                if transient < policy.max_retries:
                    delay = policy.delay(transient, f"{self.ctx.run_id}:{step}", err.retry_after)
                    transient += 1
                    yield Sleep(delay, f"retrying after {err}")
                    continue
                raise _Failed(ApiFailed(step, err, attempts))
            recovered = yield from self._api_error(step, err)
            if not recovered:
                raise _Failed(ApiFailed(step, err, attempts))

    def _api_error(self, step: int, err: ApiError) -> Generator[LoopCommand, object, bool]:
        """Offer a rejection to the error processors; the first Retry wins."""
        if self.api_retry_count >= self.agent.max_api_error_retries:
            return False
        for b in self.h_error:
            args = ApiErrorArgs(
                error=err,
                message_list=self.ml,
                step_number=step,
                steps=self._steps_tuple(),
                state=self.states[b.slot],
                retry_count=self.api_retry_count,
                context=self.ctx,
            )
            eff = self._apply(b, (yield from call(b, args)))
            if isinstance(eff, Abort):
                raise self._trip(b, eff)
            if isinstance(eff, Retry):
                if eff.value is not None:
                    self.ml = eff.value
                self.api_retry_count += 1
                return True
        return False

    def _consume(
        self, step: int, content: _StepContent, reply: object
    ) -> Generator[LoopCommand, object, None]:
        """Run the model's stream through the stream processors until ModelFinish."""
        stream = self.h_stream
        io = self.stream_io
        try:
            while True:
                t = type(reply)
                if t is ModelFinish:
                    assert isinstance(reply, ModelFinish)
                    content.finish = reply
                    return
                if t is ModelFailed or t is ModelEnded:
                    self._keep_partial(content)
                    err = reply.error if isinstance(reply, ModelFailed) else None
                    msg = (
                        str(err) if err is not None else "stream ended before the model finished"
                    )
                    raise _Failed(StreamFailed(step, msg, err))
                if t is ToolCall or t is ToolCallDelta:
                    reply = self._unique_call(reply, content)  # type: ignore[arg-type]
                if io:
                    yield from self._process_chunk_io(reply, content)  # type: ignore[arg-type]
                elif stream:
                    self._process_chunk(reply, content)  # type: ignore[arg-type]
                elif not self.pending:  # no stream hooks, nothing else to hand out first
                    content.add(reply)  # type: ignore[arg-type]
                    reply = yield Pull((reply,))  # type: ignore[arg-type]
                    continue
                else:
                    self._deliver(reply, content)  # type: ignore[arg-type]
                out = tuple(self.pending)
                self.pending = []
                reply = yield Pull(out)
        except (RunCancelled, HookFailure):
            # Cancelled, or a stream processor crashed: what already passed every processor
            # is kept, marked incomplete (the crashing chunk and later ones are not).
            self._keep_partial(content)
            raise

    def _unique_call(
        self, call: ToolCall | ToolCallDelta, content: _StepContent
    ) -> ToolCall | ToolCallDelta:
        """A call with an empty id, or one this response already used, gets a fresh id,
        its deltas too: results are matched to calls by id (some servers send `call_0`
        for every call)."""
        cid = call.tool_call_id
        fresh = content.renamed.get(cid)
        if fresh is None:
            if cid and all(c.tool_call_id != cid for c in content.tool_calls):
                return call
            fresh = content.renamed[cid] = self.ids.next("call")
        if isinstance(call, ToolCall):
            del content.renamed[cid]  # the call is complete: a later reuse is a new call
            return ToolCall(fresh, call.tool_name, call.args)
        return ToolCallDelta(fresh, call.tool_name, call.args_delta)

    def _answer_dangling_calls(self, reason: str) -> None:
        """On cancel: an error result for each tool call of the response without one."""
        response = self.ml.response
        answered = {p.tool_call_id for m in response for p in m.tool_results()}
        parts = tuple(
            ToolResultPart(c.tool_call_id, c.tool_name, f"tool call cancelled: {reason}", True)
            for m in response
            for c in m.tool_calls()
            if c.tool_call_id not in answered
        )
        if parts:
            self.ml = self.ml.add(
                Message(
                    id=self.ids.next("msg"),
                    role="tool",
                    parts=parts,
                    created_at=self.clock(),
                    thread_id=self.ctx.thread_id,
                    resource_id=self.ctx.resource_id,
                ),
                "response",
            )
            self.pending.extend(
                ToolError(p.tool_call_id, p.tool_name, str(p.result)) for p in parts
            )

    def _keep_partial(self, content: _StepContent) -> None:
        """A broken stream: keep what arrived, marked incomplete, with no tool call."""
        parts = content.message_parts(complete=False)
        if parts:
            self.ml = self.ml.add(
                Message(
                    id=self.ids.next("msg"),
                    role="assistant",
                    parts=parts,
                    created_at=self.clock(),
                    thread_id=self.ctx.thread_id,
                    resource_id=self.ctx.resource_id,
                    incomplete=True,
                ),
                "response",
            )

    def _stream_args(self, i: int, b: Bound, chunk: Chunk) -> StreamArgs[object]:
        seen = self.seen[i]
        seen.append(chunk)
        return StreamArgs(
            part=chunk,
            stream_parts=_view(seen, len(seen)),
            state=self.states[b.slot],
            message_list=self.ml,
            context=self.ctx,
        )

    def _stream_effect(
        self, b: Bound, o: Outcome, chunk: Chunk, content: _StepContent | None
    ) -> Chunk | None:
        """Apply one stream hook's outcome: the chunk to pass on, or None when skipped.

        Chunks a stream hook emits while a model response streams belong to that response:
        kept in its message unless transient.
        """
        eff = self._apply(b, o)
        if content is not None:
            for c in o.emit:
                content.add(c)
        if isinstance(eff, Abort):
            raise self._trip(b, eff)
        if isinstance(eff, Skip):
            return None
        if isinstance(eff, Replace):
            return eff.value  # type: ignore[no-any-return]
        return chunk

    def _deliver(self, chunk: Chunk, content: _StepContent | None) -> None:
        if content is not None:
            content.add(chunk)
        self.pending.append(chunk)

    def _process_chunk(self, chunk: Chunk, content: _StepContent | None) -> None:
        """One chunk through every stream processor: the per-chunk hot path.

        Used when every stream hook is a plain function. While the hooks share what they
        have seen, a pass-through Continue costs one call: the view of the shared list and
        the args value (for hooks whose states are the same object) are made once.
        """
        shared = self.shared
        if shared is None:
            self._walk(chunk, content, 0)
            return
        if type(chunk) is DataChunk and not self.data_all:
            if not self.data_any:  # no stream hook sees data chunks: it passes as it is
                self._deliver(chunk, content)
                return
            self._unshare(0, appended=False)  # some hooks see it, some do not
            self._walk(chunk, content, 0)
            return
        shared.append(chunk)
        view = _view(shared, len(shared))
        ml, ctx, states, record = self.ml, self.ctx, self.states, self.record
        plan = self.stream_plan
        args: StreamArgs[object] | None = None
        last_state: object = None
        for i, (b, fn, slot, _) in enumerate(plan):
            state = states[slot]
            if args is None or state is not last_state:
                args = StreamArgs(
                    part=chunk, stream_parts=view, state=state, message_list=ml, context=ctx
                )
                last_state = state
            try:
                raw = fn(args)
            except TripWire as t:
                raw = Abort(t.reason, t.retry, t.metadata)
            except Exception as e:
                raise HookFailure(b.processor_id, b.hook, type(e).__name__, str(e)) from e
            if raw.__class__ is Continue and record is None:
                continue
            _refuse_io(b, raw)
            passed = self._stream_effect(b, check(b, raw), chunk, content)
            if passed is chunk:
                continue
            if i + 1 < len(plan):  # the later hooks see something else (or nothing)
                self._unshare(i + 1, appended=True)
                if passed is not None:
                    self._walk(passed, content, i + 1)
                return
            if passed is None:
                return
            chunk = passed
        self._deliver(chunk, content)

    def _unshare(self, upto: int, *, appended: bool) -> None:
        """Give each stream hook its own list of what it has seen, from the shared one.

        Hooks before `upto` have seen all of the shared list; when `appended`, the others
        have not seen its last chunk (skipped or replaced before it reached them). Views
        already handed out stay valid: nothing is ever removed from a list.
        """
        shared = self.shared
        assert shared is not None
        lists: list[list[Chunk]] = []
        for k in range(len(self.stream_plan)):
            full = k < upto or not appended
            if k == 0 and full:
                lists.append(shared)
            else:
                lists.append(shared[:] if full else shared[:-1])
        self.seen = lists
        self.shared = None

    def _walk(self, chunk: Chunk, content: _StepContent | None, start: int) -> None:
        """`_process_chunk` from hook `start` on, each hook with its own list."""
        ml, ctx, states, record, lists = self.ml, self.ctx, self.states, self.record, self.seen
        plan = self.stream_plan
        is_data = type(chunk) is DataChunk
        for i in range(start, len(plan)):
            b, fn, slot, data_parts = plan[i]
            if is_data and not data_parts:
                continue
            seen = lists[i]
            seen.append(chunk)
            try:
                raw = fn(StreamArgs(
                    part=chunk, stream_parts=_view(seen, len(seen)), state=states[slot],
                    message_list=ml, context=ctx,
                ))
            except TripWire as t:
                raw = Abort(t.reason, t.retry, t.metadata)
            except Exception as e:
                raise HookFailure(b.processor_id, b.hook, type(e).__name__, str(e)) from e
            if raw.__class__ is Continue and record is None:
                continue
            _refuse_io(b, raw)
            passed = self._stream_effect(b, check(b, raw), chunk, content)
            if passed is None:
                return
            chunk = passed
            is_data = type(chunk) is DataChunk
        self._deliver(chunk, content)

    def _process_chunk_io(
        self, chunk: Chunk, content: _StepContent | None
    ) -> Generator[LoopCommand, object, None]:
        """Like `_process_chunk`, for stream hooks that are async or ask for I/O."""
        for i, b in enumerate(self.h_stream):
            if type(chunk) is DataChunk and not b.data_parts:
                continue
            o = yield from call(b, self._stream_args(i, b, chunk))
            passed = self._stream_effect(b, o, chunk, content)
            if passed is None:
                return
            chunk = passed
        self._deliver(chunk, content)

    def _stream_through(self, chunks: list[Chunk]) -> Iterable[LoopCommand]:
        """Loop-made chunks (step start/finish, tool results, finish) through the processors.

        Use as `yield from`. Only stream hooks that may do I/O need a generator; otherwise
        the chunks go through at once (before the `yield from`) and nothing is yielded.
        """
        if self.stream_io:
            return self._stream_through_io(chunks)
        if self.h_stream:
            for c in chunks:
                self._process_chunk(c, None)
        else:
            self.pending.extend(chunks)
        return ()

    def _stream_through_io(self, chunks: list[Chunk]) -> Generator[LoopCommand, object, None]:
        for c in chunks:
            yield from self._process_chunk_io(c, None)

    def _run_tools(
        self, calls: tuple[ToolCallPart, ...], tools: tuple[Tool, ...]
    ) -> Generator[LoopCommand, object, tuple[ToolResultPart, ...]]:
        if tools is not self._by_name_of:
            self._by_name_of, self._by_name = tools, {t.name: t for t in tools}
        by_name = self._by_name
        invocations: list[ToolInvocation] = []
        for c in calls:
            t = by_name.get(c.tool_name)
            if t is None:
                invocations.append(ToolInvocation(c, None, None, f"unknown tool {c.tool_name!r}"))
                continue
            try:
                invocations.append(ToolInvocation(c, t, t.bind(c.args)))
            except (msgspec.ValidationError, TypeError) as e:
                invocations.append(
                    ToolInvocation(c, t, None, f"invalid arguments for {c.tool_name!r}: {e}")
                )
        publish = tuple(self.pending)
        self.pending = []
        if publish:
            yield Publish(publish)
        reply = yield RunTools(tuple(invocations))
        outcomes = _check_outcomes(reply, calls)
        parts = tuple(
            ToolResultPart(c.tool_call_id, c.tool_name, o.result, o.is_error)
            for c, o in zip(calls, outcomes, strict=True)
        )
        self.ml = self.ml.add(
            Message(
                id=self.ids.next("msg"),
                role="tool",
                parts=parts,
                created_at=self.clock(),
                thread_id=self.ctx.thread_id,
                resource_id=self.ctx.resource_id,
            ),
            "response",
        )
        yield from self._stream_through(
            [
                ToolError(p.tool_call_id, p.tool_name, str(p.result))
                if p.is_error
                else ToolResult(p.tool_call_id, p.tool_name, p.result)
                for p in parts
            ]
        )
        return parts

    def _process_output_result(self) -> Generator[LoopCommand, object, None]:
        if not self.h_result:
            return
        for b in self.h_result:
            result = OutputResult(
                text=_response_text(self.ml),
                usage=self.usage,
                finish_reason=self.finish_reason,
                steps=self._steps_tuple(),
            )
            args = OutputResultArgs(
                messages=self.ml.response,
                message_list=self.ml,
                result=result,
                state=self.states[b.slot],
                context=self.ctx,
            )
            try:
                eff = self._apply(b, (yield from call(b, args)))
            except HookFailure:
                self._drop_response()  # fail closed, as for a block
                raise
            if isinstance(eff, Abort):
                self._drop_response()  # the blocked response is not kept
                raise self._trip(b, eff)
            if isinstance(eff, Replace):
                self.ml = eff.value

    def _drop_response(self) -> None:
        """Remove what this run added to the conversation."""
        ml = self.ml
        self.ml = ml.replace_messages(
            (m for m, s in zip(ml.messages, ml.sources, strict=True) if s != "response"),
            "input",
        )


def _refuse_io(b: Bound, raw: object) -> None:
    """A plain stream hook that returned an awaitable or a generator is a processor error."""
    if isinstance(raw, GeneratorType) or inspect.isawaitable(raw):
        raise HookFailure(
            b.processor_id, b.hook, "InvalidEffect",
            "returned an awaitable or generator from a plain function; "
            "declare the hook `async def` or as a generator function",
        )


def _or(new: _T | None, old: _T) -> _T:
    return old if new is None else new


def _response_text(ml: MessageList) -> str:
    """The text of the response's assistant messages, in order.

    Counting the response messages is a C-level scan; they are then looked for from the
    end, where the loop adds them, so a long prior history costs next to nothing.
    """
    msgs, sources = ml.messages, ml.sources
    left = sources.count("response")
    texts: list[str] = []
    i = len(sources)
    while left:
        i -= 1
        if sources[i] == "response":
            left -= 1
            m = msgs[i]
            if m.role == "assistant":
                texts.append(m.text)
    return "".join(reversed(texts))


def _check_outcomes(reply: object, calls: tuple[ToolCallPart, ...]) -> tuple[ToolOutcome, ...]:
    if not isinstance(reply, tuple) or len(reply) != len(calls):
        raise TypeError("interpreter bug: RunTools needs one ToolOutcome per call, in order")
    for o, c in zip(reply, calls, strict=True):
        if not isinstance(o, ToolOutcome) or o.tool_call_id != c.tool_call_id:
            raise TypeError("interpreter bug: RunTools outcomes out of order")
    return reply
