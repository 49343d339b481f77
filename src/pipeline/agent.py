"""The agent: a model, instructions, tools and processors. A frozen value; runs are separate."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, Literal, TypeAlias, cast

import msgspec
from typing_extensions import TypeVar

from pipeline.processor import (
    BaseProcessor,
    HookName,
    HookReturn,
    InputStepArgs,
    InputStepResult,
    ProcessorPlacementWarning,
)
from pipeline.tools import Tool, ToolFn, inline_schema, make_tool
from pipeline.tools.context import Deps
from pipeline.values.bounds import MAX_TOOL_RESULT_BYTES as MAX_TOOL_RESULT_BYTES
from pipeline.values.bounds import check_cap
from pipeline.values.fallback import Fallback
from pipeline.values.messages import JsonObject, MessageList, SystemMessage
from pipeline.values.model import ModelSettings, StructuredOutput, ToolChoice, ToolSpec
from pipeline.values.output_type import TypedOutput
from pipeline.values.result import Output
from pipeline.values.retry import RetryPolicy

PrepareStep: TypeAlias = Callable[[InputStepArgs[None]], HookReturn[InputStepResult[None]]]
"""A user callback run last in the input-step pipeline, after the input processors."""

GivenDeps = TypeVar("GivenDeps", default=Any)
"""`create`'s deps type: its `deps_type`, else what its `tool`s' contexts ask for, else any."""
GivenOutput = TypeVar("GivenOutput", default=object)
"""`create`'s output type: its `output_type`, else any (a step may decode one)."""

def _fallback(model: str | Sequence[str] | Fallback) -> tuple[str, Fallback | None]:
    """The first model `Agent.create` was given, and the fallback chain (None: one
    model id)."""
    if isinstance(model, str):
        return model, None
    if isinstance(model, Fallback):
        if not model.models:
            raise ValueError("a Fallback needs at least one model")
        return model.models[0].model, model
    if not isinstance(model, Sequence) or not model:
        raise TypeError(f"model must be a model id, a sequence of them or a Fallback, "
                        f"got {model!r}")
    ids = tuple(model)
    if not all(isinstance(m, str) for m in ids):
        raise TypeError(f"model ids must be str, got {ids!r}")
    return ids[0], (Fallback.of(*ids) if len(ids) > 1 else None)


def _system_messages(
    instructions: str | SystemMessage | Iterable[str | SystemMessage],
) -> tuple[SystemMessage, ...]:
    def bad(value: object) -> TypeError:
        return TypeError("instructions must be a str, a SystemMessage or an iterable of "
                         f"them, got {type(value).__name__}")

    if isinstance(instructions, str | SystemMessage):
        instructions = (instructions,)
    elif isinstance(instructions, bytes) or not isinstance(instructions, Iterable):
        raise bad(instructions)
    out: list[SystemMessage] = []
    for i in instructions:
        if not isinstance(i, str | SystemMessage):
            raise bad(i)
        out.append(SystemMessage(i) if isinstance(i, str) else i)
    return tuple(out)


def _tool_fn(value: object) -> ToolFn:
    """A tool given as a function; TypeError naming anything else (a tool's name, say)."""
    if callable(value) and not isinstance(value, type):
        return cast(ToolFn, value)
    hint = (f" (give the function itself, tools=[{value}], or a Tool from tool(...))"
            if isinstance(value, str) else "")
    raise TypeError(
        f"tools: {value!r} is a {type(value).__name__}, not a tool: a function, a Tool "
        f"or an Agent{hint}"
    )


_ANY_HOOKS: frozenset[HookName] = frozenset(
    {"process_tool_call", "process_tool_result", "process_approved"}
)
"""Hooks an input or an output processor may have: the tool hooks (they run across all
the agent's processors, in list order: input, then output) and `process_approved`
(memory's save, for any processor of the agent)."""
_INPUT_HOOKS: frozenset[HookName] = frozenset(
    {"process_input", "process_input_step", *_ANY_HOOKS}
)
_OUTPUT_HOOKS: frozenset[HookName] = frozenset(
    {"process_output_stream", "process_output_step", "process_output_result", *_ANY_HOOKS}
)
_ERROR_HOOKS: frozenset[HookName] = frozenset({"process_api_error"})


