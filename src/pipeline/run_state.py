"""What one run holds, and what every hook phase does with a hook's outcome.

`_Run` (loop.py) is put together from mixins, one per phase of a run (step_config.py,
stream_stage.py, loop.py); this is their common base. Mixins rather than objects the
run delegates to, so that the per-chunk path reads `self.ml` as one attribute lookup,
not two.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from effects import Abort
from pipeline.agent import Agent
from pipeline.chunks import Chunk, FinishReason, Tripwire, Usage
from pipeline.hooks import Bound, Outcome
from pipeline.messages import DataPart, Message, MessageList
from pipeline.processor import RunContext
from pipeline.protocol import EffectRecord, Recorder
from pipeline.result import RunError, StepResult


class Ids:
    """Deterministic ids for one run: `<run_id>-<kind><n>`."""

    __slots__ = ("_n", "_run")

    def __init__(self, run_id: str) -> None:
        self._run = run_id
        self._n = 0

    def next(self, kind: str) -> str:
        self._n += 1
        return f"{self._run}-{kind}{self._n}"


class Tripped(Exception):
    """Raised inside the loop when a processor aborts: the run ends "tripped"."""

    def __init__(self, tripwire: Tripwire) -> None:
        self.tripwire = tripwire


class Failed(Exception):
    """Raised inside the loop when the run fails (`error` says how): it ends "failed"."""

    def __init__(self, error: RunError) -> None:
        self.error = error


class RunState:
    """The state every phase of a run reads; `_Run.__init__` sets it up."""

    agent: Agent
    ctx: RunContext
    clock: Callable[[], float]
    record: Recorder | None
    ids: Ids
    # Each processor's state, by `Bound.slot`.
    states: list[object]
    ml: MessageList
    steps: list[StepResult]
    _steps_t: tuple[StepResult, ...]
    usage: Usage
    retry_count: int
    api_retry_count: int
    finish_reason: FinishReason
    pending: list[Chunk]
    """Chunks processed but not yet handed to the interpreter."""
    held: list[DataPart]
    """Non-transient data chunks hooks emitted outside a model response, not yet kept in
    a message: the next response message of the run takes them (`_step`), or else the
    last one when the run ends (`_keep_held`)."""

    def _apply(self, b: Bound, o: Outcome, *, keep: bool = True) -> object:
        """Keep state and emits of a hook outcome; return its effect (tripwire on Abort).

        Emits are streamed; unless `keep` is False (the caller keeps them itself), the
        non-transient ones are held to be kept in the run's messages."""
        if o.changed_state:
            self.states[b.slot] = o.state
        if o.emit:
            self.pending.extend(o.emit)
            if keep:
                self.held.extend(DataPart(c.name, c.data) for c in o.emit if not c.transient)
        effect = o.effect
        if isinstance(effect, Abort) and not effect.reason:
            effect = msgspec.structs.replace(
                effect, reason=f"Tripwire triggered by {b.processor_id}"
            )
        if self.record is not None:
            self.record(EffectRecord(b.processor_id, b.hook, effect))
        return effect

    def _keep_held(self) -> None:
        """At the end of a run: held data goes into the run's last answer (an assistant
        message it added), or into an assistant message of its own if there is none."""
        held, self.held = tuple(self.held), []
        if not held:
            return
        ml = self.ml
        msgs = ml.messages
        for i in range(len(msgs) - 1, -1, -1):
            if ml.sources[i] == "response" and msgs[i].role == "assistant":
                kept = msgs[i].with_parts((*msgs[i].parts, *held))
                self.ml = MessageList((*msgs[:i], kept, *msgs[i + 1 :]), ml.sources, ml.system)
                return
        self.ml = ml.add(
            Message(
                id=self.ids.next("msg"),
                role="assistant",
                parts=held,
                created_at=self.clock(),
                thread_id=self.ctx.thread_id,
                resource_id=self.ctx.resource_id,
            ),
            "response",
        )

    def _trip(self, b: Bound, a: Abort) -> Tripped:
        return Tripped(Tripwire(a.reason, a.retry, b.processor_id, a.metadata))

    def _steps_tuple(self) -> tuple[StepResult, ...]:
        """The steps so far as the tuple hooks see: made once per step, not once per hook."""
        if len(self._steps_t) != len(self.steps):
            self._steps_t = tuple(self.steps)
        return self._steps_t
