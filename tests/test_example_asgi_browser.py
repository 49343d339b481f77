"""The approval page of examples/asgi_stream.py in a real browser: headless Chromium
(tests/browser.py) on the demo app served by uvicorn on 127.0.0.1, a person asking for a
refund above the bound and clicking Approve, Deny or Edit; and a page reloaded while its
answer streams, on a resumable app, picking the run's stream up again.

What the page shows of a waiting call is checked against what the run's suspension lists
(server side); what ran is checked on the demo's refund tool."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import httpx
import msgspec
import pytest

from examples.asgi_stream import ASGIApp, Message, Receive, Scope, Send, demo_app, refunds
from pipeline.values.result import RunResult
from tests.asgi_server import Runs, serve, serve_held_demo
from tests.browser import WAIT, chromium, serve_page, wait_for

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

pytestmark = pytest.mark.slow


class Page:
    """The page in the browser, and the runs the server ended (its `on_result`)."""

    def __init__(self, driver: WebDriver, url: str, runs: Runs) -> None:
        self.driver, self.url, self.runs = driver, url, runs

    def ask(self, prompt: str) -> None:
        """Ask `prompt` in a new chat (the page keeps its chat across reloads)."""
        from selenium.webdriver.common.by import By

        self.driver.get(self.url)
        self.driver.execute_script("sessionStorage.clear()")
        self.driver.get(self.url)
        box = self.driver.find_element(By.ID, "prompt")
        box.clear()
        box.send_keys(prompt)
        self.driver.find_element(By.CSS_SELECTOR, "#ask button").click()

    def texts(self, css: str) -> list[str]:
        from selenium.webdriver.common.by import By

        return [e.text for e in self.driver.find_elements(By.CSS_SELECTOR, css)]

    def click(self, css: str) -> None:
        from selenium.webdriver.common.by import By

        self.driver.find_element(By.CSS_SELECTOR, css).click()

    def until(self, what: str, test: Callable[[], bool]) -> None:
        from selenium.webdriver.support.ui import WebDriverWait

        WebDriverWait(self.driver, WAIT).until(lambda _: test(), message=f"waiting for {what}")

    def ended(self, runs: int) -> RunResult:
        """The last run the server ended, once `runs` have."""
        return self.runs.ended(runs)[-1]

    def shows_the_suspension(self, ran: int) -> None:
        """The page shows each call the last run waits for, and nothing else: its tool
        and its arguments (the approver sees what they decide on), with the buttons."""
        from selenium.webdriver.common.by import By

        wait_for(self.driver, ".tool .decide .approve")
        suspended = self.ended(ran)
        assert suspended.status == "suspended" and suspended.suspension is not None
        shown = [
            (b.get_attribute("data-call"), b.find_element(By.CSS_SELECTOR, ".tool-name").text,
             json.loads(b.find_element(By.CSS_SELECTOR, ".tool-args").text))
            for b in self.driver.find_elements(By.CSS_SELECTOR, ".tool")
        ]
        listed = [(p.tool_call_id, p.tool_name, dict(p.args))
                  for p in suspended.suspension.pending]
        assert shown == listed
        assert self.texts(".tool .decide button") == ["Approve", "Deny", "Edit"]


@pytest.fixture(scope="module")
def page() -> Iterator[Page]:
    runs = Runs()
    with serve(demo_app(on_result=runs)) as url, chromium("the approval page") as driver:
        yield Page(driver, url, runs)


def test_approving_in_the_browser_runs_the_tool_once_and_shows_the_answer(page: Page) -> None:
    ran = len(page.runs.results)
    page.ask("refund 250 on order BA1")
    page.shows_the_suspension(ran + 1)
    assert ("BA1", 250) not in refunds  # nothing ran while it waits

    page.click(".tool .approve")
    page.until("the answer", lambda: "Done." in page.texts(".msg.assistant"))
    assert page.texts(".msg.output") == ['→ "refunded 250 on BA1"']
    assert page.texts(".msg.decision") == ["approved"]
    assert not page.texts(".tool .decide button")
    assert page.ended(ran + 2).status == "finished"
    assert refunds.count(("BA1", 250)) == 1


def test_denying_in_the_browser_shows_the_denial_and_runs_nothing(page: Page) -> None:
    ran = len(page.runs.results)
    page.ask("refund 900 on order BD2")
    page.shows_the_suspension(ran + 1)

    page.click(".tool .deny")
    page.until("the answer", lambda: any(
        t.startswith("Not refunded:") for t in page.texts(".msg.assistant")))
    assert page.texts(".msg.denied") == ["→ denied"]
    assert page.texts(".msg.decision") == ["denied"]
    assert not page.texts(".msg.output")
    assert page.ended(ran + 2).status == "finished"
    assert not [r for r in refunds if r[0] == "BD2"]


def test_editing_in_the_browser_runs_the_edited_call_once(page: Page) -> None:
    from selenium.webdriver.common.by import By

    ran = len(page.runs.results)
    page.ask("refund 400 on order BE3")
    page.shows_the_suspension(ran + 1)

    page.click(".tool .edit")
    args = page.driver.find_element(By.CSS_SELECTOR, ".edit-args")
    args.clear()
    args.send_keys('{"order": "BE3", "amount": "lots"}')  # not the tool's schema
    page.click(".run-edited")
    page.until("the refusal", lambda: any(t.startswith("422") for t in page.texts(".msg.error")))
    assert page.texts(".run-edited") == ["Run with these arguments"]  # it still waits
    assert not [r for r in refunds if r[0] == "BE3"]

    args.clear()
    args.send_keys('{"order": "BE3", "amount": 40}')
    page.click(".run-edited")
    page.until("the answer", lambda: "Done." in page.texts(".msg.assistant"))
    assert page.texts(".msg.output") == ['→ "refunded 40 on BE3"']
    assert page.texts(".msg.decision") == ['edited: {"order":"BE3","amount":40}']
    assert page.ended(ran + 2).status == "finished"
    assert [r for r in refunds if r[0] == "BE3"] == [("BE3", 40)]


def test_a_reload_mid_stream_resumes_the_run_on_the_page() -> None:
    words = " ".join(f"w{i}" for i in range(8))
    with serve_held_demo(free=3) as demo, chromium("the approval page") as driver:
        page = Page(driver, demo.url, demo.runs)
        page.ask(words)
        page.until("the first words", lambda: any(
            t.startswith("w0 w1") for t in page.texts(".msg.assistant")))
        driver.refresh()  # the page's request goes; the run, held, goes on
        assert demo.left.wait(WAIT), "the server did not see the page go"
        page.until("the stream again", lambda: any(
            t.startswith("w0 w1") for t in page.texts(".msg.assistant")))
        demo.hold.release()
        echo = "".join(f"w{i} " for i in range(8)) + "(echo)"
        page.until("the whole answer, once", lambda: page.texts(".msg.assistant") == [echo])
        [result] = demo.runs.ended(1)
        assert result.status == "finished" and result.text == echo


class Answered:
    """The statuses an app answered its `POST`s with, as (path, status)."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, int]] = []
        self._new = threading.Semaphore(0)

    def around(self, app: ASGIApp) -> ASGIApp:
        async def recorded(scope: Scope, receive: Receive, send: Send) -> None:
            async def send_(message: Message) -> None:
                if message["type"] == "http.response.start" and scope.get("method") == "POST":
                    status = message["status"]
                    assert isinstance(status, int)
                    self.posts.append((str(scope.get("path")), status))
                    self._new.release()
                await send(message)
            await app(scope, receive, send_)
        return recorded

    def next(self) -> tuple[str, int]:
        assert self._new.acquire(timeout=WAIT), "no POST reached the app"
        return self.posts[-1]


