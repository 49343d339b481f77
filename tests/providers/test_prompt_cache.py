"""Prompt caching: the breakpoints a PromptCache asks of Anthropic, the cache counts in
usage, cost and traces, a retry that keeps the cached prefix, and bad settings refused."""

from __future__ import annotations

import json
from typing import Any

import pytest

from effects import Continue
from interpreters.providers import AnthropicCodec, OpenAIChatCodec
from interpreters.testing import Say, ScriptedModel, Simulator, call
from pipeline import Agent, OutputStepArgs, OutputStepResult, Processor, abort
from pipeline.values.chunks import ModelFinish, Usage
from pipeline.values.messages import ReasoningPart, SystemMessage, TextPart
from pipeline.values.model import ModelRequest, ModelSettings, PromptCache
from tests.providers.helpers import sse
from tests.providers.test_codecs import WEATHER, body, decode, msg, req

EPHEMERAL = {"type": "ephemeral"}


def cached(cache: PromptCache, *messages: Any, **kw: Any) -> ModelRequest:
    return req(*messages, model_settings=ModelSettings(prompt_cache=cache), **kw)


def marks(b: dict[str, Any]) -> list[str]:
    """Where the body carries cache_control, as paths."""
    out = [f"tools[{i}]" for i, t in enumerate(b.get("tools", ())) if "cache_control" in t]
    if isinstance(b.get("system"), list):
        out += [f"system[{i}]" for i, s in enumerate(b["system"]) if "cache_control" in s]
    for i, m in enumerate(b["messages"]):
        out += [f"messages[{i}][{j}]" for j, c in enumerate(m["content"]) if "cache_control" in c]
    return out


def test_without_a_prompt_cache_nothing_is_marked() -> None:
    b = body(AnthropicCodec(), req(msg("user", TextPart("hi")), tools=(WEATHER,),
                                   system=(SystemMessage("be brief"),)))
    assert marks(b) == []
    assert b["system"] == "be brief"


def test_breakpoints_after_the_tools_the_system_prompt_and_the_last_message() -> None:
    b = body(AnthropicCodec(), cached(
        PromptCache(),
        msg("user", TextPart("first")), msg("assistant", TextPart("answer")),
        msg("user", TextPart("second"), TextPart("more")),
        tools=(WEATHER,), system=(SystemMessage("be brief"),),
    ))
    assert marks(b) == ["tools[0]", "system[0]", "messages[2][1]"]
    assert b["tools"][0]["cache_control"] == EPHEMERAL
    assert b["system"] == [{"type": "text", "text": "be brief", "cache_control": EPHEMERAL}]


