"""The studio's pages over HTTP on 127.0.0.1: the runs, a run's timeline, a replay beside
its recording; read-only, bounded, loopback only unless asked (interpreters.cli.studio)."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from interpreters import Recorder, cli
from interpreters.cli.playground import Playground
from interpreters.cli.studio import (
    MAX_PAGE,
    MAX_TEXT,
    NotFound,
    Studio,
    StudioError,
    StudioServer,
    check_host,
    shown,
)
from interpreters.record.journal import Journal
from interpreters.testing import Say, ScriptedModel, Simulator, call, numbered_run_ids
from pipeline import Agent, ToolContext
from tests.studio_runs import HOSTILE, louder_agent, record_runs, record_support_run


@pytest.fixture
def journals(tmp_path: Path) -> Path:
    record_support_run(tmp_path)
    return tmp_path


@pytest.fixture
def studio(journals: Path) -> Iterator[StudioServer]:
    with StudioServer(Studio(journals, louder_agent()), port=0) as s:
        yield s


def get(s: StudioServer, path: str, method: str = "GET", *, host_header: str | None = None
        ) -> tuple[int, dict[str, str], bytes]:
    host, port = s.httpd.server_address[:2]
    conn = http.client.HTTPConnection(str(host), int(port), timeout=30)
    try:
        conn.request(method, path, headers={} if host_header is None else {"Host": host_header})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def get_json(s: StudioServer, path: str) -> dict[str, Any]:  # JSON, read as such
    status, _, body = get(s, path)
    assert status == 200, body
    data = json.loads(body)
    assert isinstance(data, dict)
    return data


def test_the_list_names_each_recorded_run(studio: StudioServer) -> None:
    runs = get_json(studio, "/api/runs")
    assert runs["total"] == 1 and runs["can_replay"] is True
    (item,) = runs["items"]
    assert item["agent"] == "support" and item["input"] == "Where is order 1042?"


def test_a_timeline_shows_steps_chunks_effects_tools_retries_and_usage(
    studio: StudioServer,
) -> None:
    data = get_json(studio, "/api/runs/run1?limit=500")
    summary = data["summary"]
    assert isinstance(summary, dict)
    assert summary["status"] == "finished"
    assert summary["steps"] == 2 and summary["model_calls"] == 3
    assert summary["processor_retries"] == 1 and summary["tool_results"] == 1
    assert summary["usage"]["output_tokens"] > 0
    page = data["page"]
    assert isinstance(page, dict)
    rows = page["items"]
    titles = [r["title"] for r in rows]
    kinds = {r["kind"] for r in rows}
    assert {"command", "model", "effect", "tools", "end"} <= kinds
    assert "redact-card.process_output_stream: Replace (TextDelta)" in titles
    assert "no-short-answers.process_output_step: Abort (retry: Too short, please elaborate.)" \
        in titles
    # the retry: step 1 again, with the guard's feedback as one more message
    assert "call openai/gpt-4o-mini (step 1, attempt 0, 4 messages)" in titles
    assert any("shipped <b>today</b>" in json.dumps(r["data"]) for r in rows
               if r["kind"] == "tools")


def test_a_timeline_pages_and_filters_by_kind(studio: StudioServer) -> None:
    whole = get_json(studio, "/api/runs/run1?limit=500")["page"]
    assert isinstance(whole, dict)
    total = whole["total"]
    first = get_json(studio, "/api/runs/run1?limit=10")["page"]
    second = get_json(studio, "/api/runs/run1?offset=10&limit=10")["page"]
    assert isinstance(first, dict) and isinstance(second, dict)
    assert [r["n"] for r in first["items"]] == list(range(10))
    assert [r["n"] for r in second["items"]] == list(range(10, 20))
    assert first["total"] == total > 20
    effects = get_json(studio, "/api/runs/run1?kinds=effect&limit=500")["page"]
    assert isinstance(effects, dict)
    assert effects["items"] and {r["kind"] for r in effects["items"]} == {"effect"}


def test_a_page_larger_than_the_bound_is_refused(studio: StudioServer) -> None:
    status, _, body = get(studio, f"/api/runs/run1?limit={MAX_PAGE + 1}")
    assert status == 400 and b"limit must be between 0 and 500" in body
    status, _, _ = get(studio, "/api/runs/run1?offset=-1")
    assert status == 400


def test_a_replay_shows_where_it_diverges_and_what_the_new_processor_changed(
    studio: StudioServer,
) -> None:
    data = get_json(studio, "/api/runs/run1/replay")
    summary = data["summary"]
    assert isinstance(summary, dict)
    assert summary["identical"] is False
    assert summary["new_processors"] == ["shout"]
    div = summary["divergence"]
    assert isinstance(div, dict) and div["field"].endswith(".text")
    assert div["recorded"] == '"Let me check."' and div["replayed"] == '"LET ME CHECK."'
    changes = summary["changes"]
    assert isinstance(changes, list) and changes
    assert {c["processor"] for c in changes} == {"shout"}
    assert "SHIPPED TODAY" in str(summary["replay_text"])
    page = data["page"]
    assert isinstance(page, dict)
    assert [r["index"] for r in page["items"] if r["diverges"]] == [div["index"]]


def test_a_replay_needs_an_agent(journals: Path) -> None:
    with StudioServer(Studio(journals), port=0) as s:
        status, _, body = get(s, "/api/runs/run1/replay")
    assert status == 400 and b"--agent" in body


def test_only_journals_of_the_directory_are_read(studio: StudioServer, journals: Path) -> None:
    (journals.parent / "secret.ndjson").write_text("not for you")
    for path in ("/api/runs/..%2Fsecret", "/api/runs/%2E%2E", "/api/runs/.hidden",
                 "/api/runs/nope", "/api/elsewhere", "/static/../studio.py"):
        status, _, body = get(studio, path)
        assert status == 404, (path, body)


def test_the_studio_is_read_only(studio: StudioServer) -> None:
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        status, _, _ = get(studio, "/api/runs", method)
        assert status == 405


def test_pages_run_no_inline_script(studio: StudioServer) -> None:
    status, headers, body = get(studio, "/")
    assert status == 200 and b'<script src="/static/studio.js">' in body
    csp = headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert headers["x-content-type-options"] == "nosniff"
    status, _, js = get(studio, "/static/studio.js")
    assert status == 200 and b"innerHTML" not in js and b"insertAdjacentHTML" not in js


def test_model_output_reaches_the_page_as_json_text(studio: StudioServer) -> None:
    status, headers, body = get(studio, "/api/runs/run1?limit=500")
    assert status == 200
    assert headers["content-type"] == "application/json"
    assert b"<script>" not in body and b"<img" not in body  # \u003c escapes
    assert HOSTILE in json.dumps(json.loads(body), ensure_ascii=False).replace('\\"', '"')


def test_a_value_shown_is_bounded() -> None:
    long = "x" * (MAX_TEXT + 10)
    assert shown(long) == "x" * MAX_TEXT + "\u2026 (10 more characters)"
    many = shown(list(range(60)))
    assert isinstance(many, list) and len(many) == 51 and many[-1] == "\u2026 10 more"
    deep: object = "end"
    for _ in range(20):
        deep = [deep]
    value, depth = shown(deep), 0
    while isinstance(value, list):
        value, depth = value[0], depth + 1
    assert depth == 6 and isinstance(value, str) and value.endswith('"end"' + "]" * 14)


def test_an_unreadable_journal_is_listed_as_such(journals: Path) -> None:
    (journals / "broken.ndjson").write_text("{not json\n")
    runs = Studio(journals).runs()
    broken = [r for r in runs["items"] if r["name"] == "broken"]  # type: ignore[attr-defined]
    assert broken and "problem" in broken[0]


def test_the_studio_binds_to_loopback_unless_asked() -> None:
    for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        check_host(host, allow_remote=False)
    for host in ("0.0.0.0", "::", "192.168.1.10", "example.com"):
        with pytest.raises(StudioError, match="--allow-remote"):
            check_host(host, allow_remote=False)
        check_host(host, allow_remote=True)


def test_only_loopback_host_names_are_answered(studio: StudioServer) -> None:
    """A page of another name that resolves to loopback (DNS rebinding) is refused: the
    `Host` it sends is not the studio's."""
    port = studio.httpd.server_address[1]
    for name in ("127.0.0.1", "localhost", "LocalHost", "[::1]"):
        status, _, body = get(studio, "/api/runs", host_header=f"{name}:{port}")
        assert status == 200, (name, body)
    for host in (f"evil.test:{port}", "evil.test", f"127.0.0.1.evil.test:{port}",
                 f"localhost:{port + 1}", "localhost", f"[::2]:{port}", f"::1:{port}",
                 f"localhost:{port}x", ""):
        for path in ("/api/runs", "/api/runs/run1", "/", "/static/studio.js"):
            status, _, body = get(studio, path, host_header=host)
            assert status == 421, (host, path, body)
            assert b"run1" not in body and b"--allow-host" in body


