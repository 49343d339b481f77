"""Pick the model per step: a fast one first, a stronger one after tool calls, and no more
tools once the run has gone on for more than five steps."""

from __future__ import annotations

from effects import Continue, Replace
from pipeline import InputStepArgs, InputStepResult, Processor, StepChange

FAST = "openai/gpt-5-mini"
STRONG = "openai/gpt-5.4"


class DynamicModel(Processor):
    id = "dynamic-model"

    def process_input_step(self, args: InputStepArgs[None]) -> InputStepResult[None]:
        if args.step_number == 0:
            return Replace(StepChange(model=FAST))
        if args.steps and args.steps[-1].tool_calls:
            change = StepChange(model=STRONG)
            if args.step_number > 5:
                change = StepChange(model=STRONG, tool_choice="none")
            return Replace(change)
        if args.step_number > 5:
            return Replace(StepChange(tool_choice="none"))
        return Continue()
