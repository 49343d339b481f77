"""The interpreter's half of the loop protocol, without I/O.

The agent loop (`pipeline.loop.agent_loop`) is one half of a run: a generator that yields
the commands of `pipeline.protocol` and takes their replies. `Driver` is the other half, in
the manner of h11's `Connection`: it holds what every interpreter must keep about a run
(the pending command, whether a model stream is open, the tool calls that finished, the
result) and the rules over it, and does no I/O. An interpreter is a thin loop of I/O
around it:

    d = Driver(loop)
    cmd = d.start()
    while d.result is None:
        if type(cmd) is Pull:
            deliver(cmd.publish)
            event = read(stream)             # a model event; LAST ones end the stream
            if type(event) in LAST:
                close(stream)
            cmd = d.send(event)
        elif type(cmd) is RunTools:
            cmd = d.send(run(cmd.calls, each_done=d.tool_finished))
        ...                                  # CallModel, Publish, Perform, AwaitHook, Sleep
    ...
    chunks = d.cancel(reason)                # the one cancel routine: deliver `chunks`

What it decides, so no interpreter does:
- **The stream.** A model stream is open from a CallModel answered with a non-last event
  until a last one (`LAST`) or a `CloseStream`; a `CloseStream` with no stream open is
  answered here and never reaches the interpreter.
- **The end.** `Done` sets `result` and closes the loop.
- **Cancel.** `cancel` throws `RunCancelled` at the pending command, with the outcomes
  of the tool calls that finished (reported by `tool_finished`), discards an awaitable
  that will not be awaited, and collects the final chunks the loop publishes.
- **Watching.** A `RunLog` (a trace) records every command and every chunk the loop
  publishes (as the command is taken: a cancel at a Publish or a Pull does not hand
  out the chunks it already lists);
  a `Watch` (the observers) sees every command, reply, failure and the end.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from effects import AwaitHook, CallModel, CloseStream, Done, Perform, Publish, Pull, RunTools
from pipeline.protocol.replies import AgentLoop, LoopCommand, RunCancelled, ToolOutcome
from pipeline.values.chunks import Chunk, ModelFinish
from pipeline.values.model import ModelEnded, ModelFailed
from pipeline.values.result import RunResult

LAST: frozenset[type] = frozenset({ModelFinish, ModelEnded, ModelFailed})
"""A model stream's last events: the interpreter closes the stream as it hands one over."""

_PLAIN: frozenset[type] = frozenset({Pull, Publish, CallModel, RunTools, Perform})
"""Commands with no rule of their own here: in an unwatched run, taking one is only
making it the pending command (`send`, `took` and `_take` check this inline)."""


class RunLog(Protocol):
    """What records a run's commands and the chunks they publish (the interpreters'
    `Trace`)."""

    chunks: list[Chunk]

    def record_command(self, c: LoopCommand) -> None: ...


class Watch(Protocol):
    """What watches a run from outside the loop (the interpreters' observers)."""

    def command(self, cmd: LoopCommand) -> None: ...

    def reply(self, cmd: LoopCommand, reply: object) -> None: ...

    def failed(self, cmd: LoopCommand, error: BaseException) -> None: ...

    def end(self, result: RunResult | None) -> None: ...