def test_more_host_names_are_answered_when_allowed(journals: Path) -> None:
    with StudioServer(Studio(journals), port=0, allowed_hosts=("studio.internal",)) as s:
        port = s.httpd.server_address[1]
        assert get(s, "/api/runs", host_header=f"Studio.Internal:{port}")[0] == 200
        assert get(s, "/api/runs", host_header=f"127.0.0.1:{port}")[0] == 200
        assert get(s, "/api/runs", host_header=f"other.internal:{port}")[0] == 421
    with pytest.raises(StudioError, match="host name"):
        StudioServer(Studio(journals), port=0, allowed_hosts=("bad name:80",))


def test_the_address_it_serves_on_is_answered(journals: Path) -> None:
    with StudioServer(Studio(journals), host="127.0.0.2", port=0) as s:
        assert s.url.startswith("http://127.0.0.2:")
        status, _, _ = get(s, "/api/runs", host_header=s.url[len("http://"):-1])
        assert status == 200


def test_the_command_refuses_a_host_name_it_cannot_read(
    journals: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["studio", str(journals), "--port", "0",
                     "--allow-host", "http://studio.internal"]) == 2
    assert "not a host name: 'http://studio.internal'" in capsys.readouterr().err


def test_the_command_refuses_a_remote_host_and_a_missing_directory(
    journals: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["studio", str(journals), "--host", "0.0.0.0", "--port", "0"]) == 2
    assert "--allow-remote" in capsys.readouterr().err
    assert cli.main(["studio", str(tmp_path / "none"), "--port", "0"]) == 2
    assert "is not a directory" in capsys.readouterr().err
    assert cli.main(["studio", str(journals), "--agent", "nope:x", "--port", "0"]) == 2
    assert "cannot load 'nope:x'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["studio", str(journals), "--port", "70000"])
    assert "a port is 0 to 65535, got 70000" in capsys.readouterr().err


