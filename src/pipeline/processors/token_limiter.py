"""TokenLimiterProcessor: a token budget for the history sent and for the answer streamed.

As an input processor it drops the oldest messages until the history (system messages
included) fits `limit` tokens, cutting only where `pipeline.values.pairing.cut_points` allows,
so no tool call is ever sent without its result; once before the run and, with
`every_step` (default), before every model call, as a tool loop grows. As an output
processor it ends the answer at `limit` tokens: `truncate` cuts the chunk that crosses
the budget and drops the text after it, `abort` stops the run.

Counting the history is incremental: the state keeps the messages already counted, so
a step costs one comparison of the old messages (identity, in C) plus counting the new.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from effects import Abort, Continue, Out, Replace, Skip
from pipeline.processor import (
    InputArgs,
    InputResult,
    InputStepArgs,
    InputStepResult,
    StatefulProcessor,
    StepChange,
    StreamArgs,
    StreamResult,
)
from pipeline.processors.options import Options
from pipeline.processors.token_counting import (
    TokenCounter,
    check_counter,
    count_message,
    count_system,
    longest_prefix_within,
)
from pipeline.values.chunks import Chunk, DataChunk, ReasoningDelta, TextDelta
from pipeline.values.messages import Message, MessageList, SystemMessage
from pipeline.values.pairing import cut_points

__all__ = [
    "CountMode", "LimiterState", "OutputStrategy", "TokenLimiterProcessor", "first_fit",
    "trim_start",
]

OutputStrategy = Literal["truncate", "abort"]
CountMode = Literal["cumulative", "part"]


class LimiterState(msgspec.Struct, frozen=True):
    """Per run: the history last counted and its tokens, and the answer's tokens."""

    counted: tuple[Message, ...] = ()
    total: int = 0
    output_tokens: int = 0
    truncated: bool = False


def first_fit(costs: tuple[int, ...], budget: int) -> int:
    """The smallest i such that the costs from i on sum to at most `budget`."""
    total, first = 0, len(costs)
    for i in range(len(costs) - 1, -1, -1):
        total += costs[i]
        if total > budget:
            break
        first = i
    return first


def trim_start(
    messages: tuple[Message, ...],
    costs: tuple[int, ...],
    budget: int,
    *,
    start_with_user: bool,
) -> int | None:
    """The smallest i such that `messages[i:]` fits `budget` (by `costs`), is a
    pairing-safe cut (`cut_points`) and, with `start_with_user`, starts with a user
    message; None when no non-empty suffix qualifies."""
    first = first_fit(costs, budget)
    if first == 0:
        return 0
    for c in cut_points(messages):
        if c < first:
            continue
        if c == len(messages):
            return None
        if not start_with_user or messages[c].role == "user":
            return c
    return None


