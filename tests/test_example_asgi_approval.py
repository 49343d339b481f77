"""Approving a tool call over the UI message stream of examples/asgi_stream.py, against
the app served by a real ASGI server (uvicorn) on loopback: the request part, the
decision `useChat` posts, and the rest of the run streamed as the answer."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import msgspec
import pytest

from examples.asgi_stream import demo_app, refunds
from tests.asgi_server import serve

WAIT = 20.0
"""Seconds the server may take to answer."""

Event = dict[str, object]


@pytest.fixture
def server() -> Iterator[httpx.Client]:
    """The demo app under uvicorn on 127.0.0.1, and a client."""
    with serve(demo_app()) as url, httpx.Client(base_url=url, timeout=WAIT) as client:
        yield client


def _events(r: httpx.Response) -> list[Event]:
    assert r.status_code == 200, r.text
    assert r.headers["x-vercel-ai-ui-message-stream"] == "v1"
    frames = r.text.split("\n\n")
    assert frames[-2:] == ["data: [DONE]", ""]
    out: list[Event] = []
    for frame in frames[:-2]:
        event = msgspec.json.decode(frame.removeprefix("data: "))
        assert isinstance(event, dict)
        out.append(event)
    return out


def _user(chat: str, text: str) -> dict[str, object]:
    return {"id": chat, "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}]}


def _answer(
    chat: str, text: str, request: Event, approved: bool, reason: str | None = None
) -> dict[str, object]:
    """What `useChat` posts after `addToolApprovalResponse`: the history, the last message
    the assistant's with its tool part in state `approval-responded`."""
    approval: dict[str, object] = {"id": request["approvalId"], "approved": approved}
    if reason is not None:
        approval["reason"] = reason
    body = _user(chat, text)
    messages = body["messages"]
    assert isinstance(messages, list)
    messages.append({"id": "a1", "role": "assistant", "parts": [
        {"type": "text", "text": "Let me see. "},
        {"type": "tool-refund", "toolCallId": request["toolCallId"],
         "state": "approval-responded", "input": {}, "approval": approval},
    ]})
    return body


def _ask(client: httpx.Client, chat: str, text: str) -> tuple[list[Event], Event]:
    evs = _events(client.post("/api/chat", json=_user(chat, text)))
    [request] = [e for e in evs if e["type"] == "tool-approval-request"]
    return evs, request


def _kinds(evs: list[Event]) -> list[object]:
    return [e["type"] for e in evs]


def test_a_call_needing_approval_streams_the_request_and_waits(server: httpx.Client) -> None:
    before = len(refunds)
    evs, request = _ask(server, "chat-wait", "refund 250 on order W1")
    [call] = [e for e in evs if e["type"] == "tool-input-available"]
    assert call["toolName"] == "refund" and call["input"] == {"order": "W1", "amount": 250}
    assert request["toolCallId"] == call["toolCallId"]
    assert isinstance(request["approvalId"], str) and len(request["approvalId"]) == 64
    kinds = _kinds(evs)
    assert "tool-output-available" not in kinds and "tool-output-error" not in kinds
    assert "error" not in kinds and kinds[-1] == "finish"
    assert len(refunds) == before  # nothing ran while it waits


def test_approving_streams_the_response_then_the_tool_output(server: httpx.Client) -> None:
    text = "refund 250 on order A17"
    _, request = _ask(server, "chat-approve", text)
    evs = _events(server.post("/api/chat", json=_answer("chat-approve", text, request, True),
                              headers={"x-user": "ann"}))
    kinds = _kinds(evs)
    response = evs[kinds.index("tool-approval-response")]
    assert response == {"type": "tool-approval-response", "approvalId": request["approvalId"],
                        "approved": True, "decidedBy": "ann"}
    [output] = [e for e in evs if e["type"] == "tool-output-available"]
    assert output["toolCallId"] == request["toolCallId"]
    assert output["output"] == "refunded 250 on A17"
    assert kinds.index("tool-approval-response") < kinds.index("tool-output-available")
    said = "".join(str(e["delta"]) for e in evs if e["type"] == "text-delta")
    assert said == "Done."
    assert refunds.count(("A17", 250)) == 1


def test_denying_streams_the_denial_and_runs_no_tool(server: httpx.Client) -> None:
    before = len(refunds)
    text = "refund 900 on order D5"
    _, request = _ask(server, "chat-deny", text)
    body = _answer("chat-deny", text, request, False, "over the limit")
    evs = _events(server.post("/api/chat", json=body))
    kinds = _kinds(evs)
    response = evs[kinds.index("tool-approval-response")]
    assert response["approved"] is False and response["reason"] == "over the limit"
    assert {"type": "tool-output-denied", "toolCallId": request["toolCallId"]} in evs
    assert "tool-output-available" not in kinds
    said = "".join(str(e["delta"]) for e in evs if e["type"] == "text-delta")
    assert "over the limit" in said  # the model read the reason
    assert len(refunds) == before


