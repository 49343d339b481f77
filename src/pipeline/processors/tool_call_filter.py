"""ToolCallFilter: tool calls and their results out of the history the model sees.

All of them, or those of the named tools (`exclude`), or all but the named (`keep`). A
call goes with its result (matched by id, whatever name the result carries), so the
history stays paired: an assistant message left with only its text keeps the text, a
message left empty goes. The filtered history is then put through `repair_pairing`, so
even a damaged history comes out paired.
"""

from __future__ import annotations

from collections.abc import Iterable

from effects import Continue, Replace
from pipeline.processor import (
    InputArgs,
    InputResult,
    InputStepArgs,
    InputStepResult,
    Processor,
    StepChange,
)
from pipeline.processors.options import Options
from pipeline.values.messages import (
    Message,
    MessageList,
    Part,
    Source,
    ToolCallPart,
    ToolResultPart,
)
from pipeline.values.pairing import repair_pairing

__all__ = ["ToolCallFilter", "filter_tool_calls"]


def filter_tool_calls(
    messages: tuple[Message, ...],
    sources: tuple[Source, ...],
    *,
    exclude: frozenset[str] | None = None,
    keep: frozenset[str] | None = None,
) -> tuple[tuple[Message, ...], tuple[Source, ...]]:
    """`messages` without the calls to remove (all when both `exclude` and `keep` are
    None; those named in `exclude`; those not named in `keep`) and their results, paired."""

    def removed(name: str) -> bool:
        if exclude is not None:
            return name in exclude
        if keep is not None:
            return name not in keep
        return True

    # A result belongs to the closest call before it with its id that has no result yet
    # (the policy of `repair_pairing`): ids repeat across turns on some servers, so a
    # kept tool's `call_0` must not lose its result because a removed tool's did.
    open_calls: dict[str, list[bool]] = {}
    out: list[Message] = []
    out_sources: list[Source] = []
    for m, s in zip(messages, sources, strict=True):
        parts: list[Part] = []
        for p in m.parts:
            if isinstance(p, ToolCallPart):
                gone = removed(p.tool_name)
                open_calls.setdefault(p.tool_call_id, []).append(gone)
                if gone:
                    continue
            elif isinstance(p, ToolResultPart):
                pending = open_calls.get(p.tool_call_id)
                gone = pending.pop() if pending else removed(p.tool_name)
                if gone:
                    continue
            parts.append(p)
        if len(parts) == len(m.parts):
            out.append(m)
        elif parts:
            out.append(m.with_parts(parts))
        else:
            continue
        out_sources.append(s)
    filtered = tuple(out)
    repaired = repair_pairing(filtered)
    if repaired is not filtered and len(repaired) != len(filtered):
        # repair added or dropped messages: sources by id (added ones: context)
        by_id = {m.id: s for m, s in zip(out, out_sources, strict=True)}
        return repaired, tuple(by_id.get(m.id, "context") for m in repaired)
    return repaired, tuple(out_sources)


class ToolCallFilter(Processor):
    """An input processor (see the module docstring). `every_step=True` filters before
    every model call too, so the run's own tool exchanges are hidden from later steps
    (they still run, and `result.steps` has them)."""

    def __init__(
        self,
        *,
        exclude: Iterable[str] | None = None,
        keep: Iterable[str] | None = None,
        every_step: bool = False,
        id: str = "tool-call-filter",
    ) -> None:
        o = Options("ToolCallFilter")
        if exclude is not None and keep is not None:
            raise o.fail("keep", keep, "None when exclude is given (give exclude or keep, "
                         "not both)")
        if exclude is not None:
            exclude = o.strings("exclude", exclude, describe="tool names")
        if keep is not None:
            keep = o.strings("keep", keep, describe="tool names")
        o.flag("every_step", every_step)
        o.id(id)
        self.id = id
        self.exclude = None if exclude is None else frozenset(exclude)
        self.keep = None if keep is None else frozenset(keep)
        self.every_step = every_step

    def filter(self, ml: MessageList) -> MessageList | None:
        """The filtered list, or None when nothing is removed."""
        messages, sources = filter_tool_calls(
            ml.messages, ml.sources, exclude=self.exclude, keep=self.keep
        )
        if len(messages) == len(ml.messages) and all(
            a is b for a, b in zip(messages, ml.messages, strict=True)
        ):
            return None
        return MessageList(messages, sources, ml.system)

    def process_input(self, args: InputArgs[None]) -> InputResult[None]:
        ml = self.filter(args.message_list)
        return Continue() if ml is None else Replace(ml)

    def process_input_step(self, args: InputStepArgs[None]) -> InputStepResult[None]:
        if not self.every_step:
            return Continue()
        ml = self.filter(args.message_list)
        return Continue() if ml is None else Replace(StepChange(message_list=ml))
