"""The values a run makes on every model call are not tracked by the garbage collector.

With 1,000 concurrent runs (W4 of bench/WORKLOADS.md) the collector finds nothing to
free, yet walks every tracked object each run holds across its waits, again and again:
each one costs roughly 0.5 µs per run. These frozen values are declared `gc=False`. The
chunks and the tool-call part hold only text, numbers, JSON and values like themselves,
so they cannot be part of a reference cycle, nor can the simulator's scripted responses
(`Say`, `call`, `Fail`); a model request (and the `CallModel` that
carries it) also holds the conversation, and `Pull` and `Publish` hold chunks, either of
which may carry a user's object (a tool result, a data chunk): one could only be in a
cycle if such an object were changed afterwards to refer back to the request or the
command that carries it, which the library never does (such a cycle would stay in
memory).
"""

from __future__ import annotations

import gc

import pytest

from effects import CallModel, Publish, Pull
from interpreters.simulator import Fail, Say, call
from pipeline.chunks import Finish, ModelFinish, StepFinish, TextDelta, ToolCall, Usage
from pipeline.messages import ToolCallPart, user
from pipeline.model import ModelRequest

ARGS = {"city": ["Paris", {"nested": True}]}  # a tracked dict: its holder would be too
REQUEST = ModelRequest(
    model="m", system=(), messages=(user("hi", id="u1"),), provider_options={"a": [1]}
)

VALUES = [
    ModelFinish("stop", Usage(1, 2), "resp-1", None),
    StepFinish(0, "stop", Usage(1, 2)),
    Finish("stop", Usage(1, 2)),
    ToolCall("c1", "weather", ARGS),
    ToolCallPart("c1", "weather", ARGS),
    REQUEST,
    CallModel(REQUEST, 0, 0),
    call("weather", city=["Paris"]),  # the simulator's scripted responses
    Say("hi", calls=[call("weather", city=["Paris"])]),
    Fail(status=503, retry_after=1.0, message="x", body="{}"),
    Pull((TextDelta("t", "hi"), ToolCall("c1", "weather", ARGS))),
    Publish((TextDelta("t", "hi"), ToolCall("c1", "weather", ARGS))),
]


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_a_per_call_value_is_not_tracked_by_the_collector(value: object) -> None:
    assert not gc.is_tracked(value)


def test_what_they_hold_is_still_collected_as_usual() -> None:
    # The dict inside stays tracked; a value holding it keeps it alive as any reference.
    args: dict[str, object] = {"x": []}
    call = ToolCall("c1", "t", args)
    assert gc.is_tracked(args)
    del args
    gc.collect()
    assert call.args == {"x": []}