def test_a_second_decision_for_the_same_call_is_refused(server: httpx.Client) -> None:
    text = "refund 300 on order T2"
    _, request = _ask(server, "chat-twice", text)
    first = server.post("/api/chat", json=_answer("chat-twice", text, request, True))
    assert first.status_code == 200
    for approved in (True, False):  # decided: nothing waits in the chat any more
        again = server.post("/api/chat", json=_answer("chat-twice", text, request, approved))
        assert again.status_code == 404
        assert "no run waits for approval in thread 'chat-twice'" in again.text
    assert refunds.count(("T2", 300)) == 1


def test_a_decision_for_an_unknown_run_is_a_404(server: httpx.Client) -> None:
    fake: Event = {"approvalId": "0" * 64, "toolCallId": "call_0_0"}
    r = server.post("/api/chat", json=_answer("chat-never", "refund 250 on order X", fake, True))
    assert r.status_code == 404
    assert "chat-never" in r.text


def test_an_answer_that_fits_no_waiting_call_is_a_422_and_the_run_still_waits(
    server: httpx.Client,
) -> None:
    text = "refund 400 on order F3"
    _, request = _ask(server, "chat-other", text)
    wrong = {**request, "approvalId": "f" * 64}
    r = server.post("/api/chat", json=_answer("chat-other", text, wrong, True))
    assert r.status_code == 422 and "f" * 64 in r.text
    ok = _events(server.post("/api/chat", json=_answer("chat-other", text, request, True)))
    assert any(e["type"] == "tool-output-available" for e in ok)
    assert refunds.count(("F3", 400)) == 1


def test_a_refund_under_the_limit_needs_no_approval(server: httpx.Client) -> None:
    evs = _events(server.post("/api/chat", json=_user("chat-small", "refund 40 on order S1")))
    kinds = _kinds(evs)
    assert "tool-approval-request" not in kinds
    assert any(e.get("output") == "refunded 40 on S1" for e in evs)


def test_the_page_shows_approve_and_deny_for_a_waiting_call(server: httpx.Client) -> None:
    r = server.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    for needed in ("tool-approval-request", "approval-responded", "Approve", "Deny"):
        assert needed in r.text


def _decide(client: httpx.Client, chat: str, *decisions: dict[str, object]) -> httpx.Response:
    return client.post("/api/chat/decisions", json={"id": chat, "decisions": list(decisions)})


def test_edited_arguments_run_once_in_place_of_the_waiting_ones(server: httpx.Client) -> None:
    _, request = _ask(server, "chat-edit", "refund 250 on order E1")
    edited = {"id": request["approvalId"], "approved": True,
              "args": {"order": "E1", "amount": 60}}
    evs = _events(_decide(server, "chat-edit", edited))
    kinds = _kinds(evs)
    assert evs[kinds.index("tool-approval-response")]["approved"] is True
    [output] = [e for e in evs if e["type"] == "tool-output-available"]
    assert output == {"type": "tool-output-available", "toolCallId": request["toolCallId"],
                      "output": "refunded 60 on E1"}
    assert "".join(str(e["delta"]) for e in evs if e["type"] == "text-delta") == "Done."
    again = _decide(server, "chat-edit", edited)
    assert again.status_code == 404
    assert [r for r in refunds if r[0] == "E1"] == [("E1", 60)]


@pytest.mark.parametrize(("chat", "args"), [
    ("chat-edit-type", {"order": "E2", "amount": "lots"}),
    ("chat-edit-missing", {"order": "E2"}),
    ("chat-edit-unknown", {"order": "E2", "amount": 5, "note": "x"}),
    ("chat-edit-list", ["E2", 5]),  # not an object
])
def test_edited_arguments_the_tool_refuses_are_a_422_and_the_run_still_waits(
    server: httpx.Client, chat: str, args: object
) -> None:
    _, request = _ask(server, chat, "refund 250 on order E2")
    r = _decide(server, chat, {"id": request["approvalId"], "approved": True, "args": args})
    assert r.status_code == 422, r.text
    assert not [x for x in refunds if x[0] == "E2"]
    ok = _events(_decide(server, chat, {"id": request["approvalId"], "approved": True}))
    assert any(e.get("output") == "refunded 250 on E2" for e in ok)  # it waited
    assert refunds.count(("E2", 250)) == 1
    refunds.remove(("E2", 250))  # (the next parameter's run counts afresh)


