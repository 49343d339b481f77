"""`timeout=` and `signal=` on the sync interpreter, as on the async one: the run ends
with status "cancelled" and a `Cancelled` error, the text so far kept as incomplete, the
history paired, the model stream closed. Nothing here depends on timing except the one
retry-backoff test, which only needs the timeout to be shorter than the backoff."""

from __future__ import annotations

import time
from collections.abc import Generator, Iterator

import pytest

from effects import Continue, Request, ask
from interpreters.core.cancel import CancelSignal
from interpreters.core.handlers import Handlers
from interpreters.core.trace import Trace
from interpreters.providers.provider import ProviderError
from interpreters.sync import SyncInterpreter
from interpreters.testing import Fail, Say, ScriptedModel, call
from pipeline.processor import OutputStepArgs, OutputStepResult, abort, processor
from pipeline.tools import tool
from pipeline.values.chunks import (
    ErrorChunk,
    ModelEvent,
    ModelFinish,
    TextDelta,
    TextEnd,
    TextStart,
)
from pipeline.values.messages import ToolResultPart
from pipeline.values.model import ApiError, ModelRequest
from pipeline.values.pairing import is_paired
from pipeline.values.result import Cancelled
from pipeline.values.retry import RetryPolicy
from tests.helpers import make_agent


class AbortingProvider:
    """Streams 'Hello', ' wor', then aborts the signal (as another thread would) and would
    stream 'ld'; records whether its stream was closed early."""

    def __init__(self, signal: CancelSignal) -> None:
        self.signal = signal
        self.closed_early = False

    def stream(self, request: ModelRequest) -> Iterator[ModelEvent]:
        try:
            yield TextStart("t")
            yield TextDelta("t", "Hello")
            yield TextDelta("t", " wor")
            self.signal.cancel("user left")
            yield TextDelta("t", "ld")
            yield TextEnd("t")
            yield ModelFinish("stop")
        except GeneratorExit:
            self.closed_early = True
            raise


def test_signal_mid_stream_cancels_keeping_the_partial_text() -> None:
    signal = CancelSignal()
    model = AbortingProvider(signal)
    trace = Trace()
    result = SyncInterpreter(model).run(make_agent(), "hi", signal=signal, trace=trace)
    assert result.status == "cancelled" and result.error == Cancelled("user left")
    assert result.finish_reason == "cancelled"
    last = result.messages.messages[-1]
    assert (last.role, last.text, last.incomplete) == ("assistant", "Hello wor", True)
    assert trace.chunks[-1] == ErrorChunk("Cancelled", "run cancelled: user left")
    # The consumer saw exactly the text the result keeps: no more, no less.
    streamed = "".join(c.text for c in trace.chunks if isinstance(c, TextDelta))
    assert streamed == result.text == "Hello wor"
    assert model.closed_early


def test_stream_yields_the_final_chunks_of_a_cancelled_run() -> None:
    signal = CancelSignal()
    interp = SyncInterpreter(AbortingProvider(signal))
    with interp.stream(make_agent(), "hi", signal=signal) as stream:
        chunks = list(stream)
    assert isinstance(chunks[-1], ErrorChunk)
    assert stream.result.status == "cancelled"


def test_a_signal_aborted_before_the_run_cancels_it_before_any_call() -> None:
    signal = CancelSignal()
    signal.cancel("not wanted")
    model = ScriptedModel([Say("never")])
    result = SyncInterpreter(model).run(make_agent(), "hi", signal=signal)
    assert result.status == "cancelled" and result.error == Cancelled("not wanted")
    assert model.requests == []
    assert [m.role for m in result.messages.messages] == ["user"]


def test_timeout_zero_cancels_at_once() -> None:
    model = ScriptedModel([Say("never")])
    result = SyncInterpreter(model).run(make_agent(), "hi", timeout=0)
    assert result.status == "cancelled"
    assert isinstance(result.error, Cancelled) and "timed out" in result.error.reason
    assert model.requests == []