def test_a_journal_linked_from_outside_the_directory_is_not_read(
    journals: Path, tmp_path_factory: pytest.TempPathFactory,
) -> None:
    outside = tmp_path_factory.mktemp("outside") / "other.ndjson"
    outside.write_bytes((journals / "run1.ndjson").read_bytes())
    (journals / "linked.ndjson").symlink_to(outside)
    studio = Studio(journals)
    assert [r["name"] for r in studio.runs()["items"]] == ["run1"]  # type: ignore[attr-defined]
    with pytest.raises(NotFound):
        studio.run("linked")


def test_a_large_journal_is_paged_not_sent_whole(tmp_path: Path) -> None:
    name = record_support_run(tmp_path)
    j = Journal.read(tmp_path / f"{name}.ndjson")
    big = Journal([j.entries[0], *j.entries[1:-1] * 200, j.entries[-1]])
    big.write(tmp_path / "big.ndjson")
    studio = Studio(tmp_path)
    page = studio.run("big", 0, 100)["page"]
    assert isinstance(page, dict)
    assert page["total"] == len(big.entries) and len(page["items"]) == 100
    assert len(json.dumps(page)) < 200_000


def test_a_journal_nested_past_the_bound_is_answered_with_an_error(
    studio: StudioServer, journals: Path
) -> None:
    lines = (journals / "run1.ndjson").read_bytes().splitlines()
    deep = b"[" * 100_000 + b"]" * 100_000
    lines[1] = lines[0].replace(b'"values":null', b'"values":{"a":' + deep + b"}")
    (journals / "deep.ndjson").write_bytes(b"\n".join(lines))
    status, _, body = get(studio, "/api/runs/deep")
    assert status == 400 and b"nests deeper than" in body
    status, _, body = get(studio, "/api/runs/deep/replay")
    assert status == 400 and b"nests deeper than" in body
    lines[0] = lines[1]  # the header itself, as the list reads it
    (journals / "deeper.ndjson").write_bytes(b"\n".join(lines))
    listed = get_json(studio, "/api/runs")["items"]
    [deeper] = [r for r in listed if r["name"] == "deeper"]
    assert "nests deeper than" in deeper["problem"]


