"""The agent fingerprint a durable run records: for the generated agents of
test_equivalence, building an agent anew gives the same digest, and two definitions
differ exactly when `changes` names something (so a resume is refused exactly when the
processors, tools, instructions, model or output type changed)."""

from __future__ import annotations

from hypothesis import given

from interpreters.durable.fingerprint import changes, definition, digest, encode
from properties.test_equivalence import Pipeline, pipelines


@given(pipelines)
def test_an_agent_built_anew_has_the_same_digest(p: Pipeline) -> None:
    assert digest(definition(p.agent())) == digest(definition(p.agent()))
    assert changes(definition(p.agent()), definition(p.agent())) == ()


@given(pipelines, pipelines)
def test_definitions_differ_exactly_when_a_change_is_named(a: Pipeline, b: Pipeline) -> None:
    da, db = definition(a.agent()), definition(b.agent())
    assert (encode(da) != encode(db)) == bool(changes(da, db))
    assert (digest(da) != digest(db)) == bool(changes(da, db))
    same_processors = (a.inputs, a.outputs, a.errors) == (b.inputs, b.outputs, b.errors)
    if not same_processors:
        assert any(c.startswith("processors") for c in changes(da, db))