def test_a_signal_aborted_by_a_tool_pairs_every_call() -> None:
    signal = CancelSignal()

    @tool
    def leave(reason: str) -> str:
        """Abort the run."""
        signal.cancel(reason)
        return "left"

    model = ScriptedModel([Say("bye", calls=[call("leave", reason="done")]), Say("never")])
    result = SyncInterpreter(model).run(make_agent(tools=[leave]), "hi", signal=signal)
    assert result.status == "cancelled" and result.error == Cancelled("done")
    assert is_paired(result.messages.all)
    assert len(model.requests) == 1


def test_timeout_during_a_retry_backoff_cancels_instead_of_sleeping_it_out() -> None:
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        time.sleep(s)

    model = ScriptedModel([Fail(status=503), Say("late")])
    agent = make_agent(retry_policy=RetryPolicy(max_retries=1, base_delay=60.0, jitter=0.0,
                                                max_delay=60.0))
    result = SyncInterpreter(model, sleep=sleep).run(agent, "hi", timeout=0.2)
    assert result.status == "cancelled"
    assert len(model.requests) == 1
    assert slept and slept[0] <= 0.2  # waited what was left of the run, not 60 s


def test_invalid_timeout_is_refused() -> None:
    with pytest.raises(ValueError, match="timeout"):
        SyncInterpreter(ScriptedModel([])).run(make_agent(), "hi", timeout=-1)


class Verdict(Request[bool], frozen=True):
    text: str


def test_a_judge_cut_short_by_the_stop_cancels_the_run_at_its_request() -> None:
    """A request whose wait the run's stop cut short (an HTTP wait cut to the deadline
    raises) is the cancel, not a failure the hook handles: the run ends "cancelled" at
    that request, as when the answer comes late."""
    signal = CancelSignal()

    def judge(req: Verdict) -> bool:
        signal.cancel("user left")
        raise TimeoutError("the wait was cut to the run's deadline")

    def careful(args: OutputStepArgs[None]) -> Generator[object, object, OutputStepResult[None]]:
        try:
            yield from ask(Verdict(args.text))
        except TimeoutError:
            abort("judge unavailable")
        return Continue()

    agent = make_agent(output_processors=[processor("c", process_output_step=careful)])
    trace = Trace()
    interp = SyncInterpreter(ScriptedModel([Say("x")]), handlers=Handlers().add(Verdict, judge))
    result = interp.run(agent, "hi", signal=signal, trace=trace)
    assert result.status == "cancelled" and result.error == Cancelled("user left")
    assert result.tripwire is None


class CutWhileOpening:
    """A provider whose request (made when its stream is asked for) is cut short by the
    run's stop: it raises, as an HTTP wait cut to the deadline does."""

    def __init__(self, signal: CancelSignal) -> None:
        self.signal = signal

    def stream(self, request: ModelRequest) -> Iterator[ModelEvent]:
        self.signal.cancel("user left")
        raise ProviderError(ApiError(status=None, message="timed out", error_type="timeout"))


def test_a_model_call_cut_short_by_the_stop_while_opening_cancels_the_run() -> None:
    signal = CancelSignal()
    agent = make_agent(retry_policy=RetryPolicy(max_retries=0))
    result = SyncInterpreter(CutWhileOpening(signal)).run(agent, "hi", signal=signal)
    assert result.status == "cancelled" and result.error == Cancelled("user left")


def test_a_cancel_while_a_tool_runs_runs_no_further_call_and_keeps_the_finished_ones() -> None:
    signal = CancelSignal()
    ran: list[str] = []

    @tool
    def step(name: str) -> str:
        """One step; the first cancels the run (as another thread would, meanwhile)."""
        ran.append(name)
        if name == "first":
            signal.cancel("user left")
        return f"did {name}"

    model = ScriptedModel([
        Say("go", calls=[call("step", name="first"), call("step", name="second")]),
        Say("never"),
    ])
    result = SyncInterpreter(model).run(make_agent(tools=[step]), "hi", signal=signal)
    assert result.status == "cancelled" and result.error == Cancelled("user left")
    assert ran == ["first"]  # the second call never started: the run was cancelled
    results = {
        p.tool_call_id: p for m in result.messages.all for p in m.parts
        if isinstance(p, ToolResultPart)
    }
    first, second = results.values()
    assert (first.result, first.is_error) == ("did first", False)  # its real result
    assert second.is_error
    assert is_paired(result.messages.all)
