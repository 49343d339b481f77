"""Processors: the ten hooks, their arguments, and the effects each may return.

A processor is a class deriving from `Processor` (stateless) or `StatefulProcessor[S]`,
overriding the hooks it needs, or a set of plain functions given to `processor(...)`.
A hook receives a frozen snapshot (its `...Args`) and returns an effect, or
`Out(effect, state, emit)` to also update its state or emit `data-*` chunks.

The per-hook result aliases below are the whole contract: an override returning an
effect its hook does not allow is a mypy error (and a `ProcessorFailed` at run time).
A hook may also be `async def` (async interpreter only) or a generator that yields
I/O requests (`AskModel`, or your own: an `effects.Request[R]`) and receives their
answers (`answer = yield from ask(request)` types them).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from types import UnionType
from typing import (
    Any,
    Generic,
    Literal,
    NoReturn,
    TypeAlias,
    TypedDict,
    TypeVar,
    Union,
    get_args,
    get_origin,
    overload,
)

import msgspec
from typing_extensions import TypeVar as DefaultTypeVar
from typing_extensions import Unpack

from effects import (
    Abort,
    AskApproval,
    Continue,
    Emit,
    Out,
    Replace,
    Request,
    Retry,
    Skip,
    SkipCall,
)
from pipeline.tools import Tool
from pipeline.values.chunks import Chunk, DataChunk, FinishReason, Usage
from pipeline.values.context import RunContext, Seen
from pipeline.values.fallback import Fallback
from pipeline.values.messages import JsonObject, Message, MessageList, SystemMessage, ToolCallPart
from pipeline.values.model import (
    ApiError,
    ModelRequest,
    ModelSettings,
    StructuredOutput,
    ToolChoice,
)
from pipeline.values.result import OutputResult, Spending, StepResult

S = TypeVar("S")
R = TypeVar("R")
D = TypeVar("D")
Needs = DefaultTypeVar("Needs", contravariant=True, default=object)
"""The deps a processor reads: `Processor[Db]` fits an `Agent[Db, ...]` (or one whose deps
extend Db); a processor of `object` fits any agent."""
HookDeps = DefaultTypeVar("HookDeps", default=object)
"""`processor(...)`'s deps: what its functions' args say (`InputArgs[None, Db]`), else any."""

HookName = Literal[
    "process_input",
    "process_input_step",
    "process_api_error",
    "process_output_stream",
    "process_output_step",
    "process_output_result",
    "flush_output_stream",
    "process_tool_call",
    "process_tool_result",
    "process_approved",
]
HOOKS: tuple[HookName, ...] = get_args(HookName)
"""The hooks of the contract: the six around the model, `flush_output_stream` (the
companion of `process_output_stream` for processors that hold chunks back, see
`FlushArgs`), the two around each tool call (`ToolCallArgs`, `ToolResultArgs`), and
`process_approved`, where memory saves what every output processor approved
(see `ApprovedArgs`)."""


# --- I/O a hook may ask for ---------------------------------------------------------


class ModelAnswer(msgspec.Struct, frozen=True):
    """The reply to `AskModel`: the answer, and what the call used (the run counts it in
    `RunResult.judges`)."""

    text: str
    tool_calls: tuple[ToolCallPart, ...] = ()
    usage: Usage = Usage()
    response_model: str | None = None
    """The model the provider said answered, if it said."""


class AskModel(Request[ModelAnswer], frozen=True):
    """Yielded by a generator hook: run this request to completion (an LLM judge).
    `answer = yield from ask(AskModel(...))` gives the `ModelAnswer` typed."""

    request: ModelRequest


# --- the tripwire ---------------------------------------------------------------------


class ProcessorAbort(Exception):
    """Raised by `abort(...)`; the runner turns it into an `Abort` effect."""

    def __init__(
        self, reason: str, *, retry: bool = False, metadata: JsonObject | None = None
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry = retry
        self.metadata = metadata


def abort(
    reason: str = "",
    *,
    retry: bool = False,
    metadata: JsonObject | None = None,
) -> NoReturn:
    """Stop the run from inside a hook, as the seed's examples do; without a reason, the
    tripwire's reason is "Tripwire triggered by <processor id>"."""
    raise ProcessorAbort(reason, retry=retry, metadata=metadata)


# --- arguments of each hook -------------------------------------------------------------


