"""The messages the loop itself makes, made in one place.

Every message the loop adds to a run (the model's response, a partial response kept
from a broken stream, a step's tool results, the feedback that sends a discarded reply
back to the model, the held data of a run without an answer) carries the run's ids, its
clock and the thread and resource of its context. `loop_message` is that constructor;
`discarded` is the transient chunk that tells the caller a step was discarded, and
`keep_held` places the data hooks emitted outside a response.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.chunks import DataChunk
from pipeline.messages import JsonObject, Message, MessageList, Part, Role, TextPart
from pipeline.run_state import RunConfig, RunState


def loop_message(
    rc: RunConfig,
    st: RunState,
    role: Role,
    parts: Sequence[Part],
    *,
    incomplete: bool = False,
    kind: str = "msg",
    metadata: JsonObject | None = None,
) -> Message:
    """A message of this run: a fresh id of `kind`, the run's clock now, its context's
    thread and resource."""
    ctx = rc.ctx
    return Message(
        id=st.ids.next(kind),
        role=role,
        parts=tuple(parts),
        created_at=rc.clock(),
        thread_id=ctx.thread_id,
        resource_id=ctx.resource_id,
        incomplete=incomplete,
        metadata=metadata,
    )


def feedback(rc: RunConfig, st: RunState, reason: str, by: str) -> Message:
    """The user message that sends a discarded reply's `reason` back to the model (`by`:
    who discarded it), numbered with the run's retry count."""
    return loop_message(
        rc, st, "user", (TextPart(reason),), kind="feedback",
        metadata={"feedback_from": by, "retry": st.retry_count},
    )


def discarded(step: int, by: str, reason: str, retry_count: int) -> DataChunk:
    """What the caller is streamed when a step's reply is discarded for a retry."""
    return DataChunk("data-step-discarded", {
        "step_number": step,
        "processor_id": by,
        "reason": reason,
        "retry_count": retry_count,
    }, transient=True)


def keep_held(rc: RunConfig, st: RunState) -> None:
    """At the end of a run: held data goes into the run's last answer (an assistant
    message it added), or into an assistant message of its own if there is none."""
    held, st.held = tuple(st.held), []
    if not held:
        return
    ml = st.ml
    msgs = ml.messages
    for i in range(len(msgs) - 1, -1, -1):
        if ml.sources[i] == "response" and msgs[i].role == "assistant":
            kept = msgs[i].with_parts((*msgs[i].parts, *held))
            st.ml = MessageList((*msgs[:i], kept, *msgs[i + 1 :]), ml.sources, ml.system)
            return
    st.ml = ml.add(loop_message(rc, st, "assistant", held), "response")
