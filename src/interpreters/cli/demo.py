"""`pipeline demo`: a small agent on the simulator, streamed to the terminal.

A weather tool, three processors (a stream content filter, a stateful word counter, a
quality guardrail whose judge is a second scripted model) and one guardrail retry, all
in virtual time, so it needs no key, no network and takes no real time.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Generator
from typing import Any, TextIO

from effects import Abort, Continue, Out, Perform
from interpreters.core.trace import Trace
from interpreters.sim.simulator import Say, ScriptedModel, Simulator, call, numbered_run_ids
from pipeline import (
    Agent,
    AskModel,
    DataChunk,
    Message,
    ModelAnswer,
    ModelRequest,
    OutputStepArgs,
    OutputStepResult,
    Processor,
    StatefulProcessor,
    StreamArgs,
    StreamResult,
    SystemMessage,
    TextDelta,
    TextPart,
    abort,
)
from pipeline.protocol import EffectRecord
from pipeline.values import Finish, StepStart, ToolCall, ToolError, ToolResult, Tripwire
from pipeline.values.chunks import ErrorChunk


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return {"paris": "sunny, 21°C"}.get(city.lower(), "unknown")


class NoSecrets(Processor):
    """Stops the stream if the model starts leaking a password."""

    id = "no-secrets"

    def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
        if isinstance(args.part, TextDelta) and "password" in args.part.text.lower():
            abort("the model tried to reveal a password")
        return Continue()


class WordCount(StatefulProcessor[int]):
    """Counts streamed words across the run; reports them as a data chunk at the end."""

    id = "word-count"

    def initial_state(self) -> int:
        return 0

    def process_output_stream(self, args: StreamArgs[int]) -> StreamResult[int]:
        if isinstance(args.part, TextDelta):
            return Out(Continue(), args.state + len(args.part.text.split()))
        if isinstance(args.part, Finish):
            return Out(Continue(), args.state, (DataChunk("data-word-count", args.state),))
        return Continue()


class Judge(Processor):
    """Asks a judge model to score each final answer; too short an answer is retried."""

    id = "judge"

    def process_output_step(
        self, args: OutputStepArgs[None]
    ) -> Generator[object, object, OutputStepResult[None]]:
        if args.tool_calls or not args.text:
            return Continue()
        verdict = yield AskModel(
            ModelRequest(
                model="sim/judge",
                system=(SystemMessage("Score 0-1. Reply with the number only."),),
                messages=(Message(id="judged", role="user", parts=(TextPart(args.text),)),),
            )
        )
        score = float(verdict.text) if isinstance(verdict, ModelAnswer) else 0.0
        if score < 0.7:
            abort(f"Too terse (score {score}). Give the temperature too.", retry=True)
        return Continue()


def demo_simulator() -> Simulator:
    main = ScriptedModel(
        [
            Say(["Let me ", "check the ", "weather."], calls=[call("get_weather", city="Paris")],
                latency=0.4, chunk_latency=0.05),
            Say(["It is ", "sunny."], latency=0.3, chunk_latency=0.05),
            Say(["Paris is ", "sunny and ", "21°C today: ", "a fine day ", "for a walk."],
                latency=0.3, chunk_latency=0.05),
        ]
    )
    judge = ScriptedModel([Say("0.3", latency=0.2), Say("0.9", latency=0.2)])
    return Simulator(main, models={"sim/judge": judge}, run_ids=numbered_run_ids())


def demo_agent() -> Agent:
    return Agent.create(
        "sim/assistant",
        instructions="You are a helpful weather assistant.",
        tools=[get_weather],
        output_processors=[NoSecrets(), WordCount(), Judge()],
        max_processor_retries=1,
    )


class _LiveTrace(Trace):
    """Prints processor decisions other than Continue as they happen."""

    def __init__(self, out: TextIO) -> None:
        super().__init__()
        self._out = out

    def record_effect(self, e: EffectRecord) -> None:
        super().record_effect(e)
        eff = e.effect
        if isinstance(eff, Abort) and eff.retry:
            self._out.write(f"\n  ↺ {e.processor_id} ({e.hook}) asks for a retry: {eff.reason}")
        elif not isinstance(eff, Continue | Out):
            self._out.write(f"\n  • {e.processor_id} ({e.hook}) → {type(eff).__name__}")


_SHOWN: dict[type, Callable[[Any], str]] = {
    TextDelta: lambda c: c.text,
    ToolCall: lambda c: f"\n  → {c.tool_name}({json.dumps(dict(c.args))})",
    ToolResult: lambda c: f"\n  ← {c.tool_name}: {c.result}",
    ToolError: lambda c: f"\n  ← {c.tool_name} failed: {c.error}",
    DataChunk: lambda c: f"\n  [{c.name}] {json.dumps(c.data)}",
    Tripwire: lambda c: f"\n  ✋ tripwire from {c.processor_id}: {c.reason}",
    ErrorChunk: lambda c: f"\n  ✗ {c.kind}: {c.message}",
}
"""How the demo prints each kind of chunk it shows (by its exact type)."""


def run_demo(out: TextIO | None = None) -> int:
    """Stream the demo run to `out` (stdout); returns the process exit code."""
    w = out or sys.stdout
    sim = demo_simulator()
    agent = demo_agent()
    start = sim.clock.now
    prompt = "What's the weather in Paris?"
    w.write("pipeline demo: one agent run on the simulator (scripted models, virtual time)\n")
    w.write(f"agent {agent.model} · tools: get_weather · processors: "
            f"{', '.join(p.id for p in agent.output_processors)}\n")
    w.write(f"\nuser: {prompt}")
    trace = _LiveTrace(w)
    stream = sim.stream(agent, prompt, trace=trace)
    again = False
    for chunk in stream:
        if isinstance(chunk, StepStart):
            label = f"step {chunk.step_number}" + (", once more" if again else "")
            w.write(f"\n\n── {label} ──\nassistant: ")
            again = False
        elif isinstance(chunk, DataChunk) and chunk.name == "data-step-discarded":
            w.write("\n  (that response is discarded; the step runs again)")
            again = True
        elif type(chunk) in _SHOWN:
            w.write(_SHOWN[type(chunk)](chunk))
        w.flush()
    r = stream.result
    judge_calls = len(trace.commands_of(Perform))
    w.write(
        f"\n\n{r.status}: {len(r.steps)} steps, {r.retry_count} retry, "
        f"{r.usage.total_tokens} tokens, {len(sim.model.requests)} model calls "
        f"+ {judge_calls} judge calls, {sim.clock.now - start:.2f} s of virtual time\n"
        f"final answer: {r.steps[-1].text if r.steps else ''}\n"
    )
    w.flush()
    return 0 if r.status == "finished" else 1
