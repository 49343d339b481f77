"""PIIDetector with `scan_tools=True`: tool-call arguments and tool results are scanned
too: what the consumer sees of them, what the model reads back, and what the result's
messages keep. Without it tools get the model's arguments and the model reads the results
as they are; what is sent out of a tool result is handled either way."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from interpreters.testing import Say, call
from pipeline.processors import PIIDetector
from pipeline.tools import tool
from pipeline.values.chunks import ToolCall, ToolCallDelta, ToolResult
from tests.helpers import make_agent, simulate

EMAIL = "ada@example.com"
received: list[str] = []


@tool
def crm(name: str) -> dict[str, object]:
    """Look a customer up."""
    return {"name": name, "contacts": [f"mail {EMAIL}", "phone none"], "vip": True}


@tool
def notify(to: str) -> str:
    """Send a notification."""
    received.append(to)
    return "sent"


def everything(ran_chunks: Sequence[object], messages: object, requests: object) -> str:
    return (msgspec.json.encode(ran_chunks).decode() + msgspec.json.encode(messages).decode()
            + msgspec.json.encode(requests).decode())


def test_tool_results_are_redacted_for_the_consumer_the_model_and_the_messages() -> None:
    p = PIIDetector(types=("email",), scan_tools=True)
    agent = make_agent(tools=[crm], input_processors=[p], output_processors=[p])
    ran = simulate(agent, [Say(calls=[call("crm", name="Ada")]), Say("Done.")])
    assert ran.result.status == "finished"
    result_chunk = next(c for c in ran.chunks if isinstance(c, ToolResult))
    assert result_chunk.result == {
        "name": "Ada", "contacts": ["mail [REDACTED:email]", "phone none"], "vip": True,
    }
    assert EMAIL not in everything(ran.chunks, ran.result.messages, ran.model.requests)


def test_as_an_output_processor_only_the_result_messages_are_still_clean() -> None:
    p = PIIDetector(types=("email",), scan_tools=True)
    agent = make_agent(tools=[crm], output_processors=[p])
    ran = simulate(agent, [Say(calls=[call("crm", name="Ada")]), Say("Done.")])
    assert EMAIL not in msgspec.json.encode(ran.chunks).decode()
    assert EMAIL not in msgspec.json.encode(ran.result.messages).decode()


def test_tool_call_arguments_are_redacted_and_their_deltas_not_streamed() -> None:
    received.clear()
    p = PIIDetector(types=("email",), scan_tools=True)
    agent = make_agent(tools=[notify], output_processors=[p])
    ran = simulate(agent, [Say(calls=[call("notify", to=EMAIL)]), Say("Done.")])
    calls = [c for c in ran.chunks if isinstance(c, ToolCall)]
    assert calls[0].args == {"to": "[REDACTED:email]"}
    assert not any(isinstance(c, ToolCallDelta) for c in ran.chunks)
    assert received == ["[REDACTED:email]"]  # the tool got the redacted arguments
    assert EMAIL not in msgspec.json.encode(ran.result.messages).decode()


def test_block_on_a_tool_result_trips() -> None:
    p = PIIDetector(types=("email",), strategy="block", scan_tools=True)
    agent = make_agent(tools=[crm], input_processors=[p], output_processors=[p])
    ran = simulate(agent, [Say(calls=[call("crm", name="Ada")]), Say("Done.")])
    assert ran.result.status == "tripped"
    assert EMAIL not in msgspec.json.encode(ran.chunks).decode()
    assert len(ran.model.requests) == 1  # the model never read the result


def test_without_scan_tools_the_tools_and_the_model_get_the_values_as_they_are() -> None:
    received.clear()
    p = PIIDetector(types=("email",))
    agent = make_agent(tools=[notify, crm], input_processors=[p], output_processors=[p])
    ran = simulate(agent, [Say(calls=[call("notify", to=EMAIL), call("crm", name="A")]),
                           Say("Done.")])
    assert received == [EMAIL]  # the tool got the model's arguments
    read = msgspec.json.encode(ran.model.requests[1].messages).decode()
    assert f"mail {EMAIL}" in read  # the model read the result as the tool returned it
    # what was sent out of the result is handled: a PII guard's default
    result_chunk = next(c for c in ran.chunks if isinstance(c, ToolResult) and c.tool_name == "crm")
    assert result_chunk.result == {
        "name": "A", "contacts": ["mail [REDACTED:email]", "phone none"], "vip": True,
    }


@tool
def by_mail() -> dict[str, object]:
    """Customers by e-mail address."""
    return {EMAIL: {"name": "Ada"}, "bo@example.com": {"name": "Bo"}, "count": 2}


def test_a_value_in_a_key_of_a_tool_result_is_handled_and_no_entry_is_lost() -> None:
    agent = make_agent(tools=[by_mail], output_processors=[PIIDetector(types=("email",))])
    ran = simulate(agent, [Say(calls=[call("by_mail")]), Say("Done.")])
    (out,) = [c for c in ran.chunks if isinstance(c, ToolResult)]
    assert isinstance(out.result, dict)
    assert "@example.com" not in msgspec.json.encode(out.result).decode()
    assert "@example.com" not in msgspec.json.encode(ran.result.messages).decode()
    # two keys redacted alike stay two entries, in order
    assert list(out.result.values()) == [{"name": "Ada"}, {"name": "Bo"}, 2]