def test_decisions_that_do_not_fit_are_refused_and_run_nothing(server: httpx.Client) -> None:
    _, request = _ask(server, "chat-odd", "refund 250 on order E3")
    approval = request["approvalId"]
    denied_edit = {"id": approval, "approved": False, "args": {"order": "E3", "amount": 1}}
    refused = [
        (_decide(server, "chat-odd", denied_edit), 422, "denied"),
        (_decide(server, "chat-none", {"id": approval, "approved": True}), 404, "chat-none"),
        (_decide(server, "chat-odd", {"id": "f" * 64, "approved": True}), 422, "f" * 64),
        (server.post("/api/chat/decisions", json={"id": "chat-odd"}), 422, "decisions"),
    ]
    for r, status, says in refused:
        assert (r.status_code, says in r.text) == (status, True), r.text
    assert not [x for x in refunds if x[0] == "E3"]
    denied = _events(_decide(server, "chat-odd", {"id": approval, "approved": False,
                                                   "reason": "no"}))
    assert {"type": "tool-output-denied", "toolCallId": request["toolCallId"]} in denied
    assert not [x for x in refunds if x[0] == "E3"]


def test_a_cross_site_approval_is_refused_and_the_run_still_waits(server: httpx.Client) -> None:
    """What a page on another site can send without asking (a "simple" request, no CORS
    preflight: a `text/plain` or form body), or a browser says is cross-site, approves
    nothing; the chat's own page (JSON, same origin) does."""
    text = "refund 500 on order X9"
    _, request = _ask(server, "chat-csrf", text)
    answer = msgspec.json.encode(_answer("chat-csrf", text, request, True))
    here = str(server.base_url).rstrip("/")
    for path, body in (("/api/chat", answer),
                       ("/api/chat/decisions", msgspec.json.encode(
                           {"id": "chat-csrf", "decisions": [
                               {"id": request["approvalId"], "approved": True}]}))):
        refused = [
            (server.post(path, content=body, headers={"content-type": ctype}), 415)
            for ctype in ("text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                          "multipart/form-data; boundary=x")
        ] + [
            (server.post(path, content=body, headers={
                "content-type": "application/json", **cross}), 403)
            for cross in ({"origin": "http://evil.example"}, {"origin": "null"},
                          {"sec-fetch-site": "cross-site"}, {"sec-fetch-site": "same-site"},
                          {"origin": here, "sec-fetch-site": "cross-site"})
        ]
        for r, status in refused:
            assert r.status_code == status, (path, r.request.headers, r.text)
    assert ("X9", 500) not in refunds  # nothing ran: the run still waits
    same = {"origin": here, "sec-fetch-site": "same-origin"}
    ok = _events(server.post("/api/chat", content=answer,
                             headers={"content-type": "application/json", **same}))
    assert any(e.get("output") == "refunded 500 on X9" for e in ok)
    assert refunds.count(("X9", 500)) == 1


def test_a_cross_site_request_cannot_stop_a_run() -> None:
    with serve(demo_app(resumable=True, timeout=WAIT)) as url, httpx.Client(
            base_url=url, timeout=WAIT) as client:
        r = client.delete("/api/chat/chat-x/stream", headers={"origin": "http://evil.example"})
        assert r.status_code == 403
        assert client.delete("/api/chat/chat-x/stream").status_code == 204


def test_the_page_lists_what_waits_per_chat_and_who_decided_what(server: httpx.Client) -> None:
    text = "refund 400 on order L4"
    _ask(server, "chat-list-a", text)
    _, decided = _ask(server, "chat-list-b", "refund 500 on order L5")
    server.post("/api/chat", json=_answer("chat-list-b", "refund 500 on order L5", decided,
                                          False, "no receipt"), headers={"x-user": "bob"})
    listing = server.get("/api/approvals").json()
    by_chat = {r["thread_id"]: r for r in listing["waiting"]}
    assert by_chat["chat-list-a"]["pending"][0]["args"] == {"order": "L4", "amount": 400}
    assert "chat-list-b" not in by_chat
    trail = [(r["thread_id"], r["outcome"], r["decided_by"], r["reason"])
             for r in listing["decided"] if r["thread_id"] in ("chat-list-a", "chat-list-b")]
    assert trail == [("chat-list-a", "waiting", "", ""), ("chat-list-b", "waiting", "", ""),
                     ("chat-list-b", "denied", "bob", "no receipt")]
