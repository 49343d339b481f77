"""Turn earlier reasoning parts into `<thinking>` text before every model call.

Useful when a run switches to a provider that cannot take reasoning parts back.
"""

from __future__ import annotations

from effects import Continue, Replace
from pipeline import InputStepArgs, InputStepResult, Message, Processor, StepChange, TextPart
from pipeline.values import ReasoningPart


def reasoning_as_thinking(m: Message) -> Message:
    if m.role != "assistant" or not any(isinstance(p, ReasoningPart) for p in m.parts):
        return m
    return m.with_parts(
        TextPart(f"<thinking>{p.text}</thinking>") if isinstance(p, ReasoningPart) else p
        for p in m.parts
    )


class ReasoningTransformer(Processor):
    id = "reasoning-transformer"

    def process_input_step(self, args: InputStepArgs[None]) -> InputStepResult[None]:
        changed = args.message_list.map_messages(reasoning_as_thinking)
        if changed == args.message_list:
            return Continue()
        return Replace(StepChange(message_list=changed))
