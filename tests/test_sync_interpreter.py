"""The sync interpreter and the simulator: streaming, early close, I/O for hooks, the result."""

from __future__ import annotations

import warnings
from collections.abc import Generator, Iterator
from typing import Any

import pytest

from effects import (
    CallModel,
    Continue,
    Done,
    Perform,
    Publish,
    Pull,
    Replace,
    Request,
    RunTools,
    ask,
)
from interpreters.core.handlers import Handlers
from interpreters.core.trace import Trace
from interpreters.providers.provider import Provider, ProviderError
from interpreters.run.base import AsyncNotSupportedError
from interpreters.sync import SyncInterpreter
from interpreters.testing import Fail, Say, ScriptedModel, Simulator, call, numbered_run_ids
from pipeline.processor import (
    AskModel,
    InputArgs,
    InputResult,
    InputStepArgs,
    InputStepResult,
    ModelAnswer,
    OutputStepArgs,
    OutputStepResult,
    Processor,
    StepChange,
    StreamArgs,
    StreamResult,
    abort,
    processor,
)
from pipeline.tools import tool
from pipeline.values.chunks import (
    Chunk,
    ModelEvent,
    ModelFinish,
    TextDelta,
    TextEnd,
    TextStart,
    Usage,
    chunk_decoder,
    chunk_encoder,
)
from pipeline.values.chunks import Finish as FinishChunk
from pipeline.values.context import RunContext
from pipeline.values.messages import Message, ReasoningPart, SystemMessage, TextPart
from pipeline.values.model import ApiError, ModelRequest
from pipeline.values.result import ApiFailed, ProcessorFailed, RunFailedError
from tests.helpers import (
    NoKeyError,
    TrackedModel,
    assert_scoped,
    assert_unconfigured,
    make_agent,
    simulate,
    streamed_text,
    unconfigured,
)


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return f"found {query}"


# --- async code is refused up front ------------------------------------------------------------


class AsyncGuard(Processor):
    id = "async-guard"

    async def process_output_step(self, args: OutputStepArgs[None]) -> OutputStepResult[None]:
        return Continue()


def test_the_sync_interpreter_refuses_an_async_hook_naming_it() -> None:
    model = ScriptedModel([Say("x")])
    with pytest.raises(AsyncNotSupportedError) as e:
        Simulator(model).run(make_agent(output_processors=[AsyncGuard()]), "hi")
    assert "'async-guard'" in str(e.value) and "process_output_step" in str(e.value)
    assert "AsyncInterpreter" in str(e.value)
    assert model.requests == []  # refused before the run started


def test_the_sync_interpreter_refuses_an_async_tool_naming_it() -> None:
    @tool
    async def fetch(url: str) -> str:
        """Fetch."""
        return url

    with pytest.raises(AsyncNotSupportedError, match="tool 'fetch'"):
        Simulator(ScriptedModel([Say("x")])).run(make_agent(tools=[fetch]), "hi")


def test_the_sync_interpreter_refuses_an_async_prepare_step() -> None:
    async def prepare(args: InputStepArgs[None]) -> InputStepResult[None]:
        return Continue()

    with pytest.raises(AsyncNotSupportedError, match="prepare_step"):
        Simulator(ScriptedModel([Say("x")])).run(make_agent(prepare_step=prepare), "hi")


def test_a_hidden_awaitable_fails_the_run_naming_the_processor() -> None:
    async def later() -> Continue:
        return Continue()

    sneaky = processor("sneaky", process_output_step=lambda a: later())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "coroutine was never awaited"
        ran = simulate(make_agent(output_processors=[sneaky]), [Say("x")])
    err = ran.result.error
    assert isinstance(err, ProcessorFailed)
    assert (err.processor_id, err.hook, err.error_type) == (
        "sneaky",
        "process_output_step",
        "AsyncNotSupportedError",
    )


# --- the stream --------------------------------------------------------------------------------