class _MessagesOfList:
    """`args.messages` for the hooks whose args carry the whole history."""

    __slots__ = ()
    message_list: MessageList

    @property
    def messages(self) -> tuple[Message, ...]:
        """`message_list.messages`, made when first read: a hook that never looks at the
        whole history does not pay for it, however long the history."""
        return self.message_list.messages


class InputArgs(msgspec.Struct, _MessagesOfList, Generic[S, Seen], frozen=True, kw_only=True):
    system_messages: tuple[SystemMessage, ...]
    message_list: MessageList
    state: S
    retry_count: int
    context: RunContext[Seen]


class StepSettings(msgspec.Struct, frozen=True, kw_only=True):
    """One step's settings: the agent's, as the `process_input_step` hooks so far changed
    them (each hook sees them in `InputStepArgs`, which extends this; the loop asks the
    model with the last). `StepChange` has the same fields, each optional."""

    model: str
    tool_choice: ToolChoice
    active_tools: tuple[str, ...] | None
    tools: tuple[Tool, ...]
    system_messages: tuple[SystemMessage, ...]
    provider_options: JsonObject | None
    model_settings: ModelSettings
    structured_output: StructuredOutput | None
    fallback: Fallback | None = None
    """The models tried after `model` when a provider fails (`pipeline.values.Fallback`):
    the chain's others, in order, each with its own settings."""


class StepChange(msgspec.Struct, frozen=True, kw_only=True):
    """What `process_input_step` may change for this step (None: unchanged): the fields of
    `StepSettings`, and `message_list`.

    `message_list` changes persist into later steps; `system_messages` last this step only.
    """

    model: str | None = None
    tool_choice: ToolChoice | None = None
    active_tools: tuple[str, ...] | None = None
    tools: tuple[Tool, ...] | None = None
    message_list: MessageList | None = None
    system_messages: tuple[SystemMessage, ...] | None = None
    provider_options: JsonObject | None = None
    model_settings: ModelSettings | None = None
    structured_output: StructuredOutput | None = None
    fallback: Fallback | None = None
    """Another fallback chain for this step (`Fallback(models=())`: none)."""


class InputStepArgs(StepSettings, _MessagesOfList, Generic[S, Seen], frozen=True, kw_only=True):
    """What `process_input_step` gets: the step's settings so far, and the run."""

    message_list: MessageList
    step_number: int
    steps: tuple[StepResult, ...]
    state: S
    retry_count: int
    context: RunContext[Seen]
    spent: Spending = Spending()
    """What the run has paid for before this step's model call: every model call it
    made (retried and discarded ones too) and its hooks' judges (`Budget` bounds it)."""


class ApiErrorArgs(msgspec.Struct, _MessagesOfList, Generic[S, Seen], frozen=True, kw_only=True):
    error: ApiError
    message_list: MessageList
    step_number: int
    steps: tuple[StepResult, ...]
    state: S
    retry_count: int
    context: RunContext[Seen]


class StreamArgs(msgspec.Struct, Generic[S, Seen], frozen=True, kw_only=True):
    part: Chunk
    stream_parts: Sequence[Chunk]
    """Every chunk this processor has seen so far in the run, this one included."""
    state: S
    message_list: MessageList
    context: RunContext[Seen]


class FlushArgs(msgspec.Struct, Generic[S, Seen], frozen=True, kw_only=True):
    """What `flush_output_stream` gets: the model's response has ended (after its last
    chunk, before its message is made and `process_output_step` runs).

    A processor that holds chunks back releases them now (`Replace((chunk, ...))`, which
    the later stream processors see as ordinary chunks) or drops them (`Continue`, or
    `Replace(())`); what it still holds after this never reaches the response.
    """

    stream_parts: Sequence[Chunk]
    """Every chunk this processor has seen so far in the run."""
    state: S
    message_list: MessageList
    context: RunContext[Seen]


class OutputStepArgs(msgspec.Struct, _MessagesOfList, Generic[S, Seen], frozen=True, kw_only=True):
    message_list: MessageList
    step_number: int
    steps: tuple[StepResult, ...]
    finish_reason: FinishReason
    tool_calls: tuple[ToolCallPart, ...]
    text: str
    system_messages: tuple[SystemMessage, ...]
    state: S
    retry_count: int
    context: RunContext[Seen]


