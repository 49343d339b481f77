"""Fault matrix, secrets: a key the server echoes back in any error field (message,
type, code, request id, body; raw or JSON-escaped, with `"` and `\\` in the key) never
reaches the caller: not in `str` or `repr` of the error, `result.error`, its body, the
encoded result, nor the logs. A base URL with credentials is refused without echoing
them."""

from __future__ import annotations

import json
import logging

import msgspec
import pytest

from interpreters.providers import (
    Endpoint,
    Limits,
    ProviderConfigError,
    Resolver,
    resolve_async_provider,
    resolve_provider,
)
from interpreters.providers.provider import ProviderError
from interpreters.providers.secret import Secret
from tests.faults.harness import JSON, Ran, both, expect
from tests.providers.server import ReplayServer, Reply

pytestmark = pytest.mark.anyio

KEYS = {
    "plain": "sk-echo-0123456789abcdefghij",
    "quote": 'sk-q"uo"te-0123456789abc',
    "backslash": "sk-back\\slash\\0123456789",
    "slash-and-html": "sk-a/b<c>&d-0123456789",
}


def forms(key: str) -> set[str]:
    """The key as it may appear in any text we hand out."""
    escaped = json.dumps(key)[1:-1]
    return {key, escaped, json.dumps(escaped)[1:-1], escaped.replace("/", "\\/"),
            repr(key)[1:-1]}


def assert_clean(ran: Ran, key: str, log: str) -> None:
    err = ran.result.error
    texts = {
        "str": str(err), "repr": repr(err), "result": repr(ran.result),
        "encoded": msgspec.json.encode(ran.result).decode(),
        "body": ran.api_error.body or "", "log": log,
    }
    for where, text in texts.items():
        for form in forms(key):
            assert form not in text, (where, form)
            assert form[:12] not in text, (where, "a piece of the key")


def echoing_error(key: str, status: int = 401) -> Reply:
    body = json.dumps({
        "error": {"message": f"Incorrect API key provided: {key}. Check it.",
                  "type": f"invalid_key:{key}", "code": key, "param": key},
        "request_id": key, "echo": {"nested": json.dumps({"key": key})},
    }).encode()
    return Reply(status, (*JSON, ("x-request-id", key)), body)


@pytest.mark.parametrize("name", list(KEYS))
async def test_a_key_echoed_in_every_error_field_is_scrubbed(
    server: ReplayServer, anyio_backend: str, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    key = KEYS[name]
    # INFO: httpx's request line (where URL credentials would show). At DEBUG, httpcore
    # traces response headers as received, a header echoing the key included: not ours.
    caplog.set_level(logging.INFO)
    runs = await both(server, echoing_error(key), key=key)
    expect(runs, None)
    for ran in runs:
        err = ran.api_error
        assert err.status == 401 and "[redacted]" in err.message
        assert_clean(ran, key, caplog.text)


async def test_a_key_echoed_in_a_plain_text_body_cut_at_any_length(
    server: ReplayServer, anyio_backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The message keeps the first 300 characters of a non-JSON body and the body the
    # first 8 KiB; the read stops at the error-body cap: wherever a cut falls inside the
    # key, no piece of it is handed out.
    key = KEYS["plain"]
    for pad in (290, 8180, 4090):
        body = b"x" * pad + key.encode() + b" trailing"
        runs = await both(server, Reply(400, (("content-type", "text/plain"),), body),
                          key=key, limits=Limits(max_error_body=4100))
        for ran in runs:
            assert_clean(ran, key, caplog.text)


def test_a_base_url_with_credentials_is_refused_without_echoing_them() -> None:
    url = "https://alice:hunter2-pass@api.example.com/v1"
    with pytest.raises(ProviderConfigError) as info:
        resolve_provider("openai/m", base_url=url, api_key="sk-x0123456789")
    assert "hunter2" not in str(info.value) and "hunter2" not in repr(info.value)
    assert "api.example.com" in str(info.value) and "credentials" in str(info.value)
    assert info.value.error.error_type == "configuration"
    with pytest.raises(ProviderConfigError) as info:
        resolve_async_provider("openai/m", base_url=url, api_key="sk-x0123456789")
    assert "hunter2" not in str(info.value)
    with pytest.raises(ProviderConfigError) as info:
        Resolver(base_urls={"openai": url})  # refused when configured, before any call
    assert "hunter2" not in str(info.value)
    with pytest.raises(ProviderConfigError) as info:
        resolve_provider("openai/m", env={"OPENAI_BASE_URL": url, "OPENAI_API_KEY": "sk-k0123"})
    assert "hunter2" not in str(info.value)
    with pytest.raises(ValueError) as err:
        Endpoint("openai", "http://token@127.0.0.1:1/v1", Secret("sk-x0123456789"))
    assert "token" not in str(err.value).replace("127.0.0.1", "")
    assert isinstance(info.value, ProviderError)


@pytest.mark.parametrize("name", list(KEYS))
def test_a_key_in_the_environment_is_stored_in_no_journal(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Streamed by the model in two deltas, JSON-escaped in a tool result, in the input:
    # no form of it in the journal's bytes, and no stream's deltas joined hold it.
    from interpreters.record.journal import ModelReplied, Recorder
    from interpreters.testing import Say, ScriptedModel, Simulator, call
    from pipeline import Agent, TextDelta

    key = KEYS[name]
    monkeypatch.setenv("ACME_API_KEY", key)

    def config(section: str) -> str:
        """A careless tool that returns its configuration."""
        return json.dumps({"section": section, "api_key": key})

    half = len(key) // 2
    rec = Recorder()
    Simulator(ScriptedModel([Say(calls=[call("config", section="x")]),
                             Say(["the key is ", key[:half], key[half:], "."])]),
              observers=[rec]).run(Agent.create("m", tools=[config]), f"use {key}")
    data = rec.last().to_ndjson().decode()
    for form in forms(key):
        assert form not in data, form
    text = "".join(e.event.text for e in rec.last().entries
                   if isinstance(e, ModelReplied) and isinstance(e.event, TextDelta))
    assert text == "the key is [redacted]."
