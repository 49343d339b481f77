"""Output modes and typed partial output on the simulator: the mode is checked when it
is made, `prompted` puts the schema in the instructions, a reply that does not validate
goes back as feedback in every mode, and the partial outputs are made from what the
stream processors released (a redaction holds), the last one the output."""

from __future__ import annotations

import sys

import anyio
import msgspec
import pytest

from effects import Continue, Replace
from interpreters.testing import AsyncSimulator, Say, ScriptedModel, Simulator
from pipeline import (
    Agent,
    OutputStepArgs,
    OutputStepResult,
    Processor,
    StreamArgs,
    StreamResult,
    TextDelta,
)
from pipeline.loop.partial import parse_partial
from pipeline.values.chunks import OutputPartial
from pipeline.values.messages import TextPart
from pipeline.values.model import OutputMode
from pipeline.values.output_type import OUTPUT_PROMPT_TAG, TypedOutput


class City(msgspec.Struct, frozen=True):
    city: str
    country: str = ""


MODES: tuple[OutputMode, ...] = ("auto", "native", "tool", "prompted")


def test_a_mode_that_is_not_one_is_refused_when_made() -> None:
    with pytest.raises(ValueError, match="mode must be one of"):
        TypedOutput.of(City, mode="json")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="partial"):
        TypedOutput.of(City, partial=1)  # type: ignore[arg-type]


def test_prompted_mode_asks_with_the_schema_in_the_instructions() -> None:
    model = ScriptedModel([Say('{"city": "Paris"}')])
    agent = Agent.create("m", instructions="be brief",
                         output_type=TypedOutput.of(City, mode="prompted"))
    run = Simulator(model).run(agent, "where?")
    assert run.result.output == City("Paris")
    [request] = model.requests
    assert request.structured_output is None
    assert request.system[0].content == "be brief"
    assert request.system[-1].tag == OUTPUT_PROMPT_TAG and '"city"' in request.system[-1].content


@pytest.mark.parametrize("mode", MODES)
def test_a_reply_that_does_not_validate_goes_back_as_feedback_in_every_mode(
    mode: OutputMode
) -> None:
    model = ScriptedModel([Say('{"town": 1}'), Say('{"city": "Paris"}')])
    agent = Agent.create("m", output_type=TypedOutput.of(City, mode=mode),
                         max_processor_retries=1)
    run = Simulator(model).run(agent, "where?")
    assert run.result.output == City("Paris") and run.result.retry_count == 1
    assert "does not match the City JSON schema" in model.requests[1].messages[-1].text
    spent = Simulator(ScriptedModel([Say("{}"), Say("{}")])).run(agent, "where?")
    assert spent.result.status == "failed", "past max_processor_retries: OutputInvalid"


class Redact(Processor):
    """Replaces "Secret" wherever a text delta has it (as a PII guard would)."""

    id = "redact"

    def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
        p = args.part
        if isinstance(p, TextDelta) and "Secret" in p.text:
            return Replace(TextDelta(p.id, p.text.replace("Secret", "******")))
        return Continue()


PIECES = ['{"city": "Se', 'cret', 'ville", ', '"country": "F', 'R"}']


def test_partials_are_made_from_what_the_stream_processors_released() -> None:
    agent = Agent.create("m", output_type=TypedOutput.of(City, partial=True),
                         output_processors=[Redact()])
    run = Simulator(ScriptedModel([Say(['{"city": "Secret', 'ville", "country": "FR"}'])])).run(
        agent, "where?")
    partials = [c for c in run.chunks if isinstance(c, OutputPartial)]
    assert [p.value for p in partials] == [City("******"), City("******ville", "FR")]
    assert partials[-1].value == run.result.output
    assert partials[-1].data == {"city": "******ville", "country": "FR"}


def test_partials_grow_with_the_reply_on_both_simulators() -> None:
    agent = Agent.create("m", output_type=TypedOutput.of(City, partial=True))
    sync = Simulator(ScriptedModel([Say(PIECES)])).run(agent, "where?")
    got = [c.value for c in sync.chunks if isinstance(c, OutputPartial)]
    assert got == [City("Se"), City("Secret"), City("Secretville"),
                   City("Secretville", "F"), City("Secretville", "FR")]
    assert got[-1] == sync.result.output

    async def main() -> list[object]:
        run = await AsyncSimulator(ScriptedModel([Say(PIECES)])).run(agent, "where?")
        return [c.value for c in run.chunks if isinstance(c, OutputPartial)]

    for backend in ("asyncio", "trio"):
        assert anyio.run(main, backend=backend) == got


class Rewrite(Processor):
    """Replaces the reply (after it streamed) with another valid one."""

    id = "rewrite"

    def process_output_step(self, args: OutputStepArgs[None]) -> OutputStepResult[None]:
        last = args.message_list.messages[-1]
        fixed = msgspec.structs.replace(last, parts=(TextPart('{"city": "Lyon"}'),))
        return Replace(args.message_list.replace_messages((*args.messages[:-1], fixed)))


def test_the_last_partial_is_the_output_even_when_a_processor_replaced_the_reply() -> None:
    agent = Agent.create("m", output_type=TypedOutput.of(City, partial=True),
                         output_processors=[Rewrite()])
    run = Simulator(ScriptedModel([Say(PIECES)])).run(agent, "where?")
    partials = [c for c in run.chunks if isinstance(c, OutputPartial)]
    assert run.result.output == City("Lyon")
    assert partials[-1].value == City("Lyon")


def test_no_partials_without_asking() -> None:
    agent = Agent.create("m", output_type=City)
    run = Simulator(ScriptedModel([Say(PIECES)])).run(agent, "where?")
    assert not [c for c in run.chunks if isinstance(c, OutputPartial)]


@pytest.mark.parametrize("text, data", [
    ('{"a": "he', {"a": "he"}),
    ('{"a": 12', {}),  # a number still streaming is left out
    ('{"a": 12, "b": [1, 2', {"a": 12, "b": [1]}),  # its last number may grow
    ('```json\n{"a": tr', {}),
    ('```json\n{"a": true}\n```', {"a": True}),
    ("[1, 2]", None),
    ("no json", None),
    ("", None),
])
def test_partial_json_is_read_as_far_as_it_is_sure(text: str, data: object) -> None:
    assert parse_partial(text) == data


def test_typed_partial_output_without_its_extra_is_refused_when_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "jiter", None)  # as if the extra were not installed
    with pytest.raises(ImportError, match=r"pipeline-agents\[partial\]"):
        TypedOutput.of(_PartialProbe, partial=True)
    assert TypedOutput.of(_PartialProbe).partial is False  # nothing asked, nothing needed


class _PartialProbe(msgspec.Struct):
    name: str