def test_the_stream_yields_the_same_chunks_as_the_trace_then_has_the_result() -> None:
    agent = make_agent(tools=[lookup])
    script = [Say("a", calls=[call("lookup", query="q")]), Say(["b", "c"])]
    sim = Simulator(ScriptedModel(script), run_ids=numbered_run_ids())
    trace = Trace()
    stream = sim.stream(agent, "hi", trace=trace)
    with pytest.raises(RuntimeError, match="has not finished"):
        _ = stream.result
    chunks = list(stream)
    assert chunks == trace.chunks
    assert stream.result.text == "abc"
    assert chunks == simulate(agent, script).chunks


def test_closing_the_stream_early_closes_the_model_stream_and_the_run() -> None:
    model = TrackedModel([Say(["one", "two", "three"]), Say("never")])
    stream = Simulator(model).stream(make_agent(), "hi")
    got: list[Chunk] = []
    for c in stream:
        got.append(c)
        if isinstance(c, TextDelta):
            break
    stream.close()
    assert streamed_text(got) == "one"
    assert model.closed_early == 1 and model.exhausted == 0
    assert len(model.requests) == 1
    with pytest.raises(RuntimeError):
        _ = stream.result
    with pytest.raises(StopIteration):
        next(stream)


# --- providers ------------------------------------------------------------------------------


