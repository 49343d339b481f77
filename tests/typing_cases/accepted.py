"""Code the public API's types must accept (tests/test_public_types.py runs mypy on it,
and imports it: what it builds at import also works).

The functions are not called: they say what mypy infers (`assert_type`).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import assert_type

import msgspec

from effects import Continue, Request, ask
from interpreters import AsyncInterpreter, SyncInterpreter
from interpreters.core.handlers import Handlers
from interpreters.testing import AsyncSimulator, Simulator
from pipeline import (
    Agent,
    AskModel,
    InputArgs,
    InputResult,
    ModelAnswer,
    ModelRequest,
    Processor,
    RunResult,
    ToolContext,
    processor,
    tool,
)
from pipeline.processor import FunctionProcessor
from pipeline.processors import PIIDetector


class Db:
    def get(self, key: str) -> str:
        return key


class LocalDb(Db):
    pass


class Answer(msgspec.Struct, frozen=True):
    text: str


@tool
def lookup(ctx: ToolContext[Db], key: str) -> str:
    """Look a key up."""
    return ctx.deps.get(key)


@tool(name="echo")
def echo(text: str) -> str:
    """No context: fits any agent."""
    return text


typed = Agent.create("m", deps_type=Db, output_type=Answer, tools=[lookup, echo])
assert_type(typed, Agent[Db, Answer])
assert_type(Agent.create("m", deps_type=Db, tools=[lookup]), Agent[Db, object])
# Without deps_type, the tools' contexts decide the deps type.
assert_type(Agent.create("m", tools=(lookup, echo)), Agent[Db, object])


def sync_runs(interp: SyncInterpreter, sim: Simulator) -> None:
    result = interp.run(typed, "hi", deps=Db())
    assert_type(result, RunResult[Answer])
    assert_type(result.output, Answer | None)
    assert_type(interp.run(typed, "hi", deps=LocalDb()).output, Answer | None)
    with interp.stream(typed, "hi", deps=Db()) as stream:
        assert_type(stream.result.output, Answer | None)
    assert_type(sim.run(typed, "hi", deps=Db()).result.output, Answer | None)
    assert_type(sim.stream(typed, "hi", deps=Db()).result.output, Answer | None)


async def async_runs(interp: AsyncInterpreter, sim: AsyncSimulator) -> None:
    assert_type((await interp.run(typed, "hi", deps=Db())).output, Answer | None)
    assert_type(interp.stream(typed, "hi", deps=Db()).result.output, Answer | None)
    assert_type((await sim.run(typed, "hi", deps=Db())).result.output, Answer | None)


def untyped_runs(interp: SyncInterpreter) -> None:
    # An agent that declares nothing is not in the way: any deps, any output.
    plain = Agent.create("m", tools=[echo])
    interp.run(plain, "hi")
    interp.run(plain, "hi", deps={"any": "thing"})
    assert_type(interp.run(Agent.create("m"), "hi").output, object | None)


class Allowed(Request[bool], frozen=True):
    user: str


def allowed(request: Allowed) -> bool:
    return request.user == "ann"


async def allowed_later(request: Allowed) -> bool:
    return request.user == "ann"


handlers = Handlers().add(Allowed, allowed)
async_handlers = Handlers().add(Allowed, allowed_later)
inline = Handlers().add(Allowed, lambda request: request.user == "ann")


def built_in_requests_type_check_too() -> None:
    # (refused at run time: the interpreters answer AskModel themselves)
    Handlers().add(AskModel, lambda request: ModelAnswer(request.request.model))


def hook_asks() -> Generator[object, object, None]:
    answer = yield from ask(Allowed("ann"))
    assert_type(answer, bool)
    judged = yield from ask(AskModel(ModelRequest(model="judge", system=(), messages=())))
    assert_type(judged, ModelAnswer)


class Audit(Processor[Db]):
    """Its hooks read the run's deps as a Db."""

    id = "audit"

    def process_input(self, args: InputArgs[None, Db]) -> InputResult[None]:
        deps = args.context.deps
        assert_type(deps, Db | None)
        return Continue()


def audit_input(args: InputArgs[None, Db]) -> InputResult[None]:
    assert args.context.deps is not None
    assert_type(args.context.deps.get("k"), str)
    return Continue()


def plain_input(args: InputArgs[None]) -> InputResult[None]:
    return Continue()


audited = Agent.create(
    "m", deps_type=Db, input_processors=[Audit(), processor("a", process_input=audit_input)],
    output_processors=[PIIDetector()],  # a built-in reads no deps: it fits any agent
)
assert_type(audited, Agent[Db, object])
assert_type(Agent.create("m", input_processors=[Audit()]), Agent[Db, object])
assert_type(processor("p", process_input=plain_input), FunctionProcessor[None, object])
