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

import msgspec

from pipeline.loop.state import RunConfig, RunState, fresh_call_id
from pipeline.values.chunks import DataChunk
from pipeline.values.messages import (
    JsonObject,
    Message,
    MessageList,
    Part,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)


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


def unforged(st: RunState, kept: Message) -> Message:
    """The response as a processor replaced it, with a fresh id for each tool call whose
    id another message (or an earlier call of it) already has, so results pair."""
    others = {
        p.tool_call_id
        for m in st.ml.messages
        if m.id != kept.id
        for p in m.parts
        if isinstance(p, ToolCallPart | ToolResultPart)
    }
    parts = list(kept.parts)
    changed = False
    for i, p in enumerate(parts):
        if isinstance(p, ToolCallPart):
            if p.tool_call_id in others:
                p = msgspec.structs.replace(p, tool_call_id=fresh_call_id(st, others, None))
                parts[i] = p
                changed = True
            others.add(p.tool_call_id)
    if not changed:
        return kept
    fixed = kept.with_parts(parts)
    st.ml = st.ml.replace_messages(fixed if m.id == kept.id else m for m in st.ml.messages)
    return fixed