class Agent(msgspec.Struct, Generic[Deps, Output], frozen=True, kw_only=True):
    """What to run. Build with `Agent.create(...)`, which checks the configuration.

    Typed by what its runs take and give: `Agent[Db, Answer]` runs only with `deps=` a
    `Db`, and its results' `output` is an `Answer | None` (checked by mypy). Without an
    `output_type` the output is an `object` (a step's `StepChange(structured_output=
    TypedOutput.of(T))` decodes one); a step that switches an agent with an `output_type`
    to another type's output is not seen by mypy.
    """

    model: str
    """The model every step asks first (the first of `fallback`'s, when there is one)."""
    instructions: tuple[SystemMessage, ...] = ()
    tools: tuple[Tool[Deps], ...] = ()
    input_processors: tuple[BaseProcessor[Deps], ...] = ()
    output_processors: tuple[BaseProcessor[Deps], ...] = ()
    error_processors: tuple[BaseProcessor[Deps], ...] = ()
    max_steps: int = 10
    max_processor_retries: int = 3
    max_api_error_retries: int = 3
    retry_policy: RetryPolicy = RetryPolicy()
    prepare_step: PrepareStep | None = None
    tool_choice: ToolChoice = "auto"
    model_settings: ModelSettings = ModelSettings()
    provider_options: JsonObject | None = None
    structured_output: StructuredOutput | None = None
    name: str = "agent"
    max_tool_result_bytes: int = MAX_TOOL_RESULT_BYTES
    """The cap on a tool's result (encoded JSON bytes) unless the tool sets its own."""
    deps_type: type | None = None
    """The class of the deps its runs are given, when declared: a tool asking for deps
    of another class is refused at construction."""
    fallback: Fallback | None = None
    """The models a step tries in turn when a provider fails (`pipeline.values.Fallback`;
    its first is `model`): see docs/providers.md, Fallback models."""

    @staticmethod
    def create(
        model: str | Sequence[str] | Fallback,
        *,
        deps_type: type[GivenDeps] | None = None,
        instructions: str | SystemMessage | Iterable[str | SystemMessage] = (),
        tools: Iterable[Tool[GivenDeps] | ToolFn | Agent[Any, Any]] = (),
        input_processors: Iterable[BaseProcessor[GivenDeps]] = (),
        output_processors: Iterable[BaseProcessor[GivenDeps]] = (),
        error_processors: Iterable[BaseProcessor[GivenDeps]] = (),
        max_steps: int = 10,
        max_processor_retries: int = 3,
        max_api_error_retries: int = 3,
        retry_policy: RetryPolicy | None = None,
        prepare_step: PrepareStep | None = None,
        tool_choice: ToolChoice = "auto",
        model_settings: ModelSettings | None = None,
        provider_options: JsonObject | None = None,
        structured_output: StructuredOutput | None = None,
        output_type: type[GivenOutput] | TypedOutput[GivenOutput] | None = None,
        name: str = "agent",
        max_tool_result_bytes: int = MAX_TOOL_RESULT_BYTES,
    ) -> Agent[GivenDeps, GivenOutput]:
        """An agent; plain functions in `tools` become typed tools.

        `model` is a model id, or several (tried in turn when a provider fails), or a
        `Fallback` (with per-model settings and the failures that move on).
        `output_type` (a msgspec Struct, dataclass, TypedDict or pydantic model, or a
        `TypedOutput.of(T, mode=..., partial=...)` to choose how it is asked for) asks
        for structured output and decodes the final reply into `result.output`. `deps_type`
        declares the class of the runs' deps (without it, the tools made with `tool` that
        take a `ToolContext[X]` decide it for mypy; at run time each tool checks its own).
        """
        if output_type is not None:
            if structured_output is not None:
                raise ValueError("give output_type or structured_output, not both")
            structured_output = (
                output_type if isinstance(output_type, TypedOutput)
                else TypedOutput.of(output_type)
            )
        model, fallback = _fallback(model)
        system = _system_messages(instructions)
        tool_list = tuple(
            t if isinstance(t, Tool) else t.as_tool() if isinstance(t, Agent)
            else make_tool(_tool_fn(t))
            for t in tools
        )
        agent = Agent(
            model=model,
            instructions=system,
            tools=tool_list,
            input_processors=tuple(input_processors),
            output_processors=tuple(output_processors),
            error_processors=tuple(error_processors),
            max_steps=max_steps,
            max_processor_retries=max_processor_retries,
            max_api_error_retries=max_api_error_retries,
            retry_policy=retry_policy or RetryPolicy(),
            prepare_step=prepare_step,
            tool_choice=tool_choice,
            model_settings=model_settings or ModelSettings(),
            provider_options=provider_options,
            structured_output=structured_output,
            name=name,
            max_tool_result_bytes=max_tool_result_bytes,
            deps_type=deps_type,
            fallback=fallback,
        )
        agent.check()
        return agent

    def check(self) -> None:
        """Raise ValueError/TypeError for a configuration that cannot run."""
        check_cap("max_tool_result_bytes", self.max_tool_result_bytes)
        if type(self.model) is not str or not self.model:
            raise TypeError(f"model must be a model id (a non-empty str), got {self.model!r}")
        if self.fallback is not None and (
            not isinstance(self.fallback, Fallback) or not self.fallback.models
            or self.fallback.models[0].model != self.model
        ):
            raise ValueError("the agent's fallback chain must start with its model")
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {self.max_steps}")
        for bound_name, bound in (
            ("max_processor_retries", self.max_processor_retries),
            ("max_api_error_retries", self.max_api_error_retries),
        ):
            if bound < 0:
                raise ValueError(f"{bound_name} must be >= 0, got {bound}")
        if self.deps_type is not None and not isinstance(self.deps_type, type):
            raise TypeError(f"deps_type must be a class, got {self.deps_type!r}")
        for t in self.tools:
            if t.max_result_bytes is not None:
                check_cap(f"tool {t.name!r}: max_result_bytes", t.max_result_bytes)
            wants = t.deps_type if t.context_param is not None else None
            if (
                wants is not None
                and self.deps_type is not None
                and not issubclass(self.deps_type, wants)
            ):
                raise TypeError(
                    f"tool {t.name!r} needs deps of type {wants.__name__}, "
                    f"the agent's deps_type is {self.deps_type.__name__}"
                )
        names = [t.name for t in self.tools]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate tool names: {dupes}")
        for role, procs, needs in (
            ("input", self.input_processors, _INPUT_HOOKS),
            ("output", self.output_processors, _OUTPUT_HOOKS),
            ("error", self.error_processors, _ERROR_HOOKS),
        ):
            for p in procs:
                if not isinstance(p, BaseProcessor):
                    raise TypeError(f"{role} processor {p!r} is not a Processor")
                if not getattr(p, "id", None):
                    raise TypeError(
                        f"{role} processor {type(p).__name__} has no id: give the class an "
                        '`id = "..."` (a name for its decisions in traces and errors)'
                    )
                if not needs & set(p.hook_functions()):
                    raise TypeError(
                        f"{role} processor {p.id!r} implements none of {sorted(needs)}"
                    )
        self._warn_of_hooks_that_never_run()
        # One instance may serve as input and output processor; distinct ones need distinct ids.
        ids = [p.id for p in self.all_processors()]
        clash = sorted({i for i in ids if ids.count(i) > 1})
        if clash:
            raise ValueError(f"processor ids must be unique, repeated: {clash}")

    def as_tool(
        self,
        name: str | None = None,
        description: str | None = None,
        *,
        input_type: type[msgspec.Struct] | None = None,
        memory: ChildMemory = "own",
    ) -> AgentTool[Deps]:
        """This agent as a tool another agent's model calls (`docs/agents.md`): the call
        runs it to its end as a child run, and its output (typed when it has an
        `output_type`) is the call's result.

        The model gives it `{"input": "..."}` (its user message), or the fields of
        `input_type` (a msgspec Struct; the child reads them as JSON). `memory="own"`:
        the child runs in a thread of its own (the parent's thread and the tool's name);
        `"parent"`: in the parent's thread, so its memory processors read and save the
        parent's conversation (saved only once the whole tree is approved)."""
        return _agent_tool(self, "tool", name, description, input_type, memory, None)

    def as_handoff(
        self,
        name: str | None = None,
        description: str | None = None,
        *,
        input_filter: InputFilter | None = None,
        memory: ChildMemory = "own",
    ) -> AgentTool[Deps]:
        """A tool that hands the conversation over to this agent (`docs/agents.md`): it
        runs on the parent's history (through `input_filter`; by default the user's
        messages and the assistants' text, without tool calls) and its answer is the
        run's answer (`RunResult.answered_by` names it); its processors and tools apply
        from then on. The parent's model is not called again in that run."""
        return _agent_tool(self, "handoff", name, description, None, memory, input_filter)

    def _warn_of_hooks_that_never_run(self) -> None:
        """A processor in one list only whose hooks for the other list never run: most
        likely a mistake (a guard's output check that never checks), so said at once;
        not for a processor that asks for either list (`either_list`)."""
        inputs = {id(p) for p in self.input_processors}
        outputs = {id(p) for p in self.output_processors}
        for here, there, procs, other_hooks in (
            ("input_processors", "output_processors", self.input_processors,
             _OUTPUT_HOOKS - _ANY_HOOKS),
            ("output_processors", "input_processors", self.output_processors,
             _INPUT_HOOKS - _ANY_HOOKS),
        ):
            elsewhere = outputs if here == "input_processors" else inputs
            for p in procs:
                if id(p) in elsewhere or getattr(p, "either_list", False):
                    continue
                idle = sorted(other_hooks & set(p.hook_functions()))
                if idle:
                    warnings.warn(
                        f"processor {p.id!r} is in {here} only: its {', '.join(idle)} "
                        f"never run{'s' if len(idle) == 1 else ''}; put the same instance "
                        f"in {there} too to run {'it' if len(idle) == 1 else 'them'} (or "
                        "set `either_list = True` on its class when that is meant)",
                        ProcessorPlacementWarning, stacklevel=4,
                    )

    def all_processors(self) -> tuple[BaseProcessor[Deps], ...]:
        seen: dict[int, BaseProcessor[Deps]] = {}
        for p in (*self.input_processors, *self.output_processors, *self.error_processors):
            seen.setdefault(id(p), p)
        return tuple(seen.values())

    def async_parts(self) -> tuple[str, ...]:
        """Hooks and tools that are coroutine functions (the sync interpreter refuses them)."""
        found = [
            f"processor {p.id!r} hook {hook} is async"
            for p in self.all_processors()
            for hook, fn in p.hook_functions().items()
            if inspect.iscoroutinefunction(fn)
        ]
        found += [f"tool {t.name!r} is async" for t in self.tools if t.is_async]
        if self.prepare_step is not None and inspect.iscoroutinefunction(self.prepare_step):
            found.append("prepare_step is async")
        return tuple(found)