def test_the_summary_totals_the_recorded_costs(tmp_path: Path) -> None:
    from decimal import Decimal

    from interpreters.record.journal import Recorder
    from interpreters.testing import Say, ScriptedModel, Simulator
    from pipeline import Agent
    from pipeline.values.cost import Cost, PriceQuery

    def price(q: PriceQuery) -> Cost:
        return Cost(Decimal("0.25"))

    Simulator(ScriptedModel([Say("hello there")]), observers=[Recorder(tmp_path)],
              price=price, run_ids=numbered_run_ids()).run(Agent.create("openai/gpt-4o-mini"), "hi")
    summary = Studio(tmp_path).run("run1")["summary"]
    assert isinstance(summary, dict) and summary["cost"] == "0.25"



class Orders:
    def __init__(self, orders: dict[str, str]) -> None:
        self.orders = orders


def order_status(order_id: str, ctx: ToolContext[Orders]) -> str:
    """The status of an order."""
    return ctx.deps.orders[order_id]


def orders_agent() -> Agent[Orders]:
    return Agent.create("m", name="orders", tools=[order_status])


def orders() -> Orders:
    return Orders({"1": "shipped"})


def record_orders_run(directory: Path) -> None:
    sim = Simulator(ScriptedModel([Say(calls=[call("order_status", order_id="1")]),
                                   Say("Shipped.")]), observers=[Recorder(directory)],
                    run_ids=numbered_run_ids())
    assert sim.run(orders_agent(), "Where is 1?", deps=orders()).result.status == "finished"


def test_a_replay_gives_tools_that_take_a_context_the_deps_given(tmp_path: Path) -> None:
    record_orders_run(tmp_path)
    replay = Studio(tmp_path, orders_agent(), deps=orders()).replay("run1")
    summary = replay["summary"]
    assert isinstance(summary, dict) and summary["identical"] is True


