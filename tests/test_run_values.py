"""The run's state as values: a frozen configuration, a mutable state, the
phases as functions over them; no mixins, no private name imported across modules."""

from __future__ import annotations

import ast
from pathlib import Path

import msgspec
import pytest

from pipeline import Agent
from pipeline.loop.state import RunConfig, RunState
from pipeline.loop.stream import fresh_seen, plan_stream
from pipeline.values.context import RunContext
from pipeline.values.messages import MessageList

SRC = Path(__file__).resolve().parent.parent / "src"
FIELD, STRAY = "record", "not_a_field"  # names in variables: the type checker would refuse
PHASE_MODULES = tuple(p.stem for p in (SRC / "pipeline" / "loop").glob("*.py"))


def _config(agent: Agent) -> RunConfig:
    return RunConfig(
        agent=agent, ctx=RunContext(run_id="r"), clock=lambda: 0.0, record=None, price=None,
        **plan_stream(agent, ()),
    )


def test_the_configuration_is_frozen() -> None:
    rc = _config(Agent.create(model="m"))
    with pytest.raises(AttributeError):
        setattr(rc, FIELD, None)
    assert isinstance(rc, msgspec.Struct)


def test_the_state_has_slots_only() -> None:
    from pipeline.loop.state import Ids

    st = RunState(
        Ids("r"), MessageList(()), [], cost_known=False,
        seen=fresh_seen(_config(Agent.create(model="m"))), ids_used=set(),
    )
    # the state and the caches it holds, read on the per-chunk and per-step paths
    for value in (st, st.seen, st.call_ids, st.tools, st.leaving):
        assert not hasattr(value, "__dict__")
        with pytest.raises(AttributeError):
            setattr(value, STRAY, 1)


def test_no_private_name_is_imported_across_modules() -> None:
    found = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found += [
                    f"{path.relative_to(SRC)}: {node.module}.{a.name}"
                    for a in node.names
                    if a.name.startswith("_") and node.module.split(".")[0] in {
                        p.name for p in SRC.iterdir()
                    }
                ]
    assert found == []


def test_the_phase_modules_have_no_mixins() -> None:
    """The phases are functions: the run's modules define no class inheriting another of
    theirs (the old `_Run(StepSetup, StreamStage, CallIds)` over `RunState`)."""
    own: set[str] = set()
    bases: dict[str, list[str]] = {}
    for name in PHASE_MODULES:
        tree = ast.parse((SRC / "pipeline" / "loop" / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                own.add(node.name)
                bases[node.name] = [ast.unparse(b) for b in node.bases]
    assert {c: [b for b in bs if b in own] for c, bs in bases.items() if set(bs) & own} == {}