class TokenLimiterProcessor(StatefulProcessor[LimiterState]):
    """See the module docstring.

    `counter`: how tokens are counted (`ApproxTokenCounter()` by default; a real
    tokenizer through `EncodingCounter`). `message_overhead`: tokens added per message
    for its role and framing. `start_with_user`: the kept history starts with a user
    message (what Anthropic requires, and it keeps the question with its answers); when
    no such cut fits, the run is aborted rather than sending more than the budget.
    `count_mode`: `cumulative` counts the whole answer of the run, `part` each chunk on
    its own. `count_reasoning`: reasoning deltas count too (and are cut).
    """

    either_list = True  # an input check, an output check or both, as placed

    def __init__(
        self,
        limit: int,
        *,
        strategy: OutputStrategy = "truncate",
        count_mode: CountMode = "cumulative",
        counter: TokenCounter | None = None,
        every_step: bool = True,
        count_system_messages: bool = True,
        start_with_user: bool = True,
        count_reasoning: bool = True,
        message_overhead: int = 4,
        id: str = "token-limiter",
    ) -> None:
        o = Options("TokenLimiterProcessor")
        o.integer("limit", limit, min=1)
        o.choice("strategy", strategy, OutputStrategy)
        o.choice("count_mode", count_mode, CountMode)
        checked = check_counter(o, counter)
        for name, value in (("every_step", every_step),
                            ("count_system_messages", count_system_messages),
                            ("start_with_user", start_with_user),
                            ("count_reasoning", count_reasoning)):
            o.flag(name, value)
        o.integer("message_overhead", message_overhead, min=0)
        o.id(id)
        self.id = id
        self.limit = limit
        self.strategy: OutputStrategy = strategy
        self.count_mode: CountMode = count_mode
        self.counter: TokenCounter = checked
        self.every_step = every_step
        self.count_system_messages = count_system_messages
        self.start_with_user = start_with_user
        self.count_reasoning = count_reasoning
        self.message_overhead = message_overhead

    def initial_state(self) -> LimiterState:
        return LimiterState()

    # --- input ------------------------------------------------------------------------

    def message_tokens(self, m: Message) -> int:
        return count_message(self.counter, m, overhead=self.message_overhead)

    def history_tokens(
        self, messages: tuple[Message, ...], system: tuple[SystemMessage, ...] = ()
    ) -> int:
        """What this processor counts for `messages` and `system`."""
        sys_tokens = (
            count_system(self.counter, system, overhead=self.message_overhead)
            if self.count_system_messages
            else 0
        )
        return sys_tokens + sum(self.message_tokens(m) for m in messages)

    def _total(self, messages: tuple[Message, ...], state: LimiterState) -> int:
        """The messages' tokens, counting only those `state` has not counted yet."""
        n = len(state.counted)
        if n and len(messages) >= n and messages[:n] == state.counted:  # identity first, in C
            return state.total + sum(self.message_tokens(m) for m in messages[n:])
        return sum(self.message_tokens(m) for m in messages)

    def _trim(
        self, ml: MessageList, system: tuple[SystemMessage, ...], state: LimiterState
    ) -> tuple[Continue | Abort | MessageList, LimiterState]:
        messages = ml.messages
        total = self._total(messages, state)
        budget = self.limit - (
            count_system(self.counter, system, overhead=self.message_overhead)
            if self.count_system_messages
            else 0
        )
        if total <= budget:  # the common case: nothing to drop, nothing more to count
            return Continue(), msgspec.structs.replace(state, counted=messages, total=total)
        costs = tuple(self.message_tokens(m) for m in messages)
        start = trim_start(messages, costs, budget, start_with_user=self.start_with_user)
        if start is None:
            return (
                Abort(
                    f"The conversation does not fit the token budget of {self.limit} "
                    "even after dropping all the history that can be dropped",
                    metadata={"processor_id": self.id, "limit": self.limit,
                              "tokens": total + self.limit - budget},
                ),
                state,
            )
        kept = messages[start:]
        new = MessageList(kept, ml.sources[start:], ml.system)
        return new, msgspec.structs.replace(state, counted=kept, total=sum(costs[start:]))

    def process_input(self, args: InputArgs[LimiterState]) -> InputResult[LimiterState]:
        effect, state = self._trim(args.message_list, args.system_messages, args.state)
        if isinstance(effect, MessageList):
            return Out(Replace(effect), state)
        return Out(effect, state)

    def process_input_step(
        self, args: InputStepArgs[LimiterState]
    ) -> InputStepResult[LimiterState]:
        if not self.every_step:
            return Continue()
        effect, state = self._trim(args.message_list, args.system_messages, args.state)
        if isinstance(effect, MessageList):
            return Out(Replace(StepChange(message_list=effect)), state)
        return Out(effect, state)

    # --- output -----------------------------------------------------------------------

    def process_output_stream(self, args: StreamArgs[LimiterState]) -> StreamResult[LimiterState]:
        part = args.part
        if type(part) is not TextDelta and not (
            self.count_reasoning and type(part) is ReasoningDelta
        ):
            return Continue()
        assert isinstance(part, TextDelta | ReasoningDelta)
        state = args.state
        if state.truncated:
            return Skip()
        n = self.counter.count(part.text)
        used = state.output_tokens if self.count_mode == "cumulative" else 0
        if used + n <= self.limit:
            return Out(Continue(), msgspec.structs.replace(state, output_tokens=used + n))
        if self.strategy == "abort":
            return Abort(
                f"The answer exceeded the token limit of {self.limit}",
                metadata={"processor_id": self.id, "limit": self.limit},
            )
        keep = longest_prefix_within(self.counter, part.text, self.limit - used)
        new_state = msgspec.structs.replace(
            state, output_tokens=used + self.counter.count(keep),
            truncated=self.count_mode == "cumulative",
        )
        note = DataChunk(f"data-{self.id}", {"processor_id": self.id, "action": "truncate",
                                              "limit": self.limit})
        effect: Replace[Chunk] | Skip = (
            Replace(msgspec.structs.replace(part, text=keep)) if keep else Skip()
        )
        return Out(effect, new_state, (note,))