def test_a_page_of_another_site_cannot_approve_a_waiting_refund() -> None:
    """A page on another site (evil.test, resolved to loopback) posts the answer `useChat`
    would send, as a "simple" request (`text/plain`, no CORS preflight): refused; the run
    still waits, and the chat's own answer approves it."""
    answered = Answered()
    with serve(answered.around(demo_app())) as url, httpx.Client(
            base_url=url, timeout=WAIT) as client:
        text = "refund 700 on order CS1"
        user = {"id": "chat-cs", "messages": [
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}]}
        frames = client.post("/api/chat", json=user).text.split("\n\n")
        [request] = [p for f in frames if f.startswith("data: {")
                     for p in [json.loads(f[6:])] if p["type"] == "tool-approval-request"]
        assert answered.next() == ("/api/chat", 200)
        answer = {**user, "messages": [*user["messages"], {
            "id": "a1", "role": "assistant", "parts": [{
                "type": "tool-refund", "toolCallId": request["toolCallId"],
                "state": "approval-responded", "input": {},
                "approval": {"id": request["approvalId"], "approved": True}}]}]}
        attack = (
            "<!doctype html><script>"
            f"fetch({json.dumps(url + '/api/chat')}, {{method: 'POST', mode: 'no-cors', "
            f"body: {json.dumps(json.dumps(answer))}}});"
            "</script>"
        )
        with serve_page(attack) as port, chromium(
                "a cross-site request", resolve={"evil.test": "127.0.0.1"}) as driver:
            driver.get(f"http://evil.test:{port}/")
            path, status = answered.next()
        assert (path, status) == ("/api/chat", 403)
        assert ("CS1", 700) not in refunds
        ok = client.post("/api/chat", content=msgspec.json.encode(answer),
                         headers={"content-type": "application/json"})
        assert ok.status_code == 200 and '"output":"refunded 700 on CS1"' in ok.text
        assert refunds.count(("CS1", 700)) == 1