class Driver:
    """One run's protocol state, for the interpreter that carries out its commands.

    `cmd` is the command the loop waits on (None before `start`), `result` the run's
    result once it is over, `stream_open` whether a model stream is open (the interpreter
    holds it and closes it when this turns false, or at a cancel or failure), `finished`
    the outcomes of the pending RunTools' calls that ended (for a cancel).
    """

    __slots__ = (
        "_log", "_loop", "_watch", "cmd", "fast", "finished", "result", "send_pull",
        "stream_open",
    )

    def __init__(
        self, loop: AgentLoop, *, log: RunLog | None = None, watch: Watch | None = None
    ) -> None:
        self._loop = loop
        self._log = log
        self._watch = watch
        self.cmd: LoopCommand | None = None
        self.result: RunResult | None = None
        self.stream_open = False
        self.finished: list[ToolOutcome] | None = None
        self.fast = log is None and watch is None
        """Nothing records or watches the run (`send_pull` is there)."""
        self.send_pull: Callable[[object], LoopCommand] | None = loop.send if self.fast else None
        """When `fast`, the per-chunk path: the loop's own `send`, to answer a Pull (or the
        CallModel before it) with a model event and no bookkeeping. The interpreter then
        sets `cmd` to each Pull it gets and hands the first other command to `took`."""

    @property
    def log(self) -> RunLog | None:
        """What records the run (its trace), if anything."""
        return self._log

    def start(self) -> LoopCommand:
        """The run's first command (once; later calls give the pending one)."""
        if self.cmd is not None:
            return self.cmd
        return self._take(next(self._loop))

    def send(self, reply: object) -> LoopCommand:
        """Answer the pending command; the next command that needs the interpreter."""
        cmd = self.cmd
        t = type(cmd)
        if t is Pull or t is CallModel:
            self.stream_open = type(reply) not in LAST
        elif t is CloseStream:
            self.stream_open = False
        elif t is RunTools:
            self.finished = None
        watch = self._watch
        if watch is not None:
            assert cmd is not None
            watch.reply(cmd, reply)
        nxt = self._loop.send(reply)
        if self.fast and type(nxt) in _PLAIN:  # `_take`'s first lines: a call less
            self.cmd = nxt
            return nxt
        return self._take(nxt)

    def took(self, cmd: LoopCommand, event: object) -> LoopCommand:
        """After `send_pull` answered with `event` and the loop gave `cmd` (not a Pull): the
        bookkeeping `send` does; the next command that needs the interpreter."""
        self.stream_open = type(event) not in LAST
        if type(cmd) in _PLAIN:  # (`send_pull` is there only when `fast`)
            self.cmd = cmd
            return cmd
        return self._take(cmd)

    def fail(self, error: BaseException) -> LoopCommand:
        """The pending command failed with `error` (thrown into the loop); the next command."""
        cmd = self.cmd
        self.finished = None
        watch = self._watch
        if watch is not None:
            assert cmd is not None
            watch.failed(cmd, error)
        return self._take(self._loop.throw(error))

    def tool_finished(self, outcome: ToolOutcome) -> None:
        """A call of the pending RunTools ended (its side effects happened): a cancel
        keeps its real result."""
        if type(self.cmd) is RunTools:
            if self.finished is None:
                self.finished = []
            self.finished.append(outcome)

    def cancel(self, reason: str) -> tuple[Chunk, ...]:
        """End the run as cancelled at the pending command, with no I/O: the loop finishes
        with status "cancelled" (`result`); the chunks it published while finishing, for
        the interpreter to hand out. The interpreter closes its model stream itself."""
        if self.result is not None:
            return ()
        cmd = self.start()
        if type(cmd) is AwaitHook:  # never awaited, or its await was cancelled
            discard(cmd.awaitable)
        if type(cmd) is Done:
            return ()
        finished = self.finished
        done = tuple(finished) if finished and type(cmd) is RunTools else ()
        out: list[Chunk] = []
        try:
            cmd = self.fail(RunCancelled(reason, done))
            while type(cmd) is Publish:
                out.extend(cmd.chunks)
                cmd = self.send(None)
        except (RunCancelled, StopIteration) as e:
            raise RuntimeError("the agent loop did not finish a cancelled run") from e
        if self.result is None:
            raise RuntimeError(f"the agent loop asked for {cmd!r} after a cancel")
        return tuple(out)

    def close(self) -> None:
        """Stop the run where it is (the caller stopped, or the interpreter failed): the
        loop is closed; a run not over has no result."""
        self._loop.close()
        self.__del__()

    def __del__(self) -> None:
        # A run dropped unfinished (an async stream never closed, a sync one never
        # started) still ends for its watchers, once, as a dropped loop generator did.
        if self.result is None and self._watch is not None:
            watch, self._watch = self._watch, None
            watch.end(None)

    def _take(self, cmd: LoopCommand) -> LoopCommand:
        """Make `cmd` the pending command: record and show it, answer a CloseStream with
        no stream open, finish at Done; the first command that needs the interpreter."""
        if self.fast and type(cmd) in _PLAIN:
            self.cmd = cmd
            return cmd
        log, watch = self._log, self._watch
        while True:
            if log is not None:
                log.record_command(cmd)
            if watch is not None:
                watch.command(cmd)
            t = type(cmd)
            if t is CloseStream and not self.stream_open:
                self.cmd = cmd
                if watch is not None:
                    watch.reply(cmd, None)
                cmd = self._loop.send(None)
                continue
            self.cmd = cmd
            if type(cmd) is Pull:
                if log is not None and cmd.publish:
                    log.chunks.extend(cmd.publish)
            elif type(cmd) is Publish:
                if log is not None:
                    log.chunks.extend(cmd.chunks)
            elif type(cmd) is Done:
                self.result = result = cmd.result
                self._loop.close()
                if watch is not None:
                    self._watch = None
                    watch.end(result)
            return cmd


def discard(awaitable: object) -> None:
    """Close an awaitable that will not be awaited (no "coroutine was never awaited")."""
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()


__all__ = ["LAST", "Driver", "RunLog", "Watch", "discard"]
