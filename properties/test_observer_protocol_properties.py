"""Under every interpreter, however the run stops, its observers see each command followed
by exactly one reply or failure (a `Done` by the end), the end exactly once and last; the
trace records the commands the observers saw, in order; the chunks handed out are the
trace's (a prefix of them when the caller closed the stream early).

For the generated agents and scripts of test_equivalence, each run is stopped at a drawn
point: its signal cancelled as its k-th command is yielded, or its stream closed after
its k-th chunk (or never), under the sync interpreter, the async one's stream (asyncio
and trio) and the async `run`.
"""

from __future__ import annotations

from typing import Literal

import anyio
from hypothesis import given
from hypothesis import strategies as st

from effects import CloseStream, Done, Publish
from interpreters.aio import AsyncInterpreter
from interpreters.core.cancel import CancelSignal
from interpreters.core.trace import Trace
from interpreters.observers.observe import RunInfo, RunObserver
from interpreters.sim.simulator import Scripted
from interpreters.sync import SyncInterpreter
from pipeline.agent import Agent
from pipeline.protocol import LoopCommand
from pipeline.values.chunks import Chunk
from pipeline.values.result import RunResult
from properties.test_equivalence import (
    Check,
    Pipeline,
    _wired,
    check_text,
    pipelines,
    prompts,
    scripts,
)

Mode = Literal["sync", "asyncio", "trio", "async-run"]


class Protocol(RunObserver):
    """Checks the order of what it is told; cancels `signal` as command `cancel_at` is
    yielded."""

    def __init__(self, signal: CancelSignal, cancel_at: int | None) -> None:
        self.signal = signal
        self.cancel_at = cancel_at
        self.commands: list[LoopCommand] = []
        self.pending: LoopCommand | None = None
        self.ends: list[RunResult | None] = []
        self.wrong: list[str] = []
        """What broke the protocol (an observer that raised would only be dropped)."""

    def expect(self, ok: bool, what: str) -> None:
        if not ok:
            self.wrong.append(what)

    def command(self, cmd: LoopCommand, at: float) -> None:
        self.expect(not self.ends, f"{type(cmd).__name__} after the end")
        self.expect(self.pending is None,
                    f"{type(cmd).__name__} before a reply to {type(self.pending).__name__}")
        if len(self.commands) == self.cancel_at:
            self.signal.cancel("stop")
        self.commands.append(cmd)
        self.pending = cmd

    def _answered(self, cmd: LoopCommand) -> None:
        self.expect(not self.ends, f"an answer to {type(cmd).__name__} after the end")
        self.expect(cmd is self.pending,
                    f"an answer to {type(cmd).__name__}, pending {type(self.pending).__name__}")
        self.expect(type(cmd) is not Done, "Done answered")
        self.pending = None

    def reply(self, cmd: LoopCommand, reply: object, at: float) -> None:
        self._answered(cmd)

    def failed(self, cmd: LoopCommand, error: BaseException, at: float) -> None:
        self._answered(cmd)

    def end(self, result: RunResult | None, at: float) -> None:
        self.expect(not self.ends, "a second end")
        if result is not None:
            self.expect(isinstance(self.pending, Done) and self.pending.result == result,
                        "an end without its Done")
        self.ends.append(result)


class Watching:
    def __init__(self, signal: CancelSignal, cancel_at: int | None) -> None:
        self.signal = signal
        self.cancel_at = cancel_at
        self.runs: list[Protocol] = []

    def start(self, run: RunInfo) -> RunObserver:
        o = Protocol(self.signal, self.cancel_at)
        self.runs.append(o)
        return o


def run_under(
    mode: Mode, agent: Agent, script: list[Scripted], prompt: str,
    cancel_at: int | None, close_after: int | None,
) -> tuple[Protocol, Trace, list[Chunk], RunResult | None]:
    clock, resolve = _wired(script)
    signal = CancelSignal()
    watching = Watching(signal, cancel_at)
    trace = Trace()
    chunks: list[Chunk] = []
    result: RunResult | None = None
    if mode == "sync":
        interp = SyncInterpreter(
            resolve=resolve, handlers={Check: check_text}, clock=clock, sleep=clock.sleep,
            run_ids=lambda: "run1", observers=[watching],
        )
        with interp.stream(agent, prompt, trace=trace, signal=signal) as stream:
            for c in stream:
                chunks.append(c)
                if len(chunks) == close_after:
                    break
            result = stream.result if stream.done else None
    else:
        async def sleep(seconds: float) -> None:
            clock.sleep(seconds)

        a = AsyncInterpreter(
            resolve=resolve, handlers={Check: check_text}, clock=clock, sleep=sleep,
            run_ids=lambda: "run1", observers=[watching],
        )

        async def main() -> RunResult | None:
            if mode == "async-run":
                return await a.run(agent, prompt, trace=trace, signal=signal)
            async with a.stream(agent, prompt, trace=trace, signal=signal) as s:
                async for c in s:
                    chunks.append(c)
                    if len(chunks) == close_after:
                        break
            return s.result if s.done else None

        result = anyio.run(main, backend="trio" if mode == "trio" else "asyncio")
    (o,) = watching.runs
    return o, trace, chunks, result


modes: st.SearchStrategy[Mode] = st.sampled_from(("sync", "asyncio", "trio", "async-run"))


@given(
    pipeline=pipelines, script=scripts, prompt=prompts, mode=modes,
    stop=st.one_of(st.none(), st.tuples(st.sampled_from(("cancel", "close")),
                                        st.integers(0, 40))),
)
def test_observers_see_each_command_answered_once_and_one_end_however_the_run_stops(
    pipeline: Pipeline, script: list[Scripted], prompt: str, mode: Mode,
    stop: tuple[str, int] | None,
) -> None:
    cancel_at = stop[1] if stop is not None and stop[0] == "cancel" else None
    close_after = stop[1] + 1 if stop is not None and stop[0] == "close" else None
    o, trace, chunks, result = run_under(
        mode, pipeline.agent(), script, prompt, cancel_at, close_after
    )
    assert o.wrong == []
    assert len(o.ends) == 1
    assert o.ends == [result]  # None: closed before it finished
    assert [id(c) for c in trace.commands] == [id(c) for c in o.commands]
    if result is not None:
        assert isinstance(o.commands[-1], Done)
    if mode == "async-run":
        return
    # Nothing reaches the caller that the loop did not publish, in its order; a run not
    # stopped hands out every chunk. (The trace also has the chunks of the command a
    # cancel landed at, which were published but not handed out.)
    assert is_subsequence(chunks, trace.chunks)
    if stop is None:
        assert chunks == trace.chunks
    if mode == "sync" and cancel_at is not None and result is not None:
        # Checked before every command: a cancel lands unless the run's outcome was
        # decided already (all that was left was closing the model's stream, handing out
        # its last chunks, then Done).
        decided = all(type(c) in (CloseStream, Publish, Done) for c in o.commands[cancel_at:])
        assert result.status == "cancelled" or decided


def is_subsequence(part: list[Chunk], whole: list[Chunk]) -> bool:
    rest = iter(whole)
    return all(any(c == w for w in rest) for c in part)
