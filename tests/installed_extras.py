"""What each extra enables, in an environment where the wheel was installed with its
extras (`scripts/release-check` runs it there, away from the source tree):
`python installed_extras.py [EXTRA...]` (default: every extra); exit 1 naming the
extras that fail."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable

import msgspec


def guards() -> None:
    from pipeline.processors import LanguageDetector, PIIDetector, UnicodeNormalizer

    found = PIIDetector(types=["phone"], phone_regions=["GB"]).find("call +44 20 7946 0958")
    assert [f.kind for f in found] == ["phone"], found
    LanguageDetector(["en", "fr"])
    UnicodeNormalizer()
    import confusable_homoglyphs  # type: ignore[import-untyped]  # noqa: F401
    import stdnum  # noqa: F401


def docstrings() -> None:
    from pipeline import tool

    def lookup(order: str) -> str:
        """Look an order up.

        Args:
            order: the order's number
        """
        return order

    schema = tool(lookup).spec
    assert "the order's number" in msgspec.json.encode(schema).decode(), schema


def pydantic() -> None:
    import pydantic as p

    from interpreters.testing import Say, ScriptedModel, Simulator
    from pipeline import Agent

    class Answer(p.BaseModel):
        city: str

    agent = Agent.create("openai/gpt-4o-mini", output_type=Answer)
    run = Simulator(ScriptedModel([Say('{"city": "Paris"}')])).run(agent, "where?")
    assert isinstance(run.output, Answer) and run.output.city == "Paris", run.result


def mcp() -> None:
    import mcp as m  # noqa: F401

    from interpreters.mcp_tools import MCPToolset  # noqa: F401


def otel() -> None:
    from interpreters.observers.otel import OTelObserver

    OTelObserver()


def bedrock() -> None:
    from interpreters.providers.bedrock import sigv4_signer

    make = sigv4_signer("bedrock")
    signer = make("https://bedrock-runtime.eu-west-1.amazonaws.com",
                  {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "x" * 40})
    assert signer is not None


def prices() -> None:
    from interpreters.providers.prices import genai_prices

    genai_prices()


def durable() -> None:
    import dbos  # noqa: F401

    from interpreters.durable.dbos import runs  # noqa: F401


def postgres() -> None:
    import psycopg  # noqa: F401
    import psycopg_pool  # noqa: F401

    from interpreters.memory.postgres import PostgresStore  # noqa: F401


def memory_fast() -> None:
    import numpy  # noqa: F401

    from interpreters.memory import scan

    assert scan.numpy_available(), "numpy is installed, the store's scan does not use it"


def memory_ann() -> None:
    from interpreters.memory import SQLiteStore

    store = SQLiteStore(vector_index="hnsw", hnsw_min_vectors=1)
    try:
        store.save_vectors("t", [("a", (1.0, 0.0)), ("b", (0.0, 1.0))], resource_id=None)
        assert store.build_vector_index(thread_id="t") == 2
        (best,) = store.search((0.1, 1.0), k=1, thread_id="t")
        assert best.message_id == "b", best
    finally:
        store.close()


def evals() -> None:
    import tempfile
    from pathlib import Path

    from interpreters.evals import Dataset

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "suite.yaml"
        path.write_text("name: smoke\ncases:\n  - name: hi\n    input: hello\n")
        assert [c.name for c in Dataset.load(path).cases] == ["hi"]


def partial() -> None:
    from interpreters.testing import Say, ScriptedModel, Simulator
    from pipeline import Agent
    from pipeline.values import OutputPartial, TypedOutput

    class City(msgspec.Struct, frozen=True):
        city: str

    agent = Agent.create("openai/gpt-4.1", output_type=TypedOutput.of(City, partial=True))
    run = Simulator(ScriptedModel([Say(['{"city": "Pa', 'ris"}'])])).run(agent, "where?")
    assert [c.value for c in run.chunks if isinstance(c, OutputPartial)][-1] == City("Paris")


def agui() -> None:
    from ag_ui.core import RunStartedEvent  # noqa: F401

    from interpreters.testing import Say, ScriptedModel, Simulator
    from pipeline import Agent
    from pipeline.agui import agui_sse

    agent = Agent.create("openai/gpt-4o-mini")
    run = Simulator(ScriptedModel([Say("Hi.")])).run(agent, "hi")
    frames = b"".join(agui_sse(run.chunks, thread_id="t", run_id="r"))
    assert b'"TEXT_MESSAGE_CONTENT"' in frames and b'"RUN_FINISHED"' in frames, frames


def a2a() -> None:
    from a2a.types.a2a_pb2 import AgentCard  # noqa: F401

    from interpreters import AsyncInterpreter
    from interpreters.a2a import RemoteAgents, a2a_app
    from interpreters.testing import ScriptedModel
    from pipeline import Agent

    app = a2a_app(Agent.create("sim/x", name="x"), AsyncInterpreter(ScriptedModel([])),
                  url="http://127.0.0.1:1")
    assert any(getattr(r, "path", "") == "/.well-known/agent-card.json" for r in app.routes)
    assert RemoteAgents({"x": "http://127.0.0.1:1"}).agent("x").model == "a2a/x"


EXTRAS: dict[str, Callable[[], None]] = {
    "guards": guards, "docstrings": docstrings, "pydantic": pydantic, "mcp": mcp,
    "otel": otel, "bedrock": bedrock, "prices": prices, "durable": durable,
    "postgres": postgres, "memory-fast": memory_fast, "memory-ann": memory_ann,
    "evals": evals, "partial": partial, "agui": agui, "a2a": a2a,
}


def main(names: list[str]) -> int:
    failed = []
    for name in names or list(EXTRAS):
        try:
            EXTRAS[name]()
        except Exception:
            failed.append(name)
            traceback.print_exc()
        print(f"extra {name}: {'FAILED' if name in failed else 'ok'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
