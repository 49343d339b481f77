"""Code the public API's types must refuse: each line whose comment is `E:` and a text
must be a mypy error whose message holds that text, and no other line may be one
(tests/test_public_types.py; excluded from the project's own mypy run)."""

from __future__ import annotations

import time
from collections.abc import Generator

import anyio
import httpx

from effects import ask
from interpreters import AsyncInterpreter, SyncInterpreter
from interpreters.core.handlers import Handlers
from interpreters.memory.embed.openai import AsyncOpenAIEmbedder, OpenAIEmbedder
from interpreters.testing import Simulator
from pipeline import Agent, AskModel, processor
from tests.typing_cases.accepted import Allowed, Answer, Audit, Db, audit_input, lookup, typed


def wrong_deps(interp: SyncInterpreter, sim: Simulator) -> None:
    interp.run(typed, "hi", deps="not a Db")  # E: "run" of "SyncInterpreter"
    sim.run(typed, "hi", deps=1)  # E: "run" of "Simulator"
    interp.stream(typed, "hi", deps=None)  # E: "stream" of "SyncInterpreter"


async def wrong_deps_async(interp: AsyncInterpreter) -> None:
    await interp.run(typed, "hi", deps=b"bytes")  # E: "run" of "AsyncInterpreter"


def output_is_typed(interp: SyncInterpreter) -> None:
    out = interp.run(typed, "hi", deps=Db()).output
    print(out.text)  # E: Item "None" of "Answer | None" has no attribute "text"
    answer: Answer = out  # E: Incompatible types in assignment
    assert out is not None
    print(out.missing)  # E: "Answer" has no attribute "missing"
    number: int = answer.text  # E: Incompatible types in assignment
    print(number)


# A tool that needs a Db on an agent whose deps are a str.
Agent.create("m", deps_type=str, tools=(lookup,))  # E: "create" of "Agent"


def answers_of_another_type(request: Allowed) -> str:
    return request.user


def handler_of_another_request(request: AskModel) -> bool:
    return True


Handlers().add(Allowed, answers_of_another_type)  # E: Argument 2 to "add" of "Handlers"
Handlers().add(Allowed, handler_of_another_request)  # E: Argument 2 to "add" of "Handlers"
Handlers().add(Allowed, lambda request: request.missing)  # E: "Allowed" has no attribute
Handlers().add(Answer, lambda request: True)  # E: Argument 1 to "add" of "Handlers"


def hook_misreads() -> Generator[object, object, None]:
    answer = yield from ask(Allowed("ann"))
    print(answer.text)  # E: "bool" has no attribute "text"


# Processors that read a Db on an agent whose deps are a str.
Agent.create("m", deps_type=str, input_processors=[Audit()])  # E: "create" of "Agent"
Agent.create(  # E: "create" of "Agent"
    "m", deps_type=str, input_processors=[processor("a", process_input=audit_input)]
)


# An embedder's client and sleep are of its kind: sync for the sync one, async for the other.
OpenAIEmbedder("openai/m", sleep=anyio.sleep)  # E: Argument "sleep" to "OpenAIEmbedder"
OpenAIEmbedder("openai/m", client=httpx.AsyncClient())  # E: Argument "client" to "OpenAIEmbedder"
AsyncOpenAIEmbedder("openai/m", client=httpx.Client())  # E: Argument "client" to "AsyncOpenAI
AsyncOpenAIEmbedder("openai/m", sleep=time.sleep)  # E: Argument "sleep" to "AsyncOpenAIEmbedder"
