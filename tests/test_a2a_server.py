"""An agent served over A2A (`interpreters.a2a.a2a_app`), talked to over loopback by
plain JSON-RPC (A2A 0.3's `message/send`, `message/stream`, `tasks/cancel`) and by the
official SDK's client (A2A 1.0): what a task streams and answers passed the run's
guards, a run waiting for approval leaves its task input-required until a decision
message resumes it once, a cancel cancels the run, bad messages are A2A errors that
change nothing."""

from __future__ import annotations

import json
import threading
from typing import Any

import anyio
import httpx
import pytest

pytest.importorskip("a2a", reason="the a2a extra")

from effects import Abort, AskApproval, Continue
from interpreters import AsyncInterpreter
from interpreters.a2a import A2AConfigError, a2a_app
from interpreters.testing import Fail, Say, ScriptedModel, call
from pipeline import Agent, InputArgs, ToolCallArgs, ToolCallResult, processor
from pipeline.processors import PIIDetector
from tests.a2a_servers import WAIT, rpc, serve_a2a

EMAIL = "ann@example.com"


class Refunds:
    """An agent that pays refunds after a person approved, with a PII guard on its
    output; what it paid."""

    def __init__(self) -> None:
        self.paid: list[int] = []

        def pay(amount: int) -> str:
            """Pay a refund."""
            self.paid.append(amount)
            return f"paid {amount}"

        def ask(args: ToolCallArgs[None]) -> ToolCallResult[None]:
            return AskApproval(f"pay {args.args['amount']} EUR?") if args.tool_name == "pay" \
                else Continue()

        self.agent = Agent.create(
            "sim/refunds", name="refunds", tools=[pay],
            input_processors=[processor("approve", process_tool_call=ask)],
            output_processors=[PIIDetector(strategy="redact")],
        )


def _user(text: str, **ids: str) -> dict[str, Any]:
    return {"message": {"role": "user", "messageId": f"m-{text[:8]}-{len(ids)}",
                        "parts": [{"kind": "text", "text": text}], **ids}}


def _text(message: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in message.get("parts", ()))


def test_the_agent_card_names_the_agent_its_endpoint_and_streaming() -> None:
    r = Refunds()
    model = ScriptedModel([Say("hi")])
    with serve_a2a(lambda url: a2a_app(r.agent, AsyncInterpreter(model), url=url,
                                       description="Refunds orders.")) as url:
        card = httpx.get(f"{url}/.well-known/agent-card.json", timeout=WAIT).json()
    assert card["name"] == "refunds"
    assert card["description"] == "Refunds orders."
    assert card["supportedInterfaces"][0]["url"] == url
    assert card["capabilities"]["streaming"] is True


def test_message_send_answers_with_the_runs_answer_through_its_pii_guard() -> None:
    r = Refunds()
    model = ScriptedModel([Say(["Write to ", "ann@exa", "mple.com", " please."])])
    with serve_a2a(lambda url: a2a_app(r.agent, AsyncInterpreter(model), url=url)) as url:
        body = rpc(url, "message/send", _user("hello"))
    task = body["result"]
    assert task["status"]["state"] == "completed"
    assert _text(task["status"]["message"]) == "Write to [REDACTED:email] please."
    assert EMAIL not in json.dumps(body)  # nowhere: not in an artifact, not in the answer


