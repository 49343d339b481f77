"""The conformance kit for an output guard of your own (needs hypothesis).

The library proves of its own guards that nothing they must hold back ever leaves a run,
however the model's stream is cut, whenever the run is cancelled, whatever their judge
does. `check_output_guard` runs the same checks on yours:

    def test_my_guard_never_leaks() -> None:
        check_output_guard(MyRedactor(), ["4111 1111 1111 1111", "hunter2"])

For each hypothesis-generated example: prose around one of `values`, streamed by a
scripted model in any chunking; the caller cancels after any number of chunks, or
never; the models the guard asks (`judge_models`, via `AskModel`) answer with
`judge` (your script), fail, break mid-stream, answer nonsense or hang past the run's
deadline. It fails (`GuardLeak`, with the example) when a value reaches the caller
(the chunks, their UI message stream), the result (text, steps, messages), the memory
store the run saves its thread to (`MessageHistory`), or what a journal records of the
run beyond the model's own raw output (the requests sent, the chunks published; the
model's replies are recorded to be replayed: scrub them with `Recorder(secrets=...)`).
A run the guard stopped is fine (`blocked_ok=False` to require that the run finishes).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

try:
    from hypothesis import HealthCheck, given, note, settings
    from hypothesis import strategies as st
except ImportError as _missing:  # a dev dependency: the kit is for tests
    raise ImportError(
        "the guard conformance kit (interpreters.evals.check_output_guard) needs "
        "hypothesis: pip install hypothesis"
    ) from _missing

import msgspec

from interpreters.core.cancel import CancelSignal
from interpreters.evals.targets import Script
from interpreters.memory.handlers import memory_handlers
from interpreters.memory.store import InMemoryStore
from interpreters.record.journal import ModelReplied, Recorder, RunStarted
from interpreters.sim.simulator import Fail, Say, ScriptedModel, Simulator
from pipeline.agent import Agent
from pipeline.processor import BaseProcessor
from pipeline.processors.memory.processors import MessageHistory
from pipeline.ui_stream import ui_message_sse
from pipeline.values.chunks import Chunk

JudgeMode = str
"""How the guard's judges behave in an example: "answers" (your `judge` script),
"fails", "breaks", "nonsense" or "hangs"."""

JUDGE_MODES = ("answers", "fails", "breaks", "nonsense", "hangs")
RUN_TIMEOUT = 60.0
"""Each example's run deadline (virtual seconds): a hanging judge meets it."""

DEFAULT_PROSE = st.text("abcdefghij klmnopqrstuvwxyz ABC .,;!?\n", max_size=80)


class GuardLeak(AssertionError):
    """A sensitive value left a run through the guard: where, and the example."""


def _judge_script(mode: JudgeMode, judge: Script | None) -> ScriptedModel:
    if mode == "answers" and judge is not None:
        return judge if isinstance(judge, ScriptedModel) else ScriptedModel(judge)
    if mode == "fails":
        return ScriptedModel(lambda _r: Fail(status=500, retryable=False))
    if mode == "breaks":
        return ScriptedModel(lambda _r: Say(["unfinished ", "verdict"], break_after=1))
    if mode == "hangs":
        return ScriptedModel(lambda _r: Say("late", latency=RUN_TIMEOUT * 10))
    return ScriptedModel(lambda _r: Say("\u00af\\_(\u30c4)_/\u00af {not json"))


def _leaks(value: str, chunks: Sequence[Chunk], result_parts: Sequence[object],
           stored: object, journal_lines: Sequence[bytes]) -> list[str]:
    where: list[str] = []
    # a value split over deltas is whole again in what the caller joins
    streamed = "".join(getattr(c, "text", "") or getattr(c, "args_delta", "") for c in chunks)
    if value in streamed or value in msgspec.json.encode(list(chunks)).decode():
        where.append("the chunks the caller received")
    elif value in b"".join(ui_message_sse(list(chunks))).decode():
        where.append("the UI message stream")
    for name, part in zip(("result.text", "result.steps", "result.messages"), result_parts,
                          strict=True):
        text = part if isinstance(part, str) else msgspec.json.encode(part).decode()
        if value in text:
            where.append(name)
    if value in msgspec.json.encode(stored).decode():
        where.append("the memory store")
    if any(value in line.decode(errors="replace") for line in journal_lines):
        where.append("the journal (beyond the model's raw replies)")
    return where