class OutputResultArgs(msgspec.Struct, Generic[S, Seen], frozen=True, kw_only=True):
    messages: tuple[Message, ...]
    """The generated response messages."""
    message_list: MessageList
    result: OutputResult
    state: S
    context: RunContext[Seen]


class ApprovedArgs(msgspec.Struct, Generic[S, Seen], frozen=True, kw_only=True):
    """What `process_approved` gets: once, at the end of a run that finished, after every
    output processor approved its answer (`process_output_result` and the stream hooks'
    finish chunk included). It is not called for a run that tripped, failed or was
    cancelled, so what it saves is only ever what was approved.

    A hook of any processor of the agent (an input processor too); it may ask for I/O
    and returns `Continue`. What it asks to write (`effects.Write`: memory's saves) is
    kept until every process_approved hook returned, then committed together
    (`CommitWrites`): all of it or none. A failure of a hook or of the commit fails the
    run closed: nothing is written and the run's answer is dropped from the result, as
    for a crash in `process_output_result`. A cancel before the commit began saves
    nothing; once it began, the run finishes with its answer.
    """

    messages: tuple[Message, ...]
    """This run's new messages as approved: its input as the input processors left it
    (`process_input`; a per-step change by `process_input_step` is a view of one model
    call and is not here), then its responses as they leave the run (the tool results
    as the stream processors passed them on, `process_output_result`'s changes kept).
    Messages of source `memory`, `system` and `context` (retry feedback) are not here."""
    message_list: MessageList
    """The run's messages as they leave it (`result.messages`)."""
    state: S
    context: RunContext[Seen]
    started_at: float = 0.0
    """When the run began, on the interpreter's clock (a run resumed after an approval:
    when the run it resumes began). Memory files the run's messages by it, so a turn
    that waited for an approval comes before the turns that came meanwhile."""


class ToolCallArgs(msgspec.Struct, Generic[S, Seen], frozen=True, kw_only=True):
    """What `process_tool_call` gets: one call, before its tool runs (once per call,
    in call order; its arguments already valid for the tool's schema)."""

    call: ToolCallPart
    """The call as the model made it."""
    args: JsonObject
    """The arguments as the processors before this one left them (`Replace(args)`)."""
    tool_name: str
    """The tool's name: what a gate compares (`args.tool_name == "refund"`)."""
    tool: Tool
    """The tool itself (its spec, its schema). Comparing it with a string raises a
    TypeError: compare `tool_name`."""
    message_list: MessageList
    step_number: int
    state: S
    context: RunContext[Seen]
    """The run's context; `context.deps` are the deps the tool's `ToolContext` gets."""


class ToolResultArgs(msgspec.Struct, Generic[S, Seen], frozen=True, kw_only=True):
    """What `process_tool_result` gets: a call's result after its tool ran (or a gate or
    the approver answered in its place: a `SkipCall` result, a denial), before the model
    or the caller sees it."""

    call: ToolCallPart
    """The call as it ran (its arguments after `process_tool_call`), or as it was
    answered without running."""
    result: object
    """The result as the processors before this one left it (JSON-encodable)."""
    is_error: bool
    message_list: MessageList
    step_number: int
    state: S
    context: RunContext[Seen]
    ran: bool = True
    """Whether the tool ran (with `call`'s arguments); False: a gate or the approver
    answered in its place (a `SkipCall` result, a denial)."""


# --- what each hook may return ----------------------------------------------------------

InputEffect: TypeAlias = Continue | Replace[MessageList] | Abort
InputStepEffect: TypeAlias = Continue | Replace[StepChange] | Abort
ApiErrorEffect: TypeAlias = Continue | Retry[MessageList] | Abort
StreamEffect: TypeAlias = (
    Continue | Replace[Chunk | tuple[Chunk, ...]] | Skip | Emit[DataChunk] | Abort
)
"""`Replace(chunk)`, or `Replace((a, b, ...))` / `Replace(())`: the chunk becomes several
chunks or none; the later stream processors see each in order."""
FlushEffect: TypeAlias = Continue | Replace[tuple[Chunk, ...]] | Emit[DataChunk] | Abort
OutputStepEffect: TypeAlias = Continue | Replace[MessageList] | Abort
OutputResultEffect: TypeAlias = Continue | Replace[MessageList] | Abort
ApprovedEffect: TypeAlias = Continue
ToolCallEffect: TypeAlias = Continue | Replace[JsonObject] | SkipCall | AskApproval | Abort
"""`Replace(args)`: run the tool with these arguments (checked against its schema again);
`SkipCall(result)`: answer the call without running it; `AskApproval(message)`: run it
only once a person approves (the run suspends)."""
ToolResultEffect: TypeAlias = Continue | Replace[object] | Abort
"""`Replace(result)`: the call's result becomes this value (JSON-encodable, capped)."""