ChildMemory = Literal["own", "parent"]
"""A child run's memory: a thread of its own, or its parent's (`Agent.as_tool`)."""

InputFilter: TypeAlias = Callable[[MessageList], MessageList]
"""What a handoff's agent reads of the parent's history (`Agent.as_handoff`)."""


class AgentTool(Tool[Deps], frozen=True, kw_only=True):
    """An agent as a tool (`Agent.as_tool`) or a handoff to it (`Agent.as_handoff`): the
    interpreter runs a call of it as a child run of the caller's (`docs/agents.md`)."""

    agent: Agent[Any, Any]
    kind: Literal["tool", "handoff"] = "tool"
    memory: ChildMemory = "own"
    input_filter: InputFilter | None = None
    typed_input: bool = False
    """The call's arguments are the fields of an `input_type` (read by the child as
    JSON), not one `input` text."""


def _not_called(**_: object) -> object:
    # A child run is carried out by the interpreter, never by calling a function: one
    # that does not know children fails the call closed (`run.common.unrunnable`).
    raise TypeError("an agent tool runs as a child run, not as a function")


_TEXT_INPUT: JsonObject = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "What to ask the agent."}},
    "required": ["input"],
    "additionalProperties": False,
}


class _TextInput(msgspec.Struct, forbid_unknown_fields=True):
    input: str