class EchoProvider:
    """A hand-written provider: answers with the model id and the last user text."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def stream(self, request: ModelRequest) -> Iterator[ModelEvent]:
        self.seen.append(request.model)
        yield TextStart("t")
        yield TextDelta("t", f"{request.model}:{request.messages[-1].text}")
        yield TextEnd("t")
        yield ModelFinish("stop", Usage(1, 1))


def test_a_custom_provider_serves_the_sync_interpreter() -> None:
    p = EchoProvider()
    interp = SyncInterpreter(p, clock=lambda: 0.0, run_ids=lambda: "r")
    result = interp.run(make_agent(), "hello")
    assert result.unwrap().text == "sim/model:hello"
    assert result.messages.messages[-1].id == "r-msg1"
    assert p.seen == ["sim/model"]


def test_resolve_picks_a_provider_per_model_id() -> None:
    a, b = EchoProvider(), EchoProvider()
    interp = SyncInterpreter(
        resolve=lambda m: a if m == "sim/model" else b, clock=lambda: 0.0, sleep=lambda s: None
    )
    to_b = processor("to-b", process_input_step=lambda args: Replace(StepChange(model="b-model")))
    interp.run(make_agent(input_processors=[to_b]), "x")
    assert (a.seen, b.seen) == ([], ["b-model"])


def test_a_provider_bug_is_a_typed_failure_and_not_retried() -> None:
    class Broken:
        calls = 0

        def stream(self, request: ModelRequest) -> Iterator[ModelEvent]:
            Broken.calls += 1
            raise ZeroDivisionError("oops")

    result = SyncInterpreter(Broken(), sleep=lambda s: None).run(make_agent(), "x")
    assert result.status == "failed"
    assert isinstance(result.error, ApiFailed)
    assert result.error.error.error_type == "provider-error"
    assert "ZeroDivisionError" in result.error.error.message
    assert Broken.calls == 1
    with pytest.raises(RunFailedError) as e:
        result.unwrap()
    assert e.value.result is result


def test_a_sync_interpreter_needs_a_provider() -> None:
    with pytest.raises(ValueError):
        SyncInterpreter()


# --- I/O requested by generator hooks ----------------------------------------------------------

JUDGE = "judge/model"


class Judged(Processor):
    """Asks a judge model whether each answer is acceptable; retries once if not."""

    id = "judged"

    def process_output_step(
        self, args: OutputStepArgs[None]
    ) -> Generator[object, object, OutputStepResult[None]]:
        verdict = yield AskModel(
            ModelRequest(
                model=JUDGE,
                system=(SystemMessage("Reply yes or no."),),
                messages=(Message(id="q", role="user", parts=(TextPart(args.text),)),),
            )
        )
        assert isinstance(verdict, ModelAnswer)
        if verdict.text.strip() != "yes":
            abort("the judge said no", retry=args.retry_count == 0)
        return Continue()


def test_a_generator_hook_asks_a_scripted_judge_model() -> None:
    ran = simulate(
        make_agent(output_processors=[Judged()]),
        [Say("rude"), Say("polite")],
        models={JUDGE: [Say("no"), Say("yes")]},
    )
    judge = ran.models[JUDGE]
    assert [r.messages[0].text for r in judge.requests] == ["rude", "polite"]
    assert [r.system[0].content for r in judge.requests] == ["Reply yes or no."] * 2
    assert ran.result.status == "finished"
    assert ran.result.text == "polite"
    assert ran.result.retry_count == 1
    performs = ran.trace.commands_of(Perform)
    assert [(p.processor_id, p.hook) for p in performs] == [("judged", "process_output_step")] * 2
    # the judge's chunks never reach the caller and its calls are not model steps
    assert "no" not in streamed_text(ran.chunks) and len(ran.requests) == 2


def test_a_judge_that_keeps_saying_no_blocks() -> None:
    ran = simulate(
        make_agent(output_processors=[Judged()]),
        [Say("a"), Say("b")],
        models={JUDGE: [Say("no"), Say("no")]},
    )
    assert ran.result.status == "tripped"
    assert ran.result.tripwire is not None
    assert ran.result.tripwire.reason == "the judge said no"


class Lookup(Request[bool], frozen=True):
    key: str


def _asks_lookup(args: StreamArgs[None]) -> Generator[object, object, StreamResult[None]]:
    if isinstance(args.part, TextDelta):
        allowed = yield from ask(Lookup(args.part.text))
        if not allowed:
            abort(f"{args.part.text} not allowed")
    return Continue()


def test_custom_io_requests_go_to_their_handler() -> None:
    asked: list[str] = []

    def handle(req: Lookup) -> bool:
        asked.append(req.key)
        return req.key != "bad"

    sim = Simulator(
        ScriptedModel([Say(["ok", "bad", "never"])]), handlers=Handlers().add(Lookup, handle)
    )
    agent = make_agent(output_processors=[processor("check", process_output_stream=_asks_lookup)])
    run = sim.run(agent, "hi")
    assert asked == ["ok", "bad"]
    assert run.result.tripwire is not None
    assert run.result.tripwire.reason == "bad not allowed"
    assert streamed_text(run.trace.chunks) == "ok"


def test_an_io_request_without_a_handler_fails_the_hook() -> None:
    agent = make_agent(output_processors=[processor("check", process_output_stream=_asks_lookup)])
    ran = simulate(agent, [Say("x")])
    err = ran.result.error
    assert isinstance(err, ProcessorFailed)
    assert (err.processor_id, err.hook, err.error_type) == (
        "check",
        "process_output_stream",
        "LookupError",
    )
    assert "Lookup" in err.message


def test_a_hook_can_handle_a_failed_io_request() -> None:
    def careful(args: OutputStepArgs[None]) -> Generator[object, object, OutputStepResult[None]]:
        try:
            yield AskModel(ModelRequest(model=JUDGE, system=(), messages=args.messages))
        except ProviderError as e:
            abort(f"judge unavailable: {e.error.status}")
        return Continue()

    ran = simulate(
        make_agent(output_processors=[processor("c", process_output_step=careful)]),
        [Say("x")],
        models={JUDGE: [Fail(status=503)]},
    )
    assert ran.result.tripwire is not None
    assert ran.result.tripwire.reason == "judge unavailable: 503"


# --- the result and the trace ----------------------------------------------------------------


def test_the_result_carries_text_messages_steps_usage_and_finish_reason() -> None:
    agent = make_agent(tools=[lookup])
    ran = simulate(
        agent,
        [
            Say(
                "let me check",
                reasoning=["hmm", " ok"],
                calls=[call("lookup", tool_call_id="c1", query="q")],
                usage=Usage(10, 5, reasoning_tokens=2),
            ),
            Say("found it", usage=Usage(20, 3)),
        ],
    )
    r = ran.result
    assert r.status == "finished" and r.tripwire is None and r.error is None
    assert r.text == "let me checkfound it"
    assert [m.role for m in r.messages.messages] == ["user", "assistant", "tool", "assistant"]
    s0, s1 = r.steps
    assert (s0.step_number, s0.model, s0.text, s0.reasoning, s0.finish_reason) == (
        0,
        "sim/model",
        "let me check",
        "hmm ok",
        "tool-calls",
    )
    assert [(c.tool_call_id, c.args) for c in s0.tool_calls] == [("c1", {"query": "q"})]
    assert [(t.tool_call_id, t.result) for t in s0.tool_results] == [("c1", "found q")]
    assert s0.usage == Usage(10, 5, reasoning_tokens=2)
    assert (s1.text, s1.finish_reason, s1.usage, s1.tool_calls) == (
        "found it",
        "stop",
        Usage(20, 3),
        (),
    )
    assert r.usage == Usage(30, 8, reasoning_tokens=2)
    assert r.usage.total_tokens == 38
    assert r.finish_reason == "stop"
    assert ran.types[-1] == "finish"
    assert ran.chunks[-1] == FinishChunk("stop", r.usage)
    assert r.messages.messages[1].parts[0] == ReasoningPart("hmm ok")


def test_the_trace_records_commands_in_order() -> None:
    ran = simulate(
        make_agent(tools=[lookup]),
        [Fail(status=503), Say(calls=[call("lookup", query="q")]), Say("x")],
    )
    kinds = [type(c).__name__ for c in ran.trace.commands]
    assert kinds[0] == "Publish" and kinds[-1] == "Done"
    calls = ran.trace.commands_of(CallModel)
    assert [(c.step_number, c.attempt) for c in calls] == [(0, 0), (0, 1), (1, 0)]
    assert len(ran.trace.commands_of(RunTools)) == 1
    assert ran.trace.commands_of(Pull)
    assert ran.trace.commands_of(Publish)
    assert isinstance(ran.trace.commands[-1], Done)


def test_the_same_script_gives_the_same_trace() -> None:
    def run() -> tuple[object, ...]:
        agent = make_agent(tools=[lookup], output_processors=[Judged()])
        return simulate(
            agent,
            [Fail(status=429), Say("a", calls=[call("lookup", query="q")]), Say("b")],
            models={JUDGE: [Say("yes"), Say("yes")]},
        ).trace.comparable()

    assert run() == run()


def test_chunks_encode_to_json_and_back() -> None:
    ran = simulate(
        make_agent(tools=[lookup]), [Say("a", calls=[call("lookup", query="q")]), Say("b")]
    )
    for c in ran.chunks:
        assert chunk_decoder.decode(chunk_encoder.encode(c)) == c


def test_virtual_latency_advances_the_clock_without_sleeping() -> None:
    model = ScriptedModel([Say(["a", "b", "c"], latency=1.5, chunk_latency=0.25)])
    run = Simulator(model).run(make_agent(), "hi")
    # first event after 1.5 s, then 0.25 s between each of the 5 following events
    assert run.clock - 1_700_000_000.0 == pytest.approx(1.5 + 0.25 * 5)
    assert run.result.messages.messages[-1].created_at == run.clock


def test_a_missing_scripted_response_fails_clearly() -> None:
    ran = simulate(make_agent(tools=[lookup]), [Say(calls=[call("lookup", query="q")])])
    err = ran.result.error
    assert isinstance(err, ApiFailed)
    assert err.error.error_type == "script-exhausted"


def test_a_scripted_model_counts_its_calls_and_may_keep_no_request() -> None:
    script = [Say(calls=[call("lookup", query="q")]), Say("done")]
    kept = ScriptedModel(script)
    counted = ScriptedModel(script, keep_requests=False)
    runs = [Simulator(m).run(make_agent(tools=[lookup]), "hi") for m in (kept, counted)]
    # the same run either way: the count picks the response, not the log
    assert [r.result.text for r in runs] == ["done", "done"]
    assert kept.calls == counted.calls == 2
    assert len(kept.requests) == 2 and counted.requests == []
    ran = Simulator(counted).run(make_agent(), "again")  # past its script
    assert isinstance(ran.result.error, ApiFailed)
    assert ran.result.error.error.error_type == "script-exhausted"
    with pytest.raises(TypeError, match="keep_requests"):
        ScriptedModel(script, keep_requests="no")  # type: ignore[arg-type]


# --- the stream as a context manager ------------------------------------------------------------


def test_the_stream_is_a_context_manager_that_closes_it_early() -> None:
    model = TrackedModel([Say(["one", "two", "three"]), Say("never")])
    with Simulator(model).stream(make_agent(), "hi") as stream:
        for c in stream:
            if isinstance(c, TextDelta):
                break
        assert not stream.done
    assert model.closed_early == 1 and len(model.requests) == 1
    assert not stream.done
    with pytest.raises(StopIteration):
        next(stream)


def test_done_says_when_the_result_is_there() -> None:
    with Simulator(ScriptedModel([Say(["o", "k"])])).stream(make_agent(), "hi") as stream:
        assert not stream.done
        chunks = list(stream)
        assert stream.done
    assert stream.done and stream.result.text == "ok"
    assert isinstance(chunks[-1], FinishChunk)


def test_the_simulator_stream_takes_the_run_context_like_run() -> None:
    seen: list[RunContext] = []

    def note(args: InputArgs[None]) -> InputResult[None]:
        seen.append(args.context)
        return Continue()

    agent = make_agent(input_processors=[processor("note", process_input=note)])
    sim = Simulator(ScriptedModel([Say("a"), Say("a")]))
    kw: dict[str, Any] = {"thread_id": "t1", "resource_id": "u1", "values": {"tier": "pro"}}
    ran = sim.run(agent, "hi", **kw)
    with sim.stream(agent, "hi", **kw) as stream:
        list(stream)
    assert_scoped(seen, stream.result, ran.result)


# --- configuration errors -------------------------------------------------------------------


def test_a_configuration_error_reads_as_one() -> None:
    err = ApiError(status=None, message="no API key for anthropic/ models",
                   error_type="configuration")
    assert str(err) == "configuration: no API key for anthropic/ models"
    assert str(ApiError(status=None, message="reset")) == "connection: reset"
    assert str(ApiError(status=400, message="bad", error_type="invalid")) == "HTTP 400 invalid: bad"


def test_a_missing_key_for_the_agents_model_raises_before_any_request() -> None:
    served = EchoProvider()
    interp = SyncInterpreter(resolve=unconfigured("sim/model", served))
    with pytest.raises(NoKeyError, match="no API key for sim/model"):
        interp.stream(make_agent(), "x")
    with pytest.raises(NoKeyError, match="no API key for sim/model"):
        interp.run(make_agent(), "x")
    assert served.seen == []


def test_a_switch_to_an_unconfigured_model_fails_the_run_with_a_configuration_error() -> None:
    served = EchoProvider()
    to_other = processor(
        "to-other", process_input_step=lambda args: Replace(StepChange(model="other/model"))
    )
    result = SyncInterpreter(resolve=unconfigured("other/model", served), sleep=lambda s: None
                             ).run(make_agent(input_processors=[to_other]), "x")
    assert_unconfigured(result, "other/model")
    assert served.seen == []


def test_other_resolver_failures_are_left_to_the_run() -> None:
    def resolve(model_id: str) -> Provider:
        raise KeyError(model_id)

    stream = SyncInterpreter(resolve=resolve).stream(make_agent(), "x")  # does not raise
    list(stream)
    assert isinstance(stream.result.error, ApiFailed)
    assert stream.result.error.error.error_type == "provider-error"