def test_message_stream_streams_only_text_its_guards_let_out() -> None:
    r = Refunds()
    model = ScriptedModel([Say(["Mail ", "ann@exa", "mple.com", " today."])])
    with serve_a2a(lambda url: a2a_app(r.agent, AsyncInterpreter(model), url=url)) as url:
        request = {"jsonrpc": "2.0", "id": 1, "method": "message/stream", "params": _user("hi")}
        with httpx.stream("POST", url, json=request, timeout=WAIT) as response:
            raw = response.read().decode()
    events = [json.loads(line[5:]) for line in raw.splitlines() if line.startswith("data:")]
    streamed = "".join(
        _text(e["result"]["artifact"]) for e in events if "artifact" in e["result"])
    assert streamed == "Mail [REDACTED:email] today."
    assert events[-1]["result"]["status"]["state"] == "completed"
    assert EMAIL not in raw


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_sdks_client_streams_the_task_and_its_answer() -> None:
    from a2a.client import ClientConfig, create_client
    from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, TaskState

    r = Refunds()
    model = ScriptedModel([Say(["Refunds take ", "30 days."])])
    with serve_a2a(lambda url: a2a_app(r.agent, AsyncInterpreter(model), url=url)) as url:
        client = await create_client(url, ClientConfig(streaming=True))
        try:
            kinds: list[str] = []
            text = ""
            state = None
            async for ev in client.send_message(SendMessageRequest(message=Message(
                    role=Role.ROLE_USER, message_id="m1", parts=[Part(text="policy?")]))):
                kind = ev.WhichOneof("payload")
                assert kind is not None
                kinds.append(kind)
                if kind == "artifact_update":
                    text += "".join(p.text for p in ev.artifact_update.artifact.parts)
                elif kind == "status_update":
                    state = ev.status_update.status.state
        finally:
            await client.close()
    assert kinds[0] == "task" and "artifact_update" in kinds
    assert text == "Refunds take 30 days."
    assert state == TaskState.TASK_STATE_COMPLETED


def _suspended_task(url: str) -> dict[str, Any]:
    task: dict[str, Any] = rpc(url, "message/send", _user("refund order 7"))["result"]
    assert task["status"]["state"] == "input-required", task
    return task


def _approval_script() -> ScriptedModel:
    return ScriptedModel([Say(calls=[call("pay", amount=5)]),
                          Say(f"Paid; we wrote to {EMAIL}.")])


def test_a_run_waiting_for_approval_leaves_the_task_input_required_until_approved() -> None:
    r = Refunds()
    model = _approval_script()
    with serve_a2a(lambda url: a2a_app(r.agent, AsyncInterpreter(model), url=url)) as url:
        task = _suspended_task(url)
        status = task["status"]["message"]
        (data,) = [p["data"] for p in status["parts"] if "data" in p]
        (pending,) = data["pending"]
        assert pending["tool"] == "pay" and pending["message"] == "pay 5 EUR?"
        assert r.paid == []  # nothing ran yet
        ids = {"taskId": task["id"], "contextId": task["contextId"]}
        done = rpc(url, "message/send", _user("approve", **ids))["result"]
        again = rpc(url, "message/send", _user("approve", **ids))
    assert done["status"]["state"] == "completed"
    assert _text(done["status"]["message"]) == "Paid; we wrote to [REDACTED:email]."
    assert r.paid == [5]  # once
    assert "error" in again  # the task is over: a second approval runs nothing
    assert r.paid == [5]


def test_the_waiting_calls_are_shown_as_the_runs_guards_let_them_out() -> None:
    def mail(to: str) -> str:
        """Send a mail."""
        return "sent"

    def ask(args: ToolCallArgs[None]) -> ToolCallResult[None]:
        return AskApproval(f"mail {args.args['to']}?")

    agent = Agent.create(
        "sim/mail", name="mail", tools=[mail],
        input_processors=[processor("approve", process_tool_call=ask)],
        output_processors=[PIIDetector(strategy="redact")],
    )
    model = ScriptedModel([Say(calls=[call("mail", to=EMAIL)])])
    with serve_a2a(lambda url: a2a_app(agent, AsyncInterpreter(model), url=url)) as url:
        body = rpc(url, "message/send", _user("mail her"))
    status = body["result"]["status"]
    assert status["state"] == "input-required"
    (data,) = [p["data"] for p in status["message"]["parts"] if "data" in p]
    assert data["pending"][0]["args"] == {"to": "[REDACTED:email]"}
    assert data["pending"][0]["message"] == "mail [REDACTED:email]?"
    assert EMAIL not in json.dumps(body)


