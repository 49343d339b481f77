"""The typed I/O of generator hooks: `Request[R]` requests, `ask` giving their answers
typed and checked, and the `Handlers` registry the interpreters answer them from."""

from __future__ import annotations

from collections.abc import Generator

import anyio
import anyio.lowlevel
import msgspec
import pytest

from effects import Continue, Request, WrongAnswer, ask
from effects.requests import answer_type
from interpreters.core.handlers import Handlers
from interpreters.sync import SyncInterpreter
from interpreters.testing import AsyncSimulator, Say, ScriptedModel, Simulator
from pipeline.processor import (
    AskModel,
    InputArgs,
    InputResult,
    ModelAnswer,
    abort,
    processor,
)
from pipeline.values.result import ProcessorFailed
from tests.helpers import make_agent


class Allowed(Request[bool], frozen=True):
    """May this user go on?"""

    user: str


class Note(msgspec.Struct, frozen=True):
    text: str


class Remember(Request[Note], frozen=True):
    key: str


def _gate(args: InputArgs[None]) -> Generator[object, object, InputResult[None]]:
    user = args.context.resource_id or "nobody"
    if not (yield from ask(Allowed(user))):
        abort(f"{user} may not")
    return Continue()


def _recall(args: InputArgs[None]) -> Generator[object, object, InputResult[None]]:
    note = yield from ask(Remember("k"))
    abort(f"recalled {note.text}")


def test_a_hook_asking_a_request_gets_its_handlers_answer() -> None:
    seen: list[str] = []

    def allowed(req: Allowed) -> bool:
        seen.append(req.user)
        return req.user == "ann"

    handlers = Handlers().add(Allowed, allowed)
    sim = Simulator(ScriptedModel([Say("hi"), Say("hi")]), handlers=handlers)
    agent = make_agent(input_processors=[processor("gate", process_input=_gate)])
    assert sim.run(agent, "go", resource_id="ann").result.status == "finished"
    bob = sim.run(agent, "go", resource_id="bob").result
    assert bob.tripwire is not None and bob.tripwire.reason == "bob may not"
    assert seen == ["ann", "bob"]


def test_an_async_handler_answers_under_the_async_interpreter() -> None:
    async def remember(req: Remember) -> Note:
        await anyio.lowlevel.checkpoint()
        return Note(f"note {req.key}")

    async def main() -> str | None:
        handlers = Handlers().add(Remember, remember)
        sim = AsyncSimulator(ScriptedModel([Say("hi")]), handlers=handlers)
        agent = make_agent(input_processors=[processor("recall", process_input=_recall)])
        result = (await sim.run(agent, "go")).result
        return result.tripwire.reason if result.tripwire is not None else None

    assert anyio.run(main) == "recalled note k"


def test_an_answer_of_another_type_than_the_request_declares_fails_the_hook() -> None:
    # A plain mapping's handler is not checked by mypy: `ask` checks at run time.
    sim = Simulator(ScriptedModel([Say("hi")]), handlers={Remember: lambda req: "not a Note"})
    agent = make_agent(input_processors=[processor("recall", process_input=_recall)])
    err = sim.run(agent, "go").result.error
    assert isinstance(err, ProcessorFailed)
    assert err.error_type == "WrongAnswer"
    assert "Remember was answered with a str, not a Note" in err.message


def test_a_request_class_declares_its_answer_type() -> None:
    assert answer_type(AskModel) is ModelAnswer
    assert answer_type(Allowed) is bool
    assert answer_type(Remember) is Note

    class Loose(Request[object], frozen=True):
        pass

    assert answer_type(Loose) is None  # anything goes: nothing to check
    with pytest.raises(WrongAnswer):
        gen = ask(Allowed("x"))
        next(gen)
        gen.send("yes")


def test_handlers_refuse_what_they_could_not_answer_when_built() -> None:
    def allowed(req: Allowed) -> bool:
        return True

    with pytest.raises(TypeError, match="not a request type"):
        Handlers().add(Note, allowed)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="AskModel is answered by the interpreter"):
        Handlers().add(AskModel, lambda req: ModelAnswer("x"))
    with pytest.raises(TypeError, match="Allowed has a handler already"):
        Handlers().add(Allowed, allowed).add(Allowed, allowed)
    with pytest.raises(TypeError, match="is not callable"):
        Handlers().add(Allowed, "allowed")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="keyed by request class"):
        Simulator(ScriptedModel([]), handlers={"Allowed": allowed})  # type: ignore[dict-item]


def test_the_sync_interpreter_refuses_an_async_handler_when_built() -> None:
    async def remember(req: Remember) -> Note:
        return Note("n")

    with pytest.raises(TypeError, match="handler for Remember is async"):
        SyncInterpreter(ScriptedModel([]), handlers=Handlers().add(Remember, remember))
    assert len(Handlers().add(Remember, remember)) == 1

