"""Properties of the web stream adapter (`pipeline.ui_stream`) over random simulated runs:
scripts with text, reasoning, tool calls and a guard that discards short answers."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from effects import Continue
from interpreters.testing import Say, ScriptedCall, ScriptedModel, Simulator, call
from pipeline.agent import Agent
from pipeline.processor import OutputStepArgs, OutputStepResult, Processor, abort
from pipeline.ui_stream import ui_message_sse

JsonDict = dict[str, object]
words = st.text(alphabet="abc xyz.", min_size=1, max_size=8)


def echo(x: str) -> str:
    """Echo."""
    return x


class ShortIsDiscarded(Processor):
    id = "short"

    def process_output_step(self, args: OutputStepArgs[None]) -> OutputStepResult[None]:
        if not args.tool_calls and len(args.text) < 4:
            abort("longer, please", retry=True)
        return Continue()


@st.composite
def says(draw: st.DrawFn) -> Say:
    calls: list[ScriptedCall] = [
        call("echo", x=x) for x in draw(st.lists(words, max_size=2))
    ]
    return Say(
        draw(st.lists(words, max_size=3)),
        calls=calls,
        reasoning=draw(st.lists(words, max_size=2)),
    )


scripts = st.lists(says(), min_size=1, max_size=5).map(lambda s: [*s, Say("the end.")])


def _events(body: bytes) -> list[JsonDict]:
    frames = body.decode().split("\n\n")
    assert frames[-2:] == ["data: [DONE]", ""]
    out: list[JsonDict] = []
    for f in frames[:-2]:
        assert f.startswith("data: ")
        e = json.loads(f.removeprefix("data: "))
        assert isinstance(e, dict)
        out.append(e)
    return out


@given(script=scripts)
def test_the_client_sees_the_runs_text_and_no_discarded_part_merged(script: list[Say]) -> None:
    """A `useChat` client that drops the parts a `data-step-discarded` names reads exactly
    the run's text; steps open and close in turn; the stream starts with `start` and
    ends with `finish` then `[DONE]`; every tool output follows its call's input."""
    agent = Agent.create(
        "m", tools=[echo], output_processors=[ShortIsDiscarded()], max_steps=10,
        max_processor_retries=10,
    )
    with Simulator(ScriptedModel(script)).stream(agent, "go") as stream:
        evs = _events(b"".join(ui_message_sse(stream)))
    result = stream.result

    assert evs[0]["type"] == "start" and evs[-1] == {"type": "finish"}
    open_step = False
    inputs: set[object] = set()
    discarded: set[object] = set()
    text: dict[object, str] = {}
    for e in evs:
        t = e["type"]
        if t == "start-step":
            assert not open_step
            open_step = True
        elif t == "finish-step":
            assert open_step
            open_step = False
        elif t == "tool-input-available":
            inputs.add(e["toolCallId"])
        elif t == "tool-output-available" or t == "tool-output-error":
            assert e["toolCallId"] in inputs
        elif t == "text-delta":
            assert open_step
            text[e["id"]] = text.get(e["id"], "") + str(e["delta"])
        elif t == "data-step-discarded":
            data = e["data"]
            assert isinstance(data, dict) and isinstance(data["part_ids"], list)
            discarded.update(data["part_ids"])
    assert not open_step
    kept = "".join(v for k, v in text.items() if k not in discarded)
    assert kept == result.text
