"""Record a run to a journal and replay it offline (interpreters.record.journal)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import anyio
import msgspec
import pytest

from effects import Continue, Replace
from examples.quality_guardrail import QualityGuardrail
from interpreters import CancelSignal
from interpreters.record.journal import (
    CancelledAt,
    ClockRead,
    EffectSeen,
    Journal,
    JournalError,
    ModelReplied,
    Recorder,
    ToolsDone,
)
from interpreters.testing import (
    AsyncSimulator,
    Fail,
    Say,
    ScriptedModel,
    Simulator,
    call,
    numbered_run_ids,
)
from pipeline import (
    Agent,
    OutputStepArgs,
    OutputStepResult,
    Processor,
    StreamArgs,
    TextDelta,
    abort,
)
from pipeline.processor import StreamResult
from pipeline.tools.context import ToolContext
from pipeline.values.cost import Cost, PriceQuery
from pipeline.values.messages import ToolResultPart

KEY = "sk-test-0123456789abcdefSECRET"


def weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


def broken(city: str) -> str:
    """A tool that fails."""
    raise RuntimeError("backend down")


def agent(*extra: Processor) -> Agent:
    return Agent.create(
        "openai/gpt-4o-mini",
        instructions="Be brief.",
        tools=[weather, broken],
        output_processors=[QualityGuardrail("judge", threshold=0.5), *extra],
        max_processor_retries=2,
    )


def script() -> ScriptedModel:
    return ScriptedModel([
        Fail(status=429, retry_after=1.5),
        Say(calls=[call("weather", city="Paris"), call("broken", city="x")]),
        Say("Meh."),                                        # the judge says 0.1: retried
        Say(["It is sunny ", "in Paris today."]),
    ])


def judge() -> ScriptedModel:
    return ScriptedModel([Say("0.1"), Say("0.9")])


def recorded(*extra: Processor) -> tuple[Recorder, Simulator]:
    rec = Recorder()
    sim = Simulator(script(), models={"judge": judge()}, observers=[rec])
    return rec, sim


def test_a_recorded_run_replays_to_the_same_result_and_trace() -> None:
    rec, sim = recorded()
    run = sim.run(agent(), "Weather in Paris?")
    assert run.result.status == "finished"
    assert run.result.retry_count == 1
    journal = rec.last()
    replay = Simulator.replay(journal, agent())
    assert replay.result == run.result
    assert replay.trace.comparable() == run.trace.comparable()
    assert replay.divergence is None
    assert replay.result_matches and replay.identical


def test_the_journal_holds_what_the_loop_was_fed() -> None:
    rec, sim = recorded()
    sim.run(agent(), "Weather in Paris?")
    j = rec.last()
    kinds = [type(e).__name__ for e in j.entries]
    assert kinds[0] == "RunStarted" and kinds[-1] == "RunEnded"
    assert j.header.agent.processors == ("quality-guardrail",)
    assert any(isinstance(e, ClockRead) for e in j.entries)
    tools = [e for e in j.entries if isinstance(e, ToolsDone)]
    assert [(o.result, o.is_error) for o in tools[0].outcomes] == [
        ("sunny in Paris", False), ("RuntimeError: backend down", True)
    ]
    firsts = [e for e in j.entries if isinstance(e, ModelReplied) and e.first]
    assert len(firsts) == 4  # the 429, then three responses
    assert [c.kind for c in j.commands()][:3] == ["publish", "call-model", "sleep"]


def test_the_journal_survives_ndjson_and_a_file(tmp_path: Path) -> None:
    rec = Recorder(tmp_path)
    sim = Simulator(script(), models={"judge": judge()}, observers=[rec],
                    run_ids=numbered_run_ids())
    run = sim.run(agent(), "Weather in Paris?")
    path = rec.path("run1")
    lines = path.read_bytes().splitlines()
    assert len(lines) == len(Journal.read(path).entries) > 10
    again = Journal.from_ndjson(Journal.read(path).to_ndjson())
    assert Simulator.replay(again, agent()).result == run.result


def test_a_changed_agent_runs_on_the_recorded_output_and_says_where_it_diverges() -> None:
    rec, sim = recorded()
    sim.run(agent(), "Weather in Paris?")

    class Shout(Processor):
        id = "shout"

        def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
            if isinstance(args.part, TextDelta):
                return Replace(TextDelta(args.part.id, args.part.text.upper()))
            return Continue()

    replay = Simulator.replay(rec.last(), agent(Shout()))
    assert replay.result.text == "IT IS SUNNY IN PARIS TODAY."
    assert replay.divergence is not None
    assert not replay.identical
    assert "pull" in replay.divergence.expected
    first_text = next(
        i for i, c in enumerate(replay.trace.commands) if "TextDelta" in repr(c)
    )
    assert replay.divergence.index == first_text


def test_an_added_guard_that_blocks_ends_the_replay_early_and_diverges() -> None:
    rec, sim = recorded()
    sim.run(agent(), "Weather in Paris?")

    class Block(Processor):
        id = "block"

        def process_output_step(self, args: OutputStepArgs[None]) -> OutputStepResult[None]:
            if "sunny" in args.text:
                from pipeline import abort

                abort("no weather talk")
            return Continue()

    replay = Simulator.replay(rec.last(), agent(Block()))
    assert replay.result.status == "tripped"
    assert replay.result.tripwire is not None
    assert replay.result.tripwire.processor_id == "block"
    assert replay.divergence is not None


def test_a_journal_never_holds_an_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)

    def leaky(city: str) -> str:
        """Echoes a key, as a careless tool might."""
        return f"token={KEY} other=sk-given-by-caller-123"

    rec = Recorder(secrets=["sk-given-by-caller-123"])
    a = Agent.create("openai/gpt-4o-mini", tools=[leaky])
    Simulator(ScriptedModel([Say(calls=[call("leaky", city="x")]), Say("ok")]),
              observers=[rec]).run(a, f"my key is {KEY}")
    data = rec.last().to_ndjson()
    assert KEY.encode() not in data
    assert b"sk-given-by-caller-123" not in data
    assert b"[redacted]" in data


def test_a_cancelled_async_run_replays_to_the_same_cancel() -> None:
    rec = Recorder()
    signal = CancelSignal()

    async def stop(city: str) -> str:
        """Cancels the run from inside a tool."""
        signal.cancel("enough")
        await anyio.sleep_forever()  # the cancel ends it
        return "ok"

    a = Agent.create("m", tools=[stop])
    model = ScriptedModel([Say("a", calls=[call("stop", city="x")]), Say("never")])

    async def main() -> None:
        with anyio.fail_after(10):  # a cap only
            run = await AsyncSimulator(model, observers=[rec]).run(a, "go", signal=signal)
        assert run.result.status == "cancelled"
        j = rec.last()
        assert any(isinstance(e, CancelledAt) for e in j.entries)
        replay = await AsyncSimulator.replay(j, a)
        assert replay.result == run.result
        assert replay.trace.comparable() == run.trace.comparable()
        assert replay.identical

    anyio.run(main)


def test_a_replay_asks_for_more_than_the_journal_holds() -> None:
    rec = Recorder()
    Simulator(ScriptedModel([Say("ok")]), observers=[rec]).run(Agent.create("m"), "hi")

    class Again(Processor):
        id = "again"

        def process_output_step(self, args: OutputStepArgs[None]) -> OutputStepResult[None]:
            from pipeline import abort

            abort("more", retry=True)

    replay = Simulator.replay(rec.last(), Agent.create("m", output_processors=[Again()],
                                                       max_processor_retries=1))
    assert replay.result.status == "failed"
    assert "journal holds no more model calls" in str(replay.result.error)
    assert replay.divergence is not None


def test_bad_journals_are_a_typed_error() -> None:
    with pytest.raises(JournalError):
        Journal.from_ndjson(b'{"t": "clock", "value": 1.0}\n')
    with pytest.raises(JournalError):
        Journal.from_ndjson(b"not json\n")


def _nested(depth: int) -> object:
    v: object = 1
    for _ in range(depth):
        v = [v]
    return v


def test_a_journal_nested_past_the_bound_is_a_typed_error() -> None:
    from pipeline.values.bounds import MAX_JSON_DEPTH

    rec = Recorder()
    Simulator(ScriptedModel([Say("hi")]), observers=[rec], run_ids=numbered_run_ids()).run(
        Agent.create("m"), "hi")
    lines = rec.journal("run1").to_ndjson().splitlines()
    for depth in (MAX_JSON_DEPTH + 100, 100_000):
        deep = b"[" * depth + b"]" * depth
        header = lines[0].replace(b'"values":null', b'"values":{"a":' + deep + b"}")
        assert header != lines[0]
        with pytest.raises(JournalError, match=r"line 2: .*nests deeper than \d+ levels"):
            Journal.from_ndjson(b"\n".join([lines[0], header, *lines[1:]]))


def test_a_value_as_deep_as_the_bound_is_recorded_and_read_back(tmp_path: Path) -> None:
    """The bound on a journal line leaves room for the entry around the deepest value a
    run holds (a tool result of MAX_JSON_DEPTH levels, in the history of a resumed run)."""
    from interpreters.approvals.store import Approvals, MemoryApprovalStore
    from pipeline import AskApproval, ToolCallArgs, ToolCallResult, processor
    from pipeline.approval import approve
    from pipeline.values.bounds import MAX_JSON_DEPTH

    def deep() -> object:
        """A deep value."""
        return _nested(MAX_JSON_DEPTH)

    def ask(args: ToolCallArgs[None]) -> ToolCallResult[None]:
        return AskApproval("ok?") if args.call.tool_name == "other" else Continue()

    def other() -> str:
        """Another tool."""
        return "done"

    a = Agent.create("m", tools=[deep, other],
                     input_processors=[processor("gate", process_tool_call=ask)])
    rec = Recorder(tmp_path)
    model = ScriptedModel([Say(calls=[call("deep")]), Say(calls=[call("other")]), Say("ok")])
    sim = Simulator(model, observers=[rec])
    first = sim.run(a, "go").result
    assert first.suspension is not None
    approvals = Approvals(MemoryApprovalStore())
    approvals.keep(first)
    go_on = approvals.take(a, first.suspension.run_id, [approve(first.suspension.pending[0])])
    assert sim.run(a, (), resume=go_on).result.status == "finished"
    files = sorted(tmp_path.glob("*.ndjson"))
    assert len(files) == 2  # the run, and its resumption (the deep result in its header)
    for f in files:
        assert Journal.read(f).entries


def shouting_agent() -> Agent:
    """`agent()` with one more processor (for the CLI's divergence test)."""

    class Shout(Processor):
        id = "shout"

        def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
            if isinstance(args.part, TextDelta):
                return Replace(TextDelta(args.part.id, args.part.text.upper()))
            return Continue()

    return agent(Shout())


def test_pipeline_replay_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from interpreters.cli.commands import main

    rec = Recorder(tmp_path)
    Simulator(script(), models={"judge": judge()}, observers=[rec], run_ids=numbered_run_ids()).run(
        agent(), "Weather?")
    path = str(rec.path("run1"))

    assert main(["replay", path, "--agent", "tests.test_journal:agent"]) == 0
    out, err = capsys.readouterr()
    assert out == "Meh.It is sunny in Paris today.\n"  # streamed as recorded, the retry too
    assert "identical to the recording" in err

    assert main(["replay", path, "--agent", "tests.test_journal:shouting_agent"]) == 1
    out, err = capsys.readouterr()
    assert out == "MEH.IT IS SUNNY IN PARIS TODAY.\n"
    assert "diverges from the recording at command #" in err

    assert main(["replay", path]) == 0
    out, err = capsys.readouterr()
    assert "call openai/gpt-4o-mini (step 0, attempt 0, 1 messages)" in out
    assert "give --agent" in err

    assert main(["replay", path, "--agent", "tests.test_journal:KEY"]) == 2
    assert "not an Agent" in capsys.readouterr().err
    assert main(["replay", str(tmp_path / "missing.ndjson")]) == 2


def test_async_hooks_run_again_in_an_async_replay() -> None:
    class Slow(Processor):
        id = "slow"

        async def process_output_step(
            self, args: OutputStepArgs[None]
        ) -> OutputStepResult[None]:
            await anyio.sleep(0)
            return Continue()

    a = Agent.create("m", output_processors=[Slow()])
    rec = Recorder()

    async def main() -> None:
        run = await AsyncSimulator(ScriptedModel([Say("hello")]), observers=[rec]).run(a, "hi")
        replay = await AsyncSimulator.replay(rec.last(), a)
        assert replay.identical and replay.result == run.result
        assert replay.trace.comparable() == run.trace.comparable()

    anyio.run(main)
    from interpreters import AsyncNotSupportedError

    with pytest.raises(AsyncNotSupportedError):
        Simulator.replay(rec.last(), a)


def test_a_recorder_shared_by_two_simulators_keeps_each_run_whole() -> None:
    rec = Recorder()
    # both number their runs alike: the second run1 starts its journal afresh
    for text, said in (("a", "one"), ("b", "two")):
        Simulator(ScriptedModel([Say(said)]), observers=[rec], run_ids=numbered_run_ids()).run(
            Agent.create("m"), text)
    j = rec.journal("run1")
    assert len([e for e in j.entries if isinstance(e, type(j.header))]) == 1
    assert Simulator.replay(j, Agent.create("m")).result.text == "two"


def test_a_journal_of_another_version_is_refused() -> None:
    rec = Recorder()
    Simulator(ScriptedModel([Say("one")]), observers=[rec]).run(Agent.create("m"), "a")
    data = rec.last().to_ndjson().replace(b'"version":1', b'"version":99', 1)
    with pytest.raises(JournalError, match="version 99"):
        Journal.from_ndjson(data)


def test_an_in_memory_recorder_keeps_the_last_runs_only() -> None:
    rec = Recorder(keep=2)
    sim = Simulator(ScriptedModel([Say("x")] * 3), observers=[rec], run_ids=numbered_run_ids())
    for _ in range(3):
        sim.run(Agent.create("m"), "a")
    with pytest.raises(KeyError):
        rec.journal("run1")
    assert rec.journal("run2").header.run_id == "run2"
    assert rec.last().header.run_id == "run3"
    with pytest.raises(ValueError):
        Recorder(keep=0)


ESCAPED_KEYS = ('sk-q"uo"te-0123456789abc', "sk-back\\slash\\0123456789", "sk-a/b<c>&d\u00e9-01234")


def secret_forms(key: str) -> set[bytes]:
    """The key as a journal line could hold it: raw, JSON-escaped (once and twice, with
    and without `\\/` and `\\u` escapes), and as a repr (a tool result JSON cannot encode)."""
    import json

    escaped = json.dumps(key, ensure_ascii=False)[1:-1]
    forms = {key, escaped, json.dumps(key)[1:-1], json.dumps(escaped)[1:-1],
             escaped.replace("/", "\\/"), repr(key)[1:-1], json.dumps(repr(key)[1:-1])[1:-1]}
    return {f.encode() for f in forms}


@pytest.mark.parametrize("key", ESCAPED_KEYS)
def test_a_secret_is_scrubbed_in_every_encoded_form(key: str) -> None:
    import json

    class Opaque:
        def __repr__(self) -> str:
            return f"Opaque({key!r})"

    def leaky(city: str) -> object:
        """Echoes the key as text, inside JSON, and as a value JSON cannot encode."""
        return {"raw": key, "json": json.dumps({"key": key}), "opaque": Opaque()}

    rec = Recorder(secrets=[key])
    a = Agent.create("openai/gpt-4o-mini", tools=[leaky])
    Simulator(ScriptedModel([Say(calls=[call("leaky", city=key)]), Say(json.dumps(key))]),
              observers=[rec]).run(a, f"my key is {key}")
    data = rec.last().to_ndjson()
    for form in secret_forms(key):
        assert form not in data, form
    assert b"[redacted]" in data


def streamed_texts(journal: Journal) -> dict[str, str]:
    """Each streamed text of a journal, its deltas joined, by id."""
    from pipeline.values.chunks import ReasoningDelta, ToolCallDelta

    out: dict[str, str] = {}
    for e in journal.entries:
        if isinstance(e, ModelReplied):
            ev = e.event
            if isinstance(ev, TextDelta | ReasoningDelta):
                out[ev.id] = out.get(ev.id, "") + ev.text
            elif isinstance(ev, ToolCallDelta):
                out[ev.tool_call_id] = out.get(ev.tool_call_id, "") + ev.args_delta
    return out


def test_a_key_the_model_streams_in_pieces_is_stored_in_no_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    rec = Recorder()
    pieces = ["Your key: ", KEY[:9], KEY[9:12], KEY[12:], " (keep it safe)"]
    run = Simulator(ScriptedModel([Say(pieces, reasoning=list(KEY))]),
                    observers=[rec]).run(Agent.create("m"), "key?")
    assert KEY in run.result.text  # the run itself is not changed: only what is stored
    j = rec.last()
    data = j.to_ndjson()
    assert KEY.encode() not in data and KEY[9:].encode() not in data
    texts = streamed_texts(j)
    assert all(KEY not in t for t in texts.values()), texts
    assert texts["text-0"] == "Your key: [redacted] (keep it safe)"
    assert texts["reasoning-0"] == "[redacted]"  # one character a delta
    # as many deltas as were streamed: the replay pulls as often as the run did
    assert sum(isinstance(e, ModelReplied) for e in j.entries) == sum(
        1 for c in run.trace.commands if type(c).__name__ in ("Pull", "CallModel")
    )


def test_a_journal_can_store_only_what_the_agents_pii_guard_lets_out() -> None:
    from pipeline.processors.guards.pii import PIIDetector

    email, card = "jane.doe@example.com", "4111 1111 1111 1111"

    def lookup(name: str) -> str:
        """The customer's contact."""
        return f"{name}: {email}"

    guard = PIIDetector(strategies={"card": "block"}, on_input=True)
    a = Agent.create("m", tools=[lookup], input_processors=[guard], output_processors=[guard])
    script = [Say(calls=[call("lookup", name="jane")]),
              Say(["Write to jane.doe", "@exam", "ple.com, card 4111 11", "11 1111 1111."])]
    data, joined = b"", ""
    for pii, stored in (("keep", True), ("agent", False)):
        rec = Recorder(pii=pii)  # type: ignore[arg-type]
        run = Simulator(ScriptedModel(list(script)), observers=[rec]).run(a, f"I am {email}")
        assert run.result.status == "tripped"  # the card: blocked on the stream
        j = rec.last()
        data = j.to_ndjson()
        joined = "".join(streamed_texts(j).values())
        assert (email.encode() in data) is stored
        assert (email in joined or card in joined) is stored
    assert b"[REDACTED:email]" in data and "[REDACTED:card]" in joined
    with pytest.raises(ValueError, match="pii"):
        Recorder(pii="agnet")  # type: ignore[arg-type]


class Shop(msgspec.Struct, frozen=True):
    """A tool's dependencies (a live object in a real app)."""

    currency: str


def price_of(item: str, ctx: ToolContext[Shop]) -> str:
    """The price of an item."""
    ctx.writer.custom("data-looked-up", {"item": item})
    return f"{item}: 3 {ctx.deps.currency}"


def shop_agent() -> Agent:
    return Agent.create("openai/gpt-4o-mini", tools=[price_of])


def shop_script() -> ScriptedModel:
    return ScriptedModel([Say(calls=[call("price_of", item="tea")]), Say("Tea is 3 EUR.")])


def test_a_run_whose_tools_take_a_context_replays_as_identical() -> None:
    rec = Recorder()
    run = Simulator(shop_script(), observers=[rec]).run(
        shop_agent(), "tea?", deps=Shop("EUR")
    )
    assert run.result.status == "finished"
    # the replay's deps are another object (a new connection, say): the tools do not run
    replay = Simulator.replay(rec.last(), shop_agent(), deps=Shop("EUR"))
    assert replay.divergence is None, str(replay.divergence)
    assert replay.identical and replay.result == run.result

    async def main() -> None:
        again = await AsyncSimulator.replay(rec.last(), shop_agent(), deps=Shop("EUR"))
        assert again.identical, str(again.divergence)

    anyio.run(main)


def flat_price(q: PriceQuery) -> Cost:
    return Cost(Decimal("0.001") * (q.usage.input_tokens + q.usage.output_tokens))


def test_a_run_recorded_with_a_pricer_replays_as_identical_without_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = Recorder(tmp_path)
    run = Simulator(script(), models={"judge": judge()}, observers=[rec],
                    price=flat_price, run_ids=numbered_run_ids()).run(agent(), "Weather?")
    assert run.result.cost is not None
    journal = rec.journal("run1")
    replay = Simulator.replay(journal, agent())  # the recorded costs
    assert replay.identical, str(replay.divergence)
    assert replay.result.cost == run.result.cost
    assert Simulator.replay(journal, agent(), price=flat_price).identical
    from interpreters.cli.commands import main

    path = str(rec.path("run1"))
    assert main(["replay", path, "--agent", "tests.test_journal:agent"]) == 0
    assert "identical to the recording" in capsys.readouterr().err
    assert main(["replay", path, "--agent", "tests.test_journal:agent",
                 "--price", "tests.test_journal:flat_price"]) == 0
    assert main(["replay", path, "--agent", "tests.test_journal:agent",
                 "--price", "tests.test_journal:double_price"]) == 1
    err = capsys.readouterr().err
    assert "cost differs" in err and '"0.012"' in err and '"0.024"' in err  # both values


def double_price(q: PriceQuery) -> Cost:
    return Cost(flat_price(q).total * 2)


def test_a_divergence_names_the_field_and_shows_both_values() -> None:
    rec, sim = recorded()
    sim.run(agent(), "Weather in Paris?")
    replay = Simulator.replay(rec.last(), shouting_agent())
    d = replay.divergence
    assert d is not None
    assert d.field.startswith("publish") and "text" in d.field
    assert "It is sunny" in d.recorded or "Meh" in d.recorded
    assert d.replayed == d.recorded.upper()
    text = str(d)
    assert d.field in text and d.recorded in text and d.replayed in text
    assert "with other content" not in text


def test_the_recorded_fields_of_commands_hold_no_piece_of_a_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from interpreters.record.journal import CommandSeen

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    rec = Recorder()
    Simulator(ScriptedModel([Say(list(KEY)), Say("x" * 150 + KEY)]),
              observers=[rec]).run(Agent.create("m"), f"{'y' * 150}{KEY} and more")
    previews = [f.value for c in rec.last().entries if isinstance(c, CommandSeen)
                for f in c.fields]
    # one character a delta: no published piece is kept, nor a preview cut inside the key
    assert not any(len(p) >= 3 and p.strip('"') and p.strip('"') in KEY for p in previews)
    assert not any(KEY[:6] in p for p in previews), [p for p in previews if KEY[:6] in p]


def eur_shop() -> Shop:
    return Shop("EUR")


def test_pipeline_replay_gives_tools_their_deps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from interpreters.cli.commands import main

    rec = Recorder(tmp_path)
    Simulator(shop_script(), observers=[rec], run_ids=numbered_run_ids()).run(
        shop_agent(), "tea?", deps=Shop("EUR"))
    path = str(rec.path("run1"))
    base = ["replay", path, "--agent", "tests.test_journal:shop_agent"]
    assert main([*base, "--deps", "tests.test_journal:eur_shop"]) == 0
    assert "identical to the recording" in capsys.readouterr().err
    assert main(base) == 2  # the tool needs a Shop: said in one line, no traceback
    err = capsys.readouterr().err
    assert "needs deps of type Shop" in err and "--deps" in err and "Traceback" not in err


class _Upper(Processor):
    id = "upper"

    def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
        if isinstance(args.part, TextDelta):
            return Replace(TextDelta(args.part.id, args.part.text.upper()))
        return Continue()


def test_the_journal_holds_each_processor_decision_in_the_order_the_run_made_them() -> None:
    rec, sim = recorded()
    run = sim.run(agent(_Upper()), "Weather in Paris?")
    seen = [e for e in rec.last().entries if isinstance(e, EffectSeen)]
    assert [(e.processor_id, e.hook, e.effect) for e in seen] == [
        (r.processor_id, r.hook, type(r.effect).__name__) for r in run.trace.effects
    ]
    retried = [e for e in seen if e.effect == "Abort"]
    assert retried and retried[0].hook == "process_output_step"
    assert retried[0].detail.startswith("retry: ")  # the guardrail's feedback
    assert any(e.detail == "TextDelta" for e in seen if e.processor_id == "upper")
    # the replay ignores them: the same run
    assert Simulator.replay(Journal.from_ndjson(rec.last().to_ndjson()), agent(_Upper())).identical


def test_a_processor_decision_names_what_it_replaced_never_the_text() -> None:
    rec, sim = recorded()
    sim.run(agent(_Upper()), "Weather in Paris?")
    details = [e.detail for e in rec.last().entries
               if isinstance(e, EffectSeen) and e.processor_id == "upper"]
    assert details and not any("PARIS" in d for d in details)


class _Tattle(Processor):
    id = "tattle"

    def process_output_step(self, args: OutputStepArgs[None]) -> OutputStepResult[None]:
        abort(f"the answer mentions {KEY}")


def test_a_processor_decision_keeps_no_secret() -> None:
    rec = Recorder(secrets=[KEY])
    run = Simulator(ScriptedModel([Say("hello")]), observers=[rec]).run(
        Agent.create("sim/m", output_processors=[_Tattle()]), "hi")
    assert run.result.status == "tripped"
    (seen,) = [e for e in rec.last().entries if isinstance(e, EffectSeen)]
    assert seen.detail == "the answer mentions [redacted]"
    assert KEY.encode() not in rec.last().to_ndjson()


def test_a_run_cancelled_while_some_of_its_tools_ran_replays_with_their_real_results() -> None:
    rec = Recorder()
    signal = CancelSignal()

    async def quick(city: str) -> str:
        """Finishes at once."""
        return f"quick {city}"

    async def slow(city: str) -> str:
        """Cancels the run once `quick` has finished, and never returns."""
        await anyio.sleep(0)  # `quick` finishes meanwhile
        signal.cancel("enough")
        await anyio.sleep_forever()
        return "never"

    a = Agent.create("m", tools=[quick, slow])
    model = ScriptedModel([
        Say("a", calls=[call("quick", city="x"), call("slow", city="y")]), Say("never"),
    ])

    async def main() -> None:
        with anyio.fail_after(10):  # a cap only
            run = await AsyncSimulator(model, observers=[rec]).run(a, "go", signal=signal)
        assert run.result.status == "cancelled"
        results = {
            p.tool_name: p.result for m in run.result.messages.messages for p in m.parts
            if isinstance(p, ToolResultPart)
        }
        assert results["quick"] == "quick x"  # it finished: its real result is kept
        replay = await AsyncSimulator.replay(rec.last(), a)
        assert replay.result == run.result
        assert replay.identical

    anyio.run(main)