InputResult: TypeAlias = InputEffect | Out[InputEffect, S]
InputStepResult: TypeAlias = InputStepEffect | Out[InputStepEffect, S]
ApiErrorResult: TypeAlias = ApiErrorEffect | Out[ApiErrorEffect, S]
StreamResult: TypeAlias = StreamEffect | Out[StreamEffect, S]
FlushResult: TypeAlias = FlushEffect | Out[FlushEffect, S]
OutputStepResult: TypeAlias = OutputStepEffect | Out[OutputStepEffect, S]
OutputResultResult: TypeAlias = OutputResultEffect | Out[OutputResultEffect, S]
ApprovedResult: TypeAlias = ApprovedEffect | Out[ApprovedEffect, S]
ToolCallResult: TypeAlias = ToolCallEffect | Out[ToolCallEffect, S]
ToolResultResult: TypeAlias = ToolResultEffect | Out[ToolResultEffect, S]

HookEffect: TypeAlias = (
    InputEffect
    | InputStepEffect
    | ApiErrorEffect
    | StreamEffect
    | FlushEffect
    | OutputStepEffect
    | OutputResultEffect
    | ToolCallEffect
    | ToolResultEffect
)
"""Any effect some hook may return (what a trace records)."""

HookReturn: TypeAlias = R | Awaitable[R] | Generator[object, object, R]
"""A hook returns its result directly, from a coroutine, or from an I/O generator."""

HOOK_EFFECTS: Mapping[HookName, object] = {
    "process_input": InputEffect,
    "process_input_step": InputStepEffect,
    "process_api_error": ApiErrorEffect,
    "process_output_stream": StreamEffect,
    "process_output_step": OutputStepEffect,
    "process_output_result": OutputResultEffect,
    "flush_output_stream": FlushEffect,
    "process_approved": ApprovedEffect,
    "process_tool_call": ToolCallEffect,
    "process_tool_result": ToolResultEffect,
}
"""Each hook's effect alias: the run-time checks below are read off these types."""


def _members(t: object) -> tuple[object, ...]:
    """The members of a union type (a type that is not a union is its only member)."""
    return get_args(t) if isinstance(t, UnionType) or get_origin(t) is Union else (t,)


def _classes(t: object) -> tuple[type, ...]:
    """The classes `isinstance` checks a value of type `t` against (a generic by its
    origin: `Replace[MessageList]` -> Replace, `tuple[Chunk, ...]` -> tuple)."""
    out: dict[type, None] = {}
    for m in _members(t):
        c = get_origin(m) or m
        if not isinstance(c, type):
            raise TypeError(f"cannot check {m!r} at run time")
        out[c] = None
    return tuple(out)


def _payload(t: object) -> tuple[type, ...] | None:
    """What the Replace or Retry an effect alias allows may carry (Retry's may be None)."""
    for m in _members(t):
        origin = get_origin(m)
        if origin is Replace or origin is Retry:
            (carried,) = get_args(m)
            classes = _classes(carried)
            return (*classes, type(None)) if origin is Retry else classes
    return None


ALLOWED_EFFECTS: Mapping[HookName, tuple[type, ...]] = {
    h: _classes(t) for h, t in HOOK_EFFECTS.items()
}
"""The effect classes each hook may return (`hooks.check`)."""

CHUNK_TYPES: tuple[type, ...] = get_args(Chunk)
REPLACE_PAYLOAD: Mapping[HookName, tuple[type, ...]] = {
    h: p for h, t in HOOK_EFFECTS.items() if (p := _payload(t)) is not None
}
"""The classes a hook's Replace (or Retry) may carry (`hooks.check`)."""


# --- processors ------------------------------------------------------------------------


class ProcessorPlacementWarning(UserWarning):
    """A processor placed where some of its hooks never run: output hooks of one in
    `input_processors` only, input hooks of one in `output_processors` only."""


