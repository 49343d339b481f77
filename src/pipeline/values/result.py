"""What a run produces: per-step results, the final result, and the typed errors."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal

import msgspec
from typing_extensions import TypeVar

from effects.requests import Write
from pipeline.values.chunks import DataChunk, FinishReason, Tripwire, Usage
from pipeline.values.cost import Cost
from pipeline.values.fallback import ModelAttempt
from pipeline.values.messages import (
    JsonObject,
    MessageList,
    SourcePart,
    ToolCallPart,
    ToolResultPart,
)
from pipeline.values.model import ApiError

if TYPE_CHECKING:  # (`returns` is imported by `to_result` when called: its 69 modules)
    from returns.result import Result


# gc=False: untracked by the collector (no cycle goes through it; tests/test_gc_untracked.py)
class StepResult(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """One model call that was kept (a step discarded by a retry is not here)."""

    step_number: int
    model: str
    text: str
    reasoning: str
    tool_calls: tuple[ToolCallPart, ...]
    tool_results: tuple[ToolResultPart, ...]
    """As they left the run: what the stream processors made of each result (a PII
    guard's redaction...), the value the caller was streamed."""
    sources: tuple[SourcePart, ...]
    finish_reason: FinishReason
    usage: Usage
    cost: Cost | None = None
    """What this call cost, when the run was given a pricer that knows the model."""
    attempts: tuple[ModelAttempt, ...] = ()
    """The fallback models tried before `model` answered, in order (`Fallback`)."""


class JudgeCall(msgspec.Struct, frozen=True, kw_only=True):
    """One model call a processor asked for (`AskModel`: a moderation, PII or injection
    judge...), apart from the agent's own calls: `RunResult.judges`."""

    processor_id: str
    hook: str
    model: str
    """The model id the request named."""
    response_model: str | None
    """The model the provider said answered, if it said."""
    usage: Usage
    cost: Cost | None = None
    """What this call cost, when the run was given a pricer that knows the model."""


class _Described(msgspec.Struct, frozen=True):
    """A run error whose text is its class's `_text`: a format string over its fields."""

    _text: ClassVar[str]

    def __str__(self) -> str:
        return self._text.format_map(msgspec.structs.asdict(self))


class ProcessorFailed(_Described, frozen=True, tag="processor-failed"):
    """A processor raised (or returned an effect its hook does not allow)."""

    processor_id: str
    hook: str
    error_type: str
    message: str
    _text = "processor {processor_id!r} failed in {hook}: {error_type}: {message}"


class _AtStep(_Described, frozen=True):
    """A run error that happened at a step (`step_number` first, in every one)."""

    step_number: int


class ApiFailed(_AtStep, frozen=True, tag="api-failed"):
    """The provider rejected the call and no error processor recovered it."""

    error: ApiError
    attempts: int
    tried: tuple[ModelAttempt, ...] = ()
    """The fallback models that failed before the last (`Fallback`), in order."""
    _text = "model call failed at step {step_number} after {attempts} attempt(s): {error}"

    def __str__(self) -> str:
        return super().__str__() + _tried(self.tried)


class StreamFailed(_AtStep, frozen=True, tag="stream-failed"):
    """The model stream broke after it started; what was received is kept, marked incomplete."""

    message: str
    error: ApiError | None = None
    tried: tuple[ModelAttempt, ...] = ()
    """The fallback models that failed before the last (`Fallback`), in order."""
    _text = "model stream broke at step {step_number}: {message}"

    def __str__(self) -> str:
        return super().__str__() + _tried(self.tried)


def _tried(tried: tuple[ModelAttempt, ...]) -> str:
    return "".join(f" (after {a.model}: {a.error})" for a in tried)


class Cancelled(_Described, frozen=True, tag="cancelled"):
    """The caller cancelled the run (or it timed out)."""

    reason: str
    _text = "run cancelled: {reason}"


class OutputInvalid(_AtStep, frozen=True, tag="output-invalid"):
    """The model's final reply did not decode into the output type, retries included."""

    message: str
    text: str
    """The last invalid reply (not kept in the messages)."""
    attempts: int
    _text = (
        "the reply at step {step_number} does not match the output type "
        "after {attempts} attempt(s): {message}"
    )



class InvalidInput(msgspec.Struct, frozen=True, tag="invalid-input"):
    """The caller's input is not a conversation the library can send; no model was called.

    `message_index` is the position of the bad message in the input (None: the input as a
    whole, or its system messages), `field` the field at fault (`parts[0].text`).
    """

    message_index: int | None
    field: str
    problem: str
    message_id: str | None = None

    def __str__(self) -> str:
        where = "input" if self.message_index is None else f"message {self.message_index}"
        if self.message_id is not None:
            where += f" (id {self.message_id!r})"
        return f"invalid input: {where}, field {self.field!r}: {self.problem}"


RunError = (
    ProcessorFailed | ApiFailed | StreamFailed | Cancelled | OutputInvalid | InvalidInput
)

T = TypeVar("T")
Output = TypeVar("Output", default=Any)
"""The type of `RunResult.output`: the agent's `output_type` (an `Agent[..., X]` gives a
`RunResult[X]`). A bare `RunResult` is any run's result."""

Status = Literal["finished", "tripped", "failed", "cancelled", "suspended"]


class PendingApproval(msgspec.Struct, frozen=True, kw_only=True):
    """A call waiting for a person: what to show them, and the digest to decide on."""

    tool_call_id: str
    tool_name: str
    args: JsonObject
    message: str
    """The gate's message (`AskApproval.message`)."""
    processor_id: str
    """The processor that asked."""
    digest: str
    """`call_digest` of the call as it waits: a decision carries it back."""
    metadata: JsonObject | None = None
    path: tuple[str, ...] = ()
    """Where the call waits in a tree of runs (`docs/agents.md`): the tool-call ids of
    the child runs it waits in, from the root's call down; empty for the run's own
    call. A nested call's `tool_call_id` is that path and its own id joined by "/"."""


class Review(msgspec.Struct, frozen=True, kw_only=True):
    """An approval reviewer's verdict on one call that waited for a decision
    (`pipeline.processors.ApprovalReviewer`): approved (it runs without a person), or
    referred to a person (the run suspends for it), and why; in which run, whose."""

    run_id: str
    thread_id: str | None = None
    resource_id: str | None = None
    tool_call_id: str
    tool_name: str
    digest: str
    """`call_digest` of the call as it was reviewed."""
    reviewer: str
    """The reviewer's processor id."""
    approved: bool
    reason: str
    risk: float | None = None
    """The risk the reviewer's judge gave (None: it gave none it could read)."""


class ReviewNote(msgspec.Struct, frozen=True, kw_only=True):
    """An approval reviewer's state: what its judge said of the last call it reviewed
    (the loop reads it into the `Review`)."""

    reason: str = ""
    risk: float | None = None


class GatedCall(msgspec.Struct, frozen=True, kw_only=True):
    """What the gates made of one call of the suspended step, in call order: run it
    (`kind="run"`, with `call.args` as the gates left them), answered (`"answered"`:
    the gate's `SkipCall` or a call that could not run, with its result), or waiting
    (`"ask"`, see `PendingApproval`)."""

    call: ToolCallPart
    kind: Literal["run", "answered", "ask", "child"]
    result: object = None
    is_error: bool = False
    child: Suspension | None = None
    """`kind="child"`: a child run (an agent called as a tool) that waits for approvals
    itself; its suspension, resumed with the decisions for its nested calls."""
    kept: KeptChild | None = None
    """`kind="answered"` for a child run that had finished: what it leaves the tree
    (its writes wait for the root's approval, its chunks for the parent's stream)."""
    approved: str | None = None
    """`kind="run"` for a call a person decided on an earlier resume of this step (the
    step suspended again for another call): the digest the decision was for, which
    answers the gates' asks for that call when it resumes again."""


class AgentNode(msgspec.Struct, frozen=True, kw_only=True):
    """One child run in a tree of runs (`RunResult.children`): the agent a tool call or
    a handoff ran, how it ended, and what it and its own children used."""

    tool_call_id: str
    """The parent's call that ran it."""
    tool_name: str
    agent: str
    kind: Literal["tool", "handoff"]
    run_id: str
    status: Status
    usage: Usage
    """Every metered model call of this run and its descendants, judges included."""
    cost: Cost | None = None
    """What they cost (None: not known for one of them)."""
    children: tuple[AgentNode, ...] = ()


class KeptChild(msgspec.Struct, frozen=True, kw_only=True):
    """A finished child run kept by a suspended parent: what it leaves the tree once the
    root is approved (`GatedCall.kept`)."""

    node: AgentNode
    chunks: tuple[DataChunk, ...] = ()
    """The chunks its parent streams for it (`data-agent`, and what it wrote)."""
    writes: tuple[tuple[str, Write], ...] = ()
    """Its memory writes (`effects.Write`), with who asked, committed with the root's."""


class Spending(msgspec.Struct, frozen=True, gc=False):
    """What a run has paid for so far: every model call it made (its own, retried or
    discarded by a processor's retry too) and every call its hooks' judges made
    (`AskModel`), with their usage and cost. What `Budget` bounds."""

    model_calls: int = 0
    usage: Usage = Usage()
    cost: Cost | None = None
    """None when it is not known: no pricer, or a call no one could price."""

    def __add__(self, other: Spending) -> Spending:
        cost = None if self.cost is None or other.cost is None else self.cost + other.cost
        return Spending(self.model_calls + other.model_calls, self.usage + other.usage, cost)


class StepTool(msgspec.Struct, frozen=True):
    """A tool the suspended step offered the model: its name and the digest of its name
    and parameters' schema (`pipeline.approval.tool_digest`), to find it again on resume."""

    name: str
    digest: str


class Suspension(msgspec.Struct, frozen=True, kw_only=True):
    """A suspended run: what it waits for and what it needs to go on.

    `states` are the processors' states (by slot) at the suspension: an in-memory store
    keeps them as they are; a store that writes them out must be able to encode them.
    """

    run_id: str
    agent_digest: str
    pending: tuple[PendingApproval, ...]
    calls: tuple[GatedCall, ...]
    messages: MessageList
    step: StepResult
    """The suspended step as far as it got (its model answer; no tool results yet)."""
    steps: tuple[StepResult, ...]
    """The steps before it."""
    states: tuple[object, ...]
    ids_used: int
    """How many ids the run made (`Ids`): the resumed run goes on from there."""
    retry_count: int = 0
    processor_ids: tuple[str, ...] = ()
    """The id of the processor of each slot of `states` (to name one whose state a
    store cannot keep)."""
    spent: Spending = Spending()
    """What the run had paid for up to the suspension (its resumed run goes on from it)."""
    leaving_calls: tuple[ToolCallPart, ...] = ()
    """The run's tool calls as they leave it, where a stream processor passed them on
    other than the model made them (`messages` keeps them as the model made them)."""
    thread_id: str | None = None
    """The run's thread (`RunContext.thread_id`): a resume goes on in it, and one naming
    another thread is refused (`pipeline.approval.OwnerMismatch`)."""
    resource_id: str | None = None
    """The run's resource (`RunContext.resource_id`), kept and checked as `thread_id`."""
    tools: tuple[StepTool, ...] = ()
    """The tools the suspended step offered: the agent's and those its processors added
    for the step. A resume finds each one a call runs with among the agent's tools and
    its processors' declared ones (`BaseProcessor.tools`). Empty in a suspension kept
    before the step's tools were: then found by name alone."""
    started_at: float = 0.0
    """When the run began (on its clock): the resumed run began then too (memory files
    its turn by it, before the turns that came while it waited)."""
    expires_at: float | None = None
    """When its wait ends undecided (seconds since the epoch), as the approval desk
    that keeps it set it (`interpreters.approvals.policy`); None: it waits until
    decided. A decision after it is `ApprovalExpired`: its calls are denied."""
    gate_states: tuple[object, ...] | None = None
    """The processors' states (by slot, as `states`) before the gates ran for the
    suspended step: a resume gates the step's calls again from them, so a gate that
    counts calls counts each once. None: the step's gates are not asked again (a
    suspension kept before they were, or one a child run's wait made)."""


class SuspendedRun(msgspec.Struct, frozen=True, kw_only=True):
    """A run waiting for a person's decisions, as an approval desk lists it (in-process
    or durable, `interpreters.ApprovalDesk`): whose it is and the calls that wait."""

    run_id: str
    thread_id: str | None = None
    resource_id: str | None = None
    pending: tuple[PendingApproval, ...]


class RunFailedError(Exception):
    """Raised by `RunResult.unwrap()` for a run that did not finish; carries the result."""

    def __init__(self, result: RunResult) -> None:
        self.result = result
        detail = result.error if result.error is not None else result.tripwire
        super().__init__(f"run {result.status}: {detail}")


class RunResult(msgspec.Struct, Generic[Output], frozen=True, kw_only=True):
    """The outcome of a run. `messages` always holds the conversation so far."""

    status: Status
    text: str
    messages: MessageList
    steps: tuple[StepResult, ...]
    usage: Usage
    finish_reason: FinishReason
    tripwire: Tripwire | None = None
    error: RunError | None = None
    retry_count: int = 0
    api_error_retry_count: int = 0
    output: Output | None = None
    """The final reply decoded into the agent's `output_type` (None without one, and for
    a run that did not finish)."""

    def output_as(self, kind: type[T]) -> T:
        """`output`, typed: TypeError if it is not a `kind` (or the run has none)."""
        if not isinstance(self.output, kind):
            raise TypeError(f"the run's output is a {type(self.output).__name__}, not {kind}")
        return self.output

    def to_result(self) -> Result[RunResult[Output], RunFailedError]:
        """`Success(self)` if the run finished, else `Failure(RunFailedError(self))`:
        for railway-style code (`returns`)."""
        from returns.result import Failure, Success

        if self.status != "finished":
            return Failure(RunFailedError(self))
        return Success(self)

    cost: Cost | None = None
    """What every model call of the run cost: the agent's (discarded responses too, as in
    `usage`) and the judges' (`judges`), when the run was given a pricer (see
    `pipeline.values.cost`) that knew every model called and every call was metered
    (`unmetered_calls` is 0); else None, never a sum that leaves a call out."""
    judges: tuple[JudgeCall, ...] = ()
    """The model calls processors made (`AskModel`), in order, each with its usage and
    cost. Their tokens are not in `usage` (the agent's own calls, as the steps and the
    finish chunk count them) but in `judge_usage` and `total_usage`."""
    suspension: Suspension | None = None
    """What a "suspended" run waits for (`pending`) and keeps to go on: resume it with
    `pipeline.approval.resumption` (or `interpreters.approvals.store.Approvals`)."""
    unmetered_calls: int = 0
    """Model calls of the agent that were made but whose usage the provider never
    reported: a processor stopped the stream (or the run was cancelled) before the
    response ended. Not in `usage`; with any, `cost` is None."""
    children: tuple[AgentNode, ...] = ()
    """The child runs of this run (agents called as tools, handoffs), in the order their
    calls were made; their usage and cost are in `usage` and `cost` too."""
    reviews: tuple[Review, ...] = ()
    """The approval reviewer's verdicts in this run, in order (an approval desk's
    `keep` records each in its audit trail)."""
    answered_by: str | None = None
    """The agent whose answer this is when a handoff transferred the conversation (the
    last one down a chain of handoffs); None: the run's own agent."""

    def usage_by_agent(self) -> dict[str, Usage]:
        """The tree's usage attributed per agent name: each run's own calls (this run's
        under `own`), its children's under theirs."""
        out: dict[str, Usage] = {}
        nested = Usage()
        for n in self.children:
            nested = nested + n.usage
            _attribute(n, out)
        own = self.total_usage - nested
        out["own"] = out.get("own", Usage()) + own
        return out

    @property
    def judge_usage(self) -> Usage:
        """The tokens of every judge call (`judges`)."""
        total = Usage()
        for j in self.judges:
            total = total + j.usage
        return total

    @property
    def total_usage(self) -> Usage:
        """Every metered model call of the run: the agent's (`usage`) and the judges'."""
        return self.usage + self.judge_usage if self.judges else self.usage

    def unwrap(self) -> RunResult[Output]:
        """This result if the run finished, else raise RunFailedError."""
        if self.status != "finished":
            raise RunFailedError(self)
        return self


def _attribute(n: AgentNode, out: dict[str, Usage]) -> None:
    nested = Usage()
    for c in n.children:
        nested = nested + c.usage
        _attribute(c, out)
    out[n.agent] = out.get(n.agent, Usage()) + (n.usage - nested)


class OutputResult(msgspec.Struct, frozen=True, kw_only=True):
    """What `process_output_result` sees of the finished generation."""

    text: str
    usage: Usage
    finish_reason: FinishReason
    steps: tuple[StepResult, ...]
