"""Summarization: when the history grows past a token budget, its older turns are
summarized by a judge model (`AskModel`) and replaced by the summary.

The history is cut only where `pipeline.values.pairing.cut_points` allows, so every tool call
kept has its result and none is summarized away from it (a provider answers 400 to a
result without its call); the run's newest user message is always kept. The summary goes
into a system message tagged `memory-summary`. It changes the history of this run only:
the store keeps every message (`MessageHistory` saves only the run's new ones).

Place it after the memory processors that add history and before (or instead of)
`TokenLimiterProcessor`, which then cuts hard what a summary could not bring in budget.
"""

from __future__ import annotations

from collections.abc import Generator

from effects import Continue, Replace, ask
from pipeline.processor import AskModel, InputArgs, InputResult, Processor
from pipeline.processors.options import Options
from pipeline.processors.token_counting import TokenCounter, check_counter, count_message
from pipeline.processors.token_limiter import first_fit
from pipeline.values.messages import Message, MessageList, SystemMessage, TextPart
from pipeline.values.model import ModelRequest
from pipeline.values.pairing import cut_points

__all__ = ["SUMMARY_TAG", "Summarization", "summary_cut"]

SUMMARY_TAG = "memory-summary"
_INSTRUCTIONS = (
    "Summarize the conversation below for the assistant that continues it: the user's "
    "facts, preferences, decisions, open questions and the results of tool calls. Be "
    "brief and factual; reply with the summary only."
)


def summary_cut(
    messages: tuple[Message, ...], costs: tuple[int, ...], keep: int, last: int
) -> int:
    """Where to cut: the smallest pairing-safe cut c (`cut_points`) with 0 < c <= `last`
    after which the messages fit `keep` tokens (by `costs`), else the largest such cut
    (the most that can be summarized); 0 when there is none."""
    fits = first_fit(costs, keep)
    best = 0
    for c in cut_points(messages):
        if c == 0 or c > last:
            continue
        if c >= fits:
            return c
        best = c
    return best


def _transcript(messages: tuple[Message, ...]) -> str:
    lines: list[str] = []
    for m in messages:
        for p in m.parts:
            if isinstance(p, TextPart):
                lines.append(f"{m.role}: {p.text}")
            elif hasattr(p, "tool_name"):
                lines.append(f"{m.role} ({type(p).__name__}): {p!r}")
    return "\n".join(lines)


class Summarization(Processor):
    """Summarizes the oldest history once the messages pass `max_tokens` (counted by
    `counter`), keeping the newest `keep_tokens` (half of `max_tokens` by default) as
    they are. `judge_model` writes the summary (`instructions`: what it is told)."""

    def __init__(
        self,
        max_tokens: int,
        *,
        judge_model: str,
        keep_tokens: int | None = None,
        counter: TokenCounter | None = None,
        instructions: str = _INSTRUCTIONS,
        id: str = "summarization",
    ) -> None:
        o = Options(type(self).__name__)
        self.max_tokens = o.integer("max_tokens", max_tokens, min=1)
        o.optional_integer("keep_tokens", keep_tokens, min=0)
        if keep_tokens is not None and keep_tokens > max_tokens:
            raise o.fail("keep_tokens", keep_tokens, f"an int from 0 to max_tokens ({max_tokens})")
        o.text("judge_model", judge_model)
        o.text("instructions", instructions)
        self.counter = check_counter(o, counter)
        o.id(id)
        self.keep_tokens = max_tokens // 2 if keep_tokens is None else keep_tokens
        self.judge_model = judge_model
        self.instructions = instructions
        self.id = id

    def process_input(self, args: InputArgs[None]) -> Generator[object, object, InputResult[None]]:
        ml = args.message_list
        messages = ml.messages
        costs = tuple(count_message(self.counter, m) for m in messages)
        if sum(costs) <= self.max_tokens:
            return Continue()
        last = max((i for i, m in enumerate(messages) if m.role == "user"), default=0)
        cut = summary_cut(messages, costs, self.keep_tokens, last)
        if cut == 0:
            return Continue()
        answer = yield from ask(AskModel(ModelRequest(
            model=self.judge_model,
            system=(SystemMessage(self.instructions),),
            messages=(Message(
                id=f"{args.context.run_id}-summary-request", role="user",
                parts=(TextPart(_transcript(messages[:cut])),),
            ),),
        )))
        summary = SystemMessage(
            f"Summary of the earlier conversation:\n{answer.text.strip()}", SUMMARY_TAG
        )
        kept = MessageList(messages[cut:], ml.sources[cut:], ml.system)
        return Replace(kept.add_system(summary))