def _agent_tool(
    agent: Agent[Any, Any],
    kind: Literal["tool", "handoff"],
    name: str | None,
    description: str | None,
    input_type: type[msgspec.Struct] | None,
    memory: ChildMemory,
    input_filter: InputFilter | None,
) -> AgentTool[Any]:
    if memory not in ("own", "parent"):
        raise ValueError(f"memory must be 'own' or 'parent', got {memory!r}")
    if input_type is not None and not (
        isinstance(input_type, type) and issubclass(input_type, msgspec.Struct)
    ):
        raise TypeError(f"input_type must be a msgspec Struct class, got {input_type!r}")
    if input_filter is not None and not callable(input_filter):
        raise TypeError("input_filter must be a function of the history (a MessageList)")
    tool_name = name or (f"transfer_to_{agent.name}" if kind == "handoff" else agent.name)
    doc = description or (
        f"Hand the conversation over to {agent.name}." if kind == "handoff"
        else f"Ask {agent.name}."
    )
    params: JsonObject
    args_type: type[msgspec.Struct] | None
    if kind == "handoff":
        params, args_type = {"type": "object", "properties": {}}, None
    elif input_type is not None:
        params, args_type = inline_schema(msgspec.json.schema(input_type)), input_type
    else:
        params, args_type = _TEXT_INPUT, _TextInput
    return AgentTool(
        spec=ToolSpec(tool_name, doc, params), fn=_not_called, args_type=args_type,
        agent=agent, kind=kind, memory=memory, input_filter=input_filter,
        typed_input=input_type is not None,
    )