def test_a_denied_call_never_runs() -> None:
    r = Refunds()
    model = ScriptedModel([Say(calls=[call("pay", amount=5)]), Say("Not paid.")])
    with serve_a2a(lambda url: a2a_app(r.agent, AsyncInterpreter(model), url=url)) as url:
        task = _suspended_task(url)
        ids = {"taskId": task["id"], "contextId": task["contextId"]}
        done = rpc(url, "message/send", _user("deny", **ids))["result"]
    assert done["status"]["state"] == "completed"
    assert _text(done["status"]["message"]) == "Not paid."
    assert r.paid == []


def test_a_reply_that_is_not_a_decision_is_an_invalid_params_error_and_the_task_still_waits(
) -> None:
    r = Refunds()
    model = _approval_script()
    with serve_a2a(lambda url: a2a_app(r.agent, AsyncInterpreter(model), url=url)) as url:
        task = _suspended_task(url)
        ids = {"taskId": task["id"], "contextId": task["contextId"]}
        bad = rpc(url, "message/send", _user("maybe later", **ids))
        still = rpc(url, "tasks/get", {"id": task["id"]})["result"]
        done = rpc(url, "message/send", _user("approve", **ids))["result"]
    assert bad["error"]["code"] == -32602  # InvalidParams
    assert "approve" in bad["error"]["message"]
    assert still["status"]["state"] == "input-required"
    assert done["status"]["state"] == "completed" and r.paid == [5]


def test_decisions_as_a_data_part_name_the_calls_they_decide() -> None:
    r = Refunds()
    model = _approval_script()
    with serve_a2a(lambda url: a2a_app(r.agent, AsyncInterpreter(model), url=url)) as url:
        task = _suspended_task(url)
        (data,) = [p["data"] for p in task["status"]["message"]["parts"] if "data" in p]
        call_id = data["pending"][0]["id"]
        ids = {"taskId": task["id"], "contextId": task["contextId"]}

        def decide(decisions: list[dict[str, Any]]) -> dict[str, Any]:
            return rpc(url, "message/send", {"message": {
                "role": "user", "messageId": f"d{len(decisions)}{decisions[0]['id']}",
                "parts": [{"kind": "data", "data": {"decisions": decisions}}], **ids}})

        unknown = decide([{"id": "call_9", "approved": True}])
        assert r.paid == []
        done = decide([{"id": call_id, "approved": True}])["result"]
    assert unknown["error"]["code"] == -32602 and "call_9" in unknown["error"]["message"]
    assert done["status"]["state"] == "completed" and r.paid == [5]


def test_decisions_for_some_of_the_waiting_calls_are_an_error_and_the_task_still_waits(
) -> None:
    r = Refunds()
    model = ScriptedModel([Say(calls=[call("pay", amount=5), call("pay", amount=6)]),
                           Say("Paid both.")])
    with serve_a2a(lambda url: a2a_app(r.agent, AsyncInterpreter(model), url=url)) as url:
        task = _suspended_task(url)
        (data,) = [p["data"] for p in task["status"]["message"]["parts"] if "data" in p]
        first = data["pending"][0]["id"]
        ids = {"taskId": task["id"], "contextId": task["contextId"]}
        half = rpc(url, "message/send", {"message": {
            "role": "user", "messageId": "half", **ids,
            "parts": [{"kind": "data", "data": {"decisions": [{"id": first, "approved": True}]}}],
        }})
        still = rpc(url, "tasks/get", {"id": task["id"]})["result"]
        assert r.paid == []
        done = rpc(url, "message/send", _user("approve", **ids))["result"]
    assert half["error"]["code"] == -32602
    assert still["status"]["state"] == "input-required"
    assert done["status"]["state"] == "completed" and sorted(r.paid) == [5, 6]


def test_a_message_without_text_is_an_invalid_params_error() -> None:
    r = Refunds()
    model = ScriptedModel([Say("never")])
    with serve_a2a(lambda url: a2a_app(r.agent, AsyncInterpreter(model), url=url,
                                       max_input_chars=10)) as url:
        empty = rpc(url, "message/send", _user("   "))
        long = rpc(url, "message/send", _user("x" * 11))
    assert empty["error"]["code"] == -32602
    assert long["error"]["code"] == -32602 and "10 characters" in long["error"]["message"]
    assert model.requests == []  # no run started


