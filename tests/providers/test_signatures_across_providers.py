"""A reasoning signature goes back only to the provider that signed it: a step that
switches provider (a processor's `StepChange(model=...)`, a fallback model) sends the
other provider no signature of the first's (its API would reject it, or take another
provider's opaque data for its own). Recorded thinking responses (Anthropic, Gemini,
OpenAI Responses), then the next step on each other wire format, over HTTP."""

from __future__ import annotations

import json

import pytest

from effects import Continue, Replace
from interpreters.sync import SyncInterpreter
from pipeline import Agent, InputStepArgs, InputStepResult, StepChange
from pipeline.agent import PrepareStep
from pipeline.values.messages import ReasoningPart
from tests.providers.cassettes import traffic_dir
from tests.providers.made_streams import made
from tests.providers.server import ReplayServer, Reply
from tests.providers.test_fallback_http import ANSWERS, Wired, _recorded, answer

ROOT = traffic_dir()
pytestmark = pytest.mark.skipif(
    not (ROOT / "INDEX.md").exists(), reason=f"recorded traffic not found at {ROOT}"
)
PA = "pydantic+pydantic-ai/tests/models/cassettes/"
SIGNED = {
    # a recorded answer whose reasoning carries a signature: (route, file)
    "anthropic": ("anthropic", PA + "test_anthropic/test_anthropic_tool_with_thinking.yaml"),
    "gemini": ("google", PA + "test_google/test_google_streaming_tool_call_thought_signature.yaml"),
    "openai-responses": (
        "openai-responses",
        PA + "test_openai_responses/test_openai_responses_thinking_with_tool_calls.yaml",
    ),
}


def switch_to(model: str) -> PrepareStep:
    """prepare_step: the second step asks `model`."""

    def prepare(args: InputStepArgs[None]) -> InputStepResult[None]:
        if args.step_number == 1:
            return Replace(StepChange(model=model))
        return Continue()
    return prepare


@pytest.mark.parametrize("then", sorted(ANSWERS))
@pytest.mark.parametrize("first", sorted(SIGNED))
def test_a_signature_goes_back_only_to_the_provider_that_signed_it(
    server: ReplayServer, first: str, then: str
) -> None:
    route, name = SIGNED[first]
    ex, stream = _recorded(name)
    server.queue(Reply(ex.status, ex.headers, ex.body, chunks=7), answer(then)[0])
    signer, model = f"{route}/first", f"{ANSWERS[then][0]}/then"
    agent = Agent.create(signer, prepare_step=switch_to(model), max_steps=2)
    wired = Wired(server, {signer: stream, model: answer(then)[1]})
    with wired.sync() as resolve:
        result = SyncInterpreter(resolve=resolve).run(agent, "hi")
    assert result.status == "finished", result.error
    [signed] = [p for m in result.messages.messages for p in m.parts
                if isinstance(p, ReasoningPart) and p.signature]
    assert signed.provider == route  # the route that signed it, recorded with it
    sent = server.seen[-1].body
    # Gemini's and Anthropic's signatures are base64; OpenAI's carries its item id.
    mark = signed.signature.split(" ")[0][:40] if signed.signature else ""
    if ANSWERS[then][0] == route:
        assert mark.encode() in sent, "its own provider gets its signature back"
    else:
        assert mark.encode() not in sent


def test_tool_call_ids_are_fitted_to_the_provider_a_step_switches_to(
    server: ReplayServer
) -> None:
    """OpenAI's call ids (`call_` and 24 characters) sent to Mistral, whose ids are nine
    letters and digits: fitted in the request, the run's messages keep the model's own."""
    name = ("pydantic+pydantic-ai/tests/cassettes/test_temporal/"
            "test_temporal_agent_with_hitl_tool.yaml")
    ex, stream = _recorded(name)
    server.queue(Reply(ex.status, ex.headers, ex.body), made("openai-chat", ["done"]))
    agent = Agent.create("openai/first", prepare_step=switch_to("mistral/then"), max_steps=2)
    with Wired(server, {"openai/first": stream, "mistral/then": True}).sync() as resolve:
        result = SyncInterpreter(resolve=resolve).run(agent, "hi")
    assert result.status == "finished", result.error
    own = [c.tool_call_id for c in result.steps[0].tool_calls]
    assert own == ["call_jYdIdRZHxZTn5bWCq5jlMrJi", "call_TmlTVWQbzrXCZ4jNsCVNbNqu"]
    sent = json.loads(server.seen[-1].body)
    ids = [c["id"] for m in sent["messages"] for c in m.get("tool_calls") or ()]
    ids += [m["tool_call_id"] for m in sent["messages"] if m["role"] == "tool"]
    assert len(ids) == 4 and all(len(i) == 9 and i.isalnum() for i in ids)
    assert not any(i in server.seen[-1].body.decode() for i in own)