class BaseProcessor(Generic[Needs]):
    """What the agent and the loop know of any processor, whatever its state type.
    `Needs`: the deps its hooks read (`object`: any, the default)."""

    id: str
    name: str | None = None
    process_data_parts: bool = False
    """When True, `process_output_stream` also receives `data-*` chunks."""
    either_list: bool = False
    """When True, the processor is meant for either list alone (a guard that checks the
    input, the output or both, as it is placed): its hooks for the other list not
    running is no mistake, and the agent does not warn of it."""
    concurrent: bool = False
    """When True, `process_input` runs beside the first model call: the model's output is
    held, and no tool runs, until it passed (`pipeline.loop.race`). It may pass or abort."""
    bounds_descendants: bool = False
    """When True, its `process_input_step` also bounds the agents its agent calls (child
    runs, `docs/agents.md`): it is asked before each model call of every descendant run,
    with `spent` what the whole tree under its run has paid for so far (the children
    running too) and its own run's state. An `Abort` stops that descendant (a tripwire
    of this processor's id), a `StepChange` changes that step; a state it returns is not
    kept. `Budget` is such a processor."""
    tools: tuple[Tool, ...] = ()
    """The tools its `process_input_step` may add to a step (`StepChange.tools`) that are
    not the agent's: a run suspended for approval in such a step finds them here again
    when it resumes (`pipeline.approval.ToolNotFound` otherwise, before it is taken)."""

    def initial_state(self) -> object:
        return None

    def hook_functions(self) -> Mapping[HookName, Callable[..., object]]:
        """The hooks this processor implements, as callables taking the hook's args."""
        found: dict[HookName, Callable[..., object]] = {}
        cls = type(self)
        for hook in HOOKS:
            impl = getattr(cls, hook, None)
            if impl is not None and impl is not getattr(StatefulProcessor, hook):
                found[hook] = getattr(self, hook)
        return found

    @property
    def display_name(self) -> str:
        return self.name or self.id


class StatefulProcessor(BaseProcessor[Needs], Generic[S, Needs]):
    """A processor with per-run state of type S; override the hooks you need.

    The hook bodies here are never called: a hook that is not overridden is skipped.
    """

    def initial_state(self) -> S:
        raise NotImplementedError(f"{type(self).__name__} must define initial_state()")

    def process_input(self, args: InputArgs[S, Needs]) -> HookReturn[InputResult[S]]:
        return Continue()

    def process_input_step(self, args: InputStepArgs[S, Needs]) -> HookReturn[InputStepResult[S]]:
        return Continue()

    def process_api_error(self, args: ApiErrorArgs[S, Needs]) -> HookReturn[ApiErrorResult[S]]:
        return Continue()

    def process_output_stream(self, args: StreamArgs[S, Needs]) -> HookReturn[StreamResult[S]]:
        return Continue()

    def process_output_step(
        self, args: OutputStepArgs[S, Needs]
    ) -> HookReturn[OutputStepResult[S]]:
        return Continue()

    def process_output_result(
        self, args: OutputResultArgs[S, Needs]
    ) -> HookReturn[OutputResultResult[S]]:
        return Continue()

    def flush_output_stream(self, args: FlushArgs[S, Needs]) -> HookReturn[FlushResult[S]]:
        return Continue()

    def process_approved(self, args: ApprovedArgs[S, Needs]) -> HookReturn[ApprovedResult[S]]:
        return Continue()

    def process_tool_call(self, args: ToolCallArgs[S, Needs]) -> HookReturn[ToolCallResult[S]]:
        return Continue()

    def process_tool_result(
        self, args: ToolResultArgs[S, Needs]
    ) -> HookReturn[ToolResultResult[S]]:
        return Continue()


class Processor(StatefulProcessor[None, Needs], Generic[Needs]):
    """A processor without state; `Processor[Db]`'s hooks read the run's deps as a Db."""

    def initial_state(self) -> None:
        return None