def test_cancel_cancels_the_running_run() -> None:
    r = Refunds()
    waiting, cancelled = threading.Event(), threading.Event()

    async def held(seconds: float) -> None:
        waiting.set()
        try:
            await anyio.sleep(WAIT)
        except BaseException:
            cancelled.set()
            raise

    model = ScriptedModel([Say(calls=[call("pay", amount=5)], latency=1.0)], async_sleep=held)
    with serve_a2a(lambda url: a2a_app(r.agent, AsyncInterpreter(model), url=url)) as url:
        params = _user("refund")
        params["configuration"] = {"blocking": False}
        task = rpc(url, "message/send", params)["result"]
        assert waiting.wait(WAIT)
        gone = rpc(url, "tasks/cancel", {"id": task["id"]})["result"]
        assert cancelled.wait(WAIT)  # the run's model call was cancelled
        after = rpc(url, "tasks/get", {"id": task["id"]})["result"]
    assert gone["status"]["state"] == "canceled"
    assert after["status"]["state"] == "canceled"
    assert r.paid == []


def test_cancel_of_a_waiting_task_drops_its_suspended_run() -> None:
    r = Refunds()
    model = _approval_script()
    with serve_a2a(lambda url: a2a_app(r.agent, AsyncInterpreter(model), url=url)) as url:
        task = _suspended_task(url)
        gone = rpc(url, "tasks/cancel", {"id": task["id"]})["result"]
        ids = {"taskId": task["id"], "contextId": task["contextId"]}
        late = rpc(url, "message/send", _user("approve", **ids))
    assert gone["status"]["state"] == "canceled"
    assert "error" in late and r.paid == []


def test_a_tripped_run_rejects_the_task_and_a_failed_one_fails_it() -> None:
    stop = processor("no-refunds", process_input=lambda a: Abort("refunds are closed"))
    tripping = Agent.create("sim/a", name="a", input_processors=[stop])
    failing = Agent.create("sim/b", name="b", max_api_error_retries=0)
    model = ScriptedModel([Fail(status=400, message="bad request")])
    with serve_a2a(lambda url: a2a_app(tripping, AsyncInterpreter(model), url=url)) as url:
        tripped = rpc(url, "message/send", _user("refund"))["result"]
    with serve_a2a(lambda url: a2a_app(failing, AsyncInterpreter(model), url=url)) as url:
        failed = rpc(url, "message/send", _user("refund"))["result"]
    assert tripped["status"]["state"] == "rejected"
    assert "refunds are closed" in _text(tripped["status"]["message"])
    assert failed["status"]["state"] == "failed"


def test_a_tasks_run_has_no_memory_thread_unless_thread_of_names_one() -> None:
    threads: list[str | None] = []

    def note(args: InputArgs[None, None]) -> Continue:
        threads.append(args.context.thread_id)
        return Continue()

    agent = Agent.create("sim/t", name="t",
                         input_processors=[processor("note", process_input=note)])
    model = ScriptedModel([Say("one"), Say("two")])
    with serve_a2a(lambda url: a2a_app(agent, AsyncInterpreter(model), url=url)) as url:
        rpc(url, "message/send", _user("hi", contextId="shared"))
    with serve_a2a(lambda url: a2a_app(
            agent, AsyncInterpreter(model), url=url,
            thread_of=lambda ctx: f"alice/{ctx.context_id}")) as url:
        rpc(url, "message/send", _user("hi", contextId="shared"))
    assert threads == [None, "alice/shared"]


def test_settings_that_cannot_work_fail_at_construction() -> None:
    agent = Refunds().agent
    interp = AsyncInterpreter(ScriptedModel([]))
    with pytest.raises(A2AConfigError, match="url"):
        a2a_app(agent, interp, url="127.0.0.1:80")
    with pytest.raises(A2AConfigError, match="timeout"):
        a2a_app(agent, interp, url="http://127.0.0.1:1", timeout=0)
    with pytest.raises(A2AConfigError, match="AsyncInterpreter"):
        a2a_app(agent, object(), url="http://127.0.0.1:1")  # type: ignore[arg-type]