def check_output_guard(
    guard: BaseProcessor | Callable[[], Sequence[BaseProcessor]],
    values: Sequence[str],
    *,
    prose: st.SearchStrategy[str] = DEFAULT_PROSE,
    judge_models: Sequence[str] = (),
    judge: Script | None = None,
    blocked_ok: bool = True,
    examples: int = 100,
) -> None:
    """Check that `guard` (an output processor, or a function giving the output
    processors of a fresh agent) never lets any of `values` out of a run, under any
    chunking, cancel and judge failure (see the module doc). Raises `GuardLeak` with a
    falsifying example; hypothesis shrinks it first."""
    if not values or any(not v for v in values):
        raise ValueError("give the sensitive values to check (non-empty strings)")
    make = guard if callable(guard) and not isinstance(guard, BaseProcessor) else None
    fixed = guard if isinstance(guard, BaseProcessor) else None

    def processors() -> list[BaseProcessor]:
        if make is not None:
            return list(make())
        assert fixed is not None
        return [fixed]

    @st.composite
    def streams(draw: st.DrawFn) -> tuple[str, list[str]]:
        value = draw(st.sampled_from(list(values)))
        sep = st.sampled_from([" ", "\n", ", ", ": ", " (", ") "])
        text = draw(prose) + draw(sep) + value + draw(sep) + draw(prose)
        cuts = sorted(set(draw(st.lists(st.integers(1, len(text) - 1), max_size=30))))
        bounds = [0, *cuts, len(text)]
        return value, [text[a:b] for a, b in itertools.pairwise(bounds)]

    modes = st.sampled_from([m for m in JUDGE_MODES if m != "answers" or judge is not None])

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(streams(), st.one_of(st.none(), st.integers(0, 40)), modes)
    def example(case: tuple[str, list[str]], cancel_after: int | None,
                mode: JudgeMode) -> None:
        value, pieces = case
        note(f"value {value!r} streamed as {pieces!r}; cancel after {cancel_after}, "
             f"judges {mode}")
        # a guard that sends the model back gets the value again
        agent = Agent.create(
            "sim/model", input_processors=[MessageHistory(last_messages=10)],
            output_processors=processors(), max_processor_retries=1,
        )
        store = InMemoryStore()
        recorder = Recorder()
        sim = Simulator(
            ScriptedModel([Say(pieces), Say(pieces)]),
            models={m: _judge_script(mode, judge) for m in judge_models},
            handlers=memory_handlers(store), observers=[recorder],
        )
        signal = CancelSignal()
        chunks: list[Chunk] = []
        with sim.stream(agent, "hi", thread_id="t", signal=signal,
                        timeout=RUN_TIMEOUT) as stream:
            for n, chunk in enumerate(stream):
                chunks.append(chunk)
                if cancel_after is not None and n + 1 >= cancel_after:
                    signal.cancel("the caller left")
            result = stream.result
        journal = recorder.last()
        lines = [msgspec.json.encode(e) for e in journal.entries
                 if not isinstance(e, ModelReplied | RunStarted)]
        stored = store.last_messages("t", 1000)
        where = _leaks(value, chunks, (result.text, result.steps, result.messages),
                       stored, lines)
        if where:
            raise GuardLeak(f"{value!r} reached {', '.join(where)} (run {result.status})")
        if not blocked_ok and result.status != "finished" and cancel_after is None:
            raise GuardLeak(f"the run did not finish: {result.status}: "
                            f"{result.error or result.tripwire}")

    example()


__all__ = ["JUDGE_MODES", "RUN_TIMEOUT", "GuardLeak", "check_output_guard"]