def test_the_command_takes_the_deps_and_refuses_to_start_without_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    record_orders_run(tmp_path)
    agent = "tests.test_studio:orders_agent"
    # (a host it refuses too, checked after the deps: a studio that did start would serve
    # until interrupted)
    assert cli.main(["studio", str(tmp_path), "--agent", agent, "--host", "0.0.0.0",
                     "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pipeline studio: tool 'order_status' needs deps of type Orders")
    assert "--deps module:name" in err
    assert cli.main(["studio", str(tmp_path), "--agent", agent, "--deps", "nope:x",
                     "--port", "0"]) == 2
    assert "cannot load 'nope:x'" in capsys.readouterr().err


# --- the runs list: what each run did, filtered ------------------------------------------


@pytest.fixture
def many(tmp_path: Path) -> Iterator[tuple[StudioServer, dict[str, str]]]:
    names = record_runs(tmp_path)
    with StudioServer(Studio(tmp_path), port=0) as s:
        yield s, names


def test_the_list_shows_status_agent_thread_user_start_steps_cost_and_guards(
    many: tuple[StudioServer, dict[str, str]],
) -> None:
    s, names = many
    data = get_json(s, "/api/runs")
    rows = {r["name"]: r for r in data["items"]}
    support, tripped = rows[names["support"]], rows[names["tripped"]]
    assert (support["status"], support["agent"], support["thread_id"], support["user"]) == (
        "finished", "support", "t-1", "alice")
    # Two steps (the second asked again once), three model calls at 0.25 each.
    assert support["steps"] == 2 and isinstance(support["started_at"], float)
    assert support["cost"] == "0.75" and tripped["cost"] is None
    assert support["guards"] == ["no-short-answers", "redact-card"]
    assert (tripped["status"], tripped["guards"], tripped["user"]) == (
        "tripped", ["no-refund-all"], "bob")
    assert rows[names["suspended"]]["status"] == "suspended"
    assert data["facets"]["status"] == ["finished", "suspended", "tripped"]
    assert "no-refund-all" in data["facets"]["guard"]


@pytest.mark.parametrize(("query", "kinds"), [
    ("status=tripped", {"tripped"}),
    ("guard=redact-card", {"support"}),
    ("agent=agent", {"suspended", "resumed"}),
    ("thread=t-3", {"suspended", "resumed"}),
    ("user=bo", {"tripped"}),
    ("min_steps=2", {"support"}),
    ("min_cost=0.5", {"support"}),
    ("since=0&until=1", set()),
    ("status=finished&user=carol", {"resumed"}),
])
def test_each_column_filters_the_list(
    many: tuple[StudioServer, dict[str, str]], query: str, kinds: set[str],
) -> None:
    s, names = many
    data = get_json(s, f"/api/runs?{query}")
    assert {r["name"] for r in data["items"]} == {names[k] for k in kinds}
    assert data["total"] == len(kinds)


def test_a_filter_that_does_not_read_is_a_bad_request(
    many: tuple[StudioServer, dict[str, str]],
) -> None:
    s, _ = many
    status, _, body = get(s, "/api/runs?min_cost=lots")
    assert status == 400 and b"min_cost" in body


def test_a_resumed_run_links_to_its_first_part_and_back(
    many: tuple[StudioServer, dict[str, str]],
) -> None:
    s, names = many
    rows = {r["name"]: r for r in get_json(s, "/api/runs")["items"]}
    assert rows[names["resumed"]]["resumed_from"] == names["suspended"]
    resumed = get_json(s, f"/api/runs/{names['resumed']}")
    assert resumed["resumed_from"] == names["suspended"]
    [decision] = resumed["summary"]["decisions"]
    assert (decision["decision"], decision["tool"], decision["by"]) == (
        "approve", "refund", "carol")
    first = get_json(s, f"/api/runs/{names['suspended']}")
    assert first["resumed_from"] is None and first["continued_in"] == [names["resumed"]]


def test_the_run_view_names_what_changed_the_run_and_folds_what_passed(
    many: tuple[StudioServer, dict[str, str]],
) -> None:
    s, names = many
    run = get_json(s, f"/api/runs/{names['support']}?limit=500")
    why = {(h["why"], h["title"].split(":")[0]) for h in run["summary"]["highlights"]}
    assert ("retry", "no-short-answers.process_output_step") in why
    assert ("effect", "redact-card.process_output_stream") in why
    rows = run["page"]["items"]
    for r in rows:
        continued = r["kind"] == "effect" and r.get("effect") == "Continue"
        assert r.get("fold", False) == (continued or r["kind"] == "clock"), r
        assert ("highlight" in r) == any(h["n"] == r["n"] for h in run["summary"]["highlights"])
    tripped = get_json(s, f"/api/runs/{names['tripped']}")
    assert {h["why"] for h in tripped["summary"]["highlights"]} == {"tripwire", "tripped"}
    waiting = get_json(s, f"/api/runs/{names['suspended']}")
    assert {h["why"] for h in waiting["summary"]["highlights"]} == {"approval", "suspended"}


# --- the playground -----------------------------------------------------------------------


@pytest.fixture
def play(tmp_path: Path) -> Iterator[StudioServer]:
    from examples.asgi_stream import demo_agent, demo_model

    studio = Studio(tmp_path, demo_agent())
    studio.playground = Playground(demo_agent(), model=demo_model(), directory=tmp_path)
    studio.approvals = studio.playground.approvals.store
    with StudioServer(studio, port=0) as s:
        yield s


def post(s: StudioServer, path: str, body: object, **headers: str
         ) -> tuple[int, list[dict[str, Any]], bytes]:
    host, port = s.httpd.server_address[:2]
    conn = http.client.HTTPConnection(str(host), int(port), timeout=30)
    try:
        sent = {"Content-Type": "application/json", **{
            k.replace("_", "-"): v for k, v in headers.items()}}
        conn.request("POST", path, body=json.dumps(body).encode(), headers=sent)
        r = conn.getresponse()
        raw = r.read()
    finally:
        conn.close()
    parts = [json.loads(f[6:]) for f in raw.decode().split("\n\n")
             if f.startswith("data: {")]
    return r.status, parts, raw


def test_the_playground_streams_a_chat_with_each_processors_effect(play: StudioServer) -> None:
    status, parts, raw = post(play, "/api/play", {"chat": "c1", "prompt": "hello there"})
    assert status == 200 and raw.endswith(b"data: [DONE]\n\n")
    text = "".join(p["delta"] for p in parts if p["type"] == "text-delta")
    assert text == "hello there (echo)"
    [run] = [p for p in parts if p["type"] == "data-run"]
    assert run["data"]["status"] == "finished"
    # The run was recorded: it is in the list, as the studio's user's.
    listed = get_json(play, "/api/runs")["items"]
    assert [(r["name"], r["user"], r["thread_id"]) for r in listed] == [
        (run["data"]["journal"], "studio", "c1")]


def test_the_playground_asks_for_an_approval_and_goes_on_with_the_decision(
    play: StudioServer,
) -> None:
    from examples.asgi_stream import refunds

    _, parts, _ = post(play, "/api/play", {"chat": "c2", "prompt": "refund 180 on order Q9"})
    effects = [p["data"] for p in parts if p["type"] == "data-effect"]
    assert {"processor": "tool:refund", "hook": "needs_approval",
            "effect": "AskApproval", "detail": ""} in effects
    [ask] = [p for p in parts if p["type"] == "tool-approval-request"]
    assert ("Q9", 180) not in refunds
    answer = {"chat": "c2", "decisions": [{"id": ask["approvalId"], "approved": True}]}
    status, rest, _ = post(play, "/api/play/decide", answer)
    assert status == 200
    assert [p["output"] for p in rest if p["type"] == "tool-output-available"] == [
        "refunded 180 on Q9"]
    assert ("Q9", 180) in refunds
    assert post(play, "/api/play/decide", answer)[0] == 409  # decided already
    unknown = {"chat": "c9", "decisions": [{"id": "x", "approved": True}]}
    assert post(play, "/api/play/decide", unknown)[0] == 404
    audit = get_json(play, "/api/approvals")
    assert audit["kept"] is True
    assert [(r["thread_id"], r["tool_name"], r["outcome"], r["decided_by"])
            for r in audit["items"]] == [("c2", "refund", "waiting", ""),
                                          ("c2", "refund", "approved", "studio")]


def test_the_approvals_page_says_when_there_is_no_store(studio: StudioServer) -> None:
    assert get_json(studio, "/api/approvals") == {
        "kept": False, "offset": 0, "limit": 200, "total": 0, "items": []}


def test_a_denied_call_is_not_run(play: StudioServer) -> None:
    from examples.asgi_stream import refunds

    _, parts, _ = post(play, "/api/play", {"chat": "c3", "prompt": "refund 190 on order Z1"})
    [ask] = [p for p in parts if p["type"] == "tool-approval-request"]
    _, rest, _ = post(play, "/api/play/decide", {"chat": "c3", "decisions": [
        {"id": ask["approvalId"], "approved": False, "reason": "too much"}]})
    assert [p["type"] for p in rest if p["type"].startswith("tool-")] == [
        "tool-approval-response", "tool-output-denied"]
    assert ("Z1", 190) not in refunds


@pytest.mark.parametrize(("headers", "status"), [
    ({"Content_Type": "text/plain"}, 415),
    ({"Sec_Fetch_Site": "cross-site"}, 403),
    ({"Origin": "http://evil.example"}, 403),
])
def test_the_playground_refuses_requests_from_another_site(
    play: StudioServer, headers: dict[str, str], status: int,
) -> None:
    from examples.asgi_stream import refunds

    before = len(refunds)
    got, parts, _ = post(play, "/api/play", {"chat": "c4", "prompt": "refund 150 on order X"},
                         **headers)
    assert got == status and parts == [] and len(refunds) == before


def test_a_bad_playground_request_is_refused_before_anything_runs(play: StudioServer) -> None:
    assert post(play, "/api/play", {"chat": "c", "prompt": ""})[0] == 422
    assert post(play, "/api/play", {"chat": "c"})[0] == 422
    assert post(play, "/api/play", {"chat": "c", "prompt": "x", "extra": 1})[0] == 422
    assert get_json(play, "/api/runs")["items"] == []


def test_without_an_agent_the_studio_stays_read_only(studio: StudioServer) -> None:
    assert post(studio, "/api/play", {"chat": "c", "prompt": "hi"})[0] == 405


def test_the_command_takes_a_playground_model_only_with_an_agent(
    journals: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    model = "examples.asgi_stream:demo_model"
    assert cli.main(["studio", str(journals), "--model", model, "--port", "0"]) == 2
    assert "give the agent too (--agent)" in capsys.readouterr().err
    agent = "examples.asgi_stream:demo_agent"
    not_a_model = "examples.asgi_stream:demo_agent"
    assert cli.main(["studio", str(journals), "--agent", agent, "--model", not_a_model,
                     "--port", "0"]) == 2
    assert "not a model" in capsys.readouterr().err
