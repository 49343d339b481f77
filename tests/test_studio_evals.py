"""The studio's eval pages, as JSON: the reports an experiment wrote beside the journals,
one report's scorers and cases (each linked to the journal of its run), what changed
between two reports, a comparison's two sides; bounded, and refusing what is no report."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from effects import Continue
from interpreters import Recorder
from interpreters.cli.studio import Studio, StudioError, StudioServer
from interpreters.evals import (
    Case,
    Dataset,
    OnlineScorer,
    Report,
    SimulatorTarget,
    Suite,
    compare_agents,
    contains,
    no_guard_tripped,
    status_is,
)
from interpreters.testing import Say, ScriptedModel, Simulator, call
from pipeline import Agent, ModelRequest, OutputStepArgs, OutputStepResult, abort, processor


def order_status(order_id: str) -> str:
    """The status of an order."""
    return {"1042": "shipped on Monday"}.get(order_id, "no such order")


def shop_model(request: ModelRequest) -> Say:
    last = request.messages[-1]
    if last.tool_results():
        return Say(f"Order: {last.tool_results()[0].result}.")
    for order in ("1042", "9999"):
        if order in last.text:
            return Say("Let me look.", calls=[call("order_status", order_id=order)])
    return Say("Hello! How can I help with your order?")


def no_unknown_orders(args: OutputStepArgs[None]) -> OutputStepResult[None]:
    if "no such order" in args.text:
        abort("Ask for the order number instead.")
    return Continue()


shop = Agent.create("sim/support", name="shop", tools=[order_status])
stricter = Agent.create("sim/support", name="shop-strict", tools=[order_status],
                        output_processors=[processor("orders",
                                                     process_output_step=no_unknown_orders)])
dataset = Dataset("shop", (
    Case(name="status", input="Where is order 1042?", expected="shipped on Monday",
         tags=("status",)),
    Case(name="unknown", input="Where is order 9999?", expected="no such order",
         tags=("status",)),
    Case(name="hello", input="Hello!"),
))


def suite(journals: Path) -> Suite:
    return Suite(dataset, [status_is(), contains().only("status")],
                 target=SimulatorTarget(lambda case: shop_model,
                                        observers=[Recorder(journals)]),
                 thresholds={"contains": 0.5})


def test_an_experiment_on_the_simulator_names_each_cases_run(tmp_path: Path) -> None:
    report = suite(tmp_path).run(shop)
    ids = [c.outcome.run_id if c.outcome is not None else "" for c in report.cases]
    assert all(ids) and len(set(ids)) == 3
    assert sorted(p.stem for p in tmp_path.glob("*.ndjson")) == sorted(ids)


@pytest.fixture
def written(tmp_path: Path) -> tuple[Path, Report, Report]:
    """Two experiments on the same cases (the agent as it is and a stricter one) and a
    comparison, written beside the journals of their runs; a stray JSON file too."""
    before = suite(tmp_path).run(shop)
    after = suite(tmp_path).run(stricter)
    before.write(tmp_path, name="before")
    after.write(tmp_path, name="after")
    (tmp_path / "compared.json").write_bytes(
        compare_agents(dataset, shop, stricter, [status_is()],
                       target=SimulatorTarget(lambda case: shop_model)).to_json())
    (tmp_path / "settings.json").write_text('{"not": "a report"}')
    return tmp_path, before, after


@pytest.fixture
def client(written: tuple[Path, Report, Report]) -> Iterator[httpx.Client]:
    with StudioServer(Studio(written[0]), port=0) as server, \
            httpx.Client(base_url=server.url, timeout=30) as http:
        yield http


def test_the_reports_beside_the_journals_are_listed_and_other_json_is_not(
    client: httpx.Client,
) -> None:
    listed = client.get("/api/evals").json()
    by_name = {r["name"]: r for r in listed["items"]}
    assert set(by_name) == {"before", "after", "compared"}
    assert by_name["before"]["kind"] == "report" and by_name["compared"]["kind"] == "comparison"
    assert (by_name["before"]["ok"], by_name["before"]["passed"]) == (True, 3)
    assert by_name["after"]["ok"] is False  # the unknown order now trips
    assert client.get("/api/evals?limit=1").json()["items"][0]["name"] in by_name


def test_a_report_shows_its_scorers_and_cases_each_linked_to_its_run(
    client: httpx.Client, written: tuple[Path, Report, Report],
) -> None:
    shown = client.get("/api/evals/after").json()
    assert shown["kind"] == "report" and shown["scorers"] == ["status", "contains"]
    assert [s["ok"] for s in shown["summaries"]] == [False, True]
    assert any("status" in f for f in shown["failures"])
    cases = {c["case"]: c for c in shown["cases"]}
    assert cases["unknown"]["status"] == "tripped" and not cases["unknown"]["passed"]
    assert [s["verdict"] for s in cases["unknown"]["scores"]] == ["fail", "fail"]
    journals = {p.stem for p in written[0].glob("*.ndjson")}
    assert all(c["journal"] in journals for c in shown["cases"])
    run = client.get(f"/api/runs/{cases['status']['journal']}").json()
    assert run["summary"]["agent"] == "shop-strict"
    page = client.get("/api/evals/after?offset=1&limit=1").json()
    assert [c["case"] for c in page["cases"]] == ["unknown"]
    assert page["page"] == {"offset": 1, "limit": 1, "total": 3}


def test_two_reports_compared_case_by_case(client: httpx.Client) -> None:
    diff = client.get("/api/evals/before/diff/after").json()
    assert (diff["before"]["agent"], diff["after"]["agent"]) == ("shop", "shop-strict")
    rows = {r["case"]: r for r in diff["cases"]}
    assert rows["unknown"]["regressed"] and rows["unknown"]["changed"]
    assert rows["unknown"]["scores"][0] == {"scorer": "status", "before": "pass",
                                            "after": "fail"}
    assert not rows["hello"]["changed"] and not rows["status"]["changed"]
    assert (diff["changed"], diff["regressed"]) == (1, 1)
    assert rows["unknown"]["before"]["journal"] != rows["unknown"]["after"]["journal"]


def test_a_comparison_opens_as_what_changed(client: httpx.Client) -> None:
    shown = client.get("/api/evals/compared").json()
    assert shown["kind"] == "comparison" and shown["regressed"] == 1
    assert [r["case"] for r in shown["cases"] if r["regressed"]] == ["unknown"]


def test_what_is_no_report_is_refused_by_name(client: httpx.Client) -> None:
    assert client.get("/api/evals/missing").status_code == 404
    assert client.get("/api/evals/..%2Fescape").status_code == 404
    assert client.get("/api/evals/settings").status_code == 400
    refused = client.get("/api/evals/compared/diff/after")
    assert refused.status_code == 400 and "comparison" in refused.json()["error"]


def test_reports_in_a_folder_of_their_own(tmp_path: Path,
                                          written: tuple[Path, Report, Report]) -> None:
    reports = tmp_path / "reports"
    written[1].write(reports, name="only")
    studio = Studio(written[0], evals=reports)
    listed = studio.evals.listing(0, 10)["items"]
    assert isinstance(listed, list) and [r["name"] for r in listed] == ["only"]
    with pytest.raises(StudioError, match="not a directory"):
        Studio(written[0], evals=tmp_path / "nowhere")


def test_a_run_scored_online_shows_its_scores_in_the_studio(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path)
    online = OnlineScorer([no_guard_tripped(), contains("order")], rate=1.0,
                          recorder=recorder)
    sim = Simulator(ScriptedModel(shop_model), observers=[recorder, online])
    sim.run(shop, "Where is order 1042?")
    assert online.flush(10)
    online.close()
    (journal,) = tmp_path.glob("*.ndjson")
    summary = Studio(tmp_path).run(journal.stem)["summary"]
    assert isinstance(summary, dict)
    assert [(s["scorer"], s["verdict"]) for s in summary["scores"]] == [
        ("no-guard-tripped", "pass"), ("contains", "pass")]