def test_options_choose_the_breakpoints_and_the_ttl() -> None:
    b = body(AnthropicCodec(), cached(
        PromptCache(tools=False, system=False, messages=2, ttl="1h"),
        msg("user", TextPart("first")), msg("assistant", TextPart("answer")),
        msg("user", TextPart("second")),
        tools=(WEATHER,), system=(SystemMessage("be brief"),),
    ))
    assert marks(b) == ["messages[1][0]", "messages[2][0]"]
    assert b["messages"][2]["content"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert b["system"] == "be brief"


def test_a_thinking_block_is_never_marked() -> None:
    b = body(AnthropicCodec(), cached(
        PromptCache(messages=2),
        msg("user", TextPart("q")),
        msg("assistant", TextPart("a"), ReasoningPart("hmm", signature="sig")),
    ))
    blocks = b["messages"][1]["content"]
    assert {c["type"] for c in blocks} == {"thinking", "text"}
    assert all("cache_control" not in c for c in blocks if c["type"] == "thinking")
    assert any("cache_control" in c for c in blocks if c["type"] == "text")


def test_openai_caches_by_itself_and_gets_no_hint() -> None:
    plain = body(OpenAIChatCodec(), req(msg("user", TextPart("hi"))))
    hinted = body(OpenAIChatCodec(), cached(PromptCache(), msg("user", TextPart("hi"))))
    assert hinted == plain


def test_anthropic_reports_cache_reads_and_writes_in_usage() -> None:
    codec = AnthropicCodec()
    enc = codec.encode(req(msg("user", TextPart("hi"))), model="m", stream=True)
    events = decode(codec, enc, sse(
        {"type": "message_start", "message": {
            "id": "msg_1", "model": "claude", "usage": {
                "input_tokens": 10, "output_tokens": 1,
                "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 200}}},
        {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "ok"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                           "usage": {"output_tokens": 3}},
        {"type": "message_stop"},
    ))
    fin = events[-1]
    assert isinstance(fin, ModelFinish)
    assert fin.usage == Usage(input_tokens=1210, output_tokens=3,
                                          cached_input_tokens=1000, cache_write_tokens=200)


def test_usage_adds_cache_writes() -> None:
    total = Usage(10, 1, cache_write_tokens=4) + Usage(5, 1, cached_input_tokens=3,
                                                       cache_write_tokens=2)
    assert total == Usage(15, 2, 0, 3, 6)


def test_cache_writes_are_priced_at_their_own_rate() -> None:
    pytest.importorskip("genai_prices")
    from interpreters.providers.prices import genai_prices
    from pipeline.values.cost import PriceQuery

    price = genai_prices()
    plain = price(PriceQuery("anthropic/claude-sonnet-4-5", None, Usage(1000, 10), 1.7e9))
    written = price(PriceQuery("anthropic/claude-sonnet-4-5", None,
                               Usage(1000, 10, cache_write_tokens=500), 1.7e9))
    assert plain is not None and written is not None
    assert written.input > plain.input  # writes cost more than plain input
    assert written.output == plain.output


def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


class RetryOnce(Processor):
    """Discards the first answer in words (not the tool call step)."""

    id = "retry-once"

    def process_output_step(self, args: OutputStepArgs[None]) -> OutputStepResult[None]:
        if args.retry_count == 0 and args.text:
            abort("say it again, shorter", retry=True)
        return Continue()


def _unmarked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


def _blocks(b: dict[str, Any]) -> list[str]:
    """The body's content blocks in order, each as its JSON without the marks (the
    cache's prefix is read block by block: Anthropic merges consecutive user messages)."""
    return [json.dumps([m["role"], _unmarked(c)], sort_keys=True)
            for m in b["messages"] for c in m["content"]]


def test_a_retry_keeps_the_cached_prefix_byte_for_byte() -> None:
    """The retry's request is the first one's conversation with the feedback after it:
    the tools, the system prompt and every earlier content block encode to the same
    bytes, so the prefix the first call cached is read back."""
    model = ScriptedModel([Say(calls=[call("lookup", q="x")]), Say("a long answer"),
                           Say("short")])
    agent = Agent.create("m", instructions="be brief", tools=[lookup],
                         output_processors=[RetryOnce()],
                         model_settings=ModelSettings(prompt_cache=PromptCache()))
    result = Simulator(model).run(agent, "tell me").result
    assert result.status == "finished" and result.text == "short"
    _, first, retry = model.requests
    codec = AnthropicCodec()
    a, b = body(codec, first), body(codec, retry)
    assert a["system"] == b["system"] and a["tools"] == b["tools"]
    assert marks(a)[:2] == ["tools[0]", "system[0]"]
    blocks_a, blocks_b = _blocks(a), _blocks(b)
    assert len(blocks_b) > len(blocks_a)
    assert blocks_b[: len(blocks_a)] == blocks_a
    assert "say it again, shorter" in blocks_b[-1]


@pytest.mark.parametrize("kw", [
    {"messages": 3}, {"messages": -1}, {"messages": True}, {"ttl": "10m"}, {"tools": 1},
])
def test_a_bad_prompt_cache_is_refused(kw: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="PromptCache"):
        PromptCache(**kw)


@pytest.mark.parametrize("kw", [
    {"temperature": "hot"}, {"temperature": -0.1}, {"temperature": 3}, {"top_p": 1.5},
    {"max_tokens": 0}, {"max_tokens": 10.5}, {"seed": "1"}, {"stop": ["x"]}, {"stop": ("",)},
    {"prompt_cache": {"messages": 1}},
])
def test_bad_model_settings_are_refused_when_made(kw: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="ModelSettings"):
        ModelSettings(**kw)


def test_good_model_settings_are_kept() -> None:
    s = ModelSettings(temperature=0, top_p=1.0, max_tokens=5, seed=1, stop=("END",),
                      prompt_cache=PromptCache(messages=0))
    assert (s.temperature, s.top_p, s.max_tokens, s.stop) == (0, 1.0, 5, ("END",))
