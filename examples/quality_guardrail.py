"""A quality guardrail: a judge model scores each response; below the bar the model is
asked again with feedback, up to three times, then the response is blocked.

The judge call is I/O, so the hook does not make it: it is a generator that yields an
`AskModel` request and receives the answer (`yield from ask(...)` types it: a
ModelAnswer). Every interpreter carries it out, and in the simulator the judge is a
scripted model too.
"""

from __future__ import annotations

from collections.abc import Generator

from effects import Continue, ask
from pipeline import (
    AskModel,
    Message,
    ModelAnswer,
    ModelRequest,
    OutputStepArgs,
    OutputStepResult,
    Processor,
    SystemMessage,
    TextPart,
    abort,
)

JUDGE_PROMPT = "Score the answer's quality from 0 to 1. Reply with the number only."


class QualityGuardrail(Processor):
    id = "quality-guardrail"

    def __init__(self, judge_model: str, *, threshold: float = 0.7, max_retries: int = 3) -> None:
        self.judge_model = judge_model
        self.threshold = threshold
        self.max_retries = max_retries

    def process_output_step(
        self, args: OutputStepArgs[None]
    ) -> Generator[object, object, OutputStepResult[None]]:
        if not args.text:
            return Continue()  # a tool-calling step: nothing to judge yet
        answer = yield from ask(AskModel(
            ModelRequest(
                model=self.judge_model,
                system=(SystemMessage(JUDGE_PROMPT),),
                messages=(
                    Message(id="judge-input", role="user", parts=(TextPart(args.text),)),
                ),
            )
        ))
        score = _score(answer)
        if score < self.threshold:
            if args.retry_count < self.max_retries:
                abort(
                    "Response quality too low. Please provide more detail.",
                    retry=True,
                    metadata={"quality_score": score},
                )
            abort("Response quality too low after multiple attempts.")
        return Continue()


def _score(answer: ModelAnswer) -> float:
    try:
        return float(answer.text.strip())
    except ValueError:
        return 0.0  # an unreadable verdict fails closed