class FunctionProcessor(StatefulProcessor[S, Needs]):
    """A processor made of plain functions; build it with `processor(...)`."""

    def __init__(
        self,
        id: str,
        state: S,
        hooks: Mapping[HookName, Callable[..., object]],
        *,
        name: str | None = None,
        process_data_parts: bool = False,
        concurrent: bool = False,
        tools: Sequence[Tool] = (),
    ) -> None:
        if type(concurrent) is not bool:  # a misspelt option never disables a guard
            raise TypeError(f"processor {id!r}: concurrent must be a bool, got {concurrent!r}")
        if isinstance(tools, str | bytes) or not all(isinstance(t, Tool) for t in tools):
            raise TypeError(f"processor {id!r}: tools must be Tools, got {tools!r}")
        self.id = id
        self.name = name
        self.process_data_parts = process_data_parts
        self.concurrent = concurrent
        self.tools = tuple(tools)
        self._state = state
        self._hooks = dict(hooks)

    def initial_state(self) -> S:
        return self._state

    def hook_functions(self) -> Mapping[HookName, Callable[..., object]]:
        return self._hooks

    def __repr__(self) -> str:
        return f"processor({self.id!r}, hooks={sorted(self._hooks)})"


class FunctionHooks(TypedDict, Generic[S, HookDeps], total=False):
    """The hook functions `processor(...)` takes, each typed as its hook: a function
    returning an effect its hook does not allow is a mypy error at the call."""

    process_input: Callable[[InputArgs[S, HookDeps]], HookReturn[InputResult[S]]] | None
    process_input_step: (
        Callable[[InputStepArgs[S, HookDeps]], HookReturn[InputStepResult[S]]] | None
    )
    process_api_error: Callable[[ApiErrorArgs[S, HookDeps]], HookReturn[ApiErrorResult[S]]] | None
    process_output_stream: (
        Callable[[StreamArgs[S, HookDeps]], HookReturn[StreamResult[S]]] | None
    )
    process_output_step: (
        Callable[[OutputStepArgs[S, HookDeps]], HookReturn[OutputStepResult[S]]] | None
    )
    process_output_result: (
        Callable[[OutputResultArgs[S, HookDeps]], HookReturn[OutputResultResult[S]]] | None
    )
    flush_output_stream: Callable[[FlushArgs[S, HookDeps]], HookReturn[FlushResult[S]]] | None
    process_tool_call: Callable[[ToolCallArgs[S, HookDeps]], HookReturn[ToolCallResult[S]]] | None
    process_tool_result: (
        Callable[[ToolResultArgs[S, HookDeps]], HookReturn[ToolResultResult[S]]] | None
    )


FUNCTION_HOOKS: tuple[HookName, ...] = tuple(
    h for h in HOOKS if h in FunctionHooks.__optional_keys__
)
"""The hooks `processor(...)` takes a function for, in `HOOKS` order."""


# Without `state`, the hooks' state is None; with it, the type of the value given.
@overload
def processor(
    id: str, *, name: str | None = ..., process_data_parts: bool = ..., concurrent: bool = ...,
    tools: Sequence[Tool] = ..., **hooks: Unpack[FunctionHooks[None, HookDeps]],
) -> FunctionProcessor[None, HookDeps]: ...
@overload
def processor(
    id: str, *, state: S, name: str | None = ..., process_data_parts: bool = ...,
    concurrent: bool = ..., tools: Sequence[Tool] = ...,
    **hooks: Unpack[FunctionHooks[S, HookDeps]],
) -> FunctionProcessor[S, HookDeps]: ...
def processor(
    id: str,
    *,
    state: object = None,
    name: str | None = None,
    process_data_parts: bool = False,
    concurrent: bool = False,
    tools: Sequence[Tool] = (),
    **hooks: Callable[..., object] | None,
) -> FunctionProcessor[Any]:  # the overloads above are the public type
    """A processor from plain functions, one per hook (`FunctionHooks`); `state` is its
    initial state. `concurrent`: its `process_input` runs beside the first model call
    (see `BaseProcessor.concurrent`). `tools`: the tools its `process_input_step` adds to
    a step, which a resumed step finds again (see `BaseProcessor.tools`)."""
    unknown = sorted(hooks.keys() - FUNCTION_HOOKS)
    if unknown:  # as Python says of a misspelt keyword: never a silently dropped hook
        raise TypeError(f"processor() got an unexpected keyword argument {unknown[0]!r}")
    given = {h: fn for h in FUNCTION_HOOKS if (fn := hooks.get(h)) is not None}
    if not given:
        raise ValueError(f"processor {id!r}: give at least one hook function")
    return FunctionProcessor(
        id, state, given, name=name, process_data_parts=process_data_parts,
        concurrent=concurrent, tools=tools,
    )

