"""`pipeline run` against a local OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import io
import json

import pytest

from interpreters.cli.commands import main, run_model
from tests.providers.helpers import oa_text_stream
from tests.providers.server import ReplayServer, Reply

SSE = (("content-type", "text/event-stream"),)


def test_run_streams_the_answer_from_a_local_server(server: ReplayServer) -> None:
    server.queue(Reply(200, SSE, oa_text_stream("Hello", ", ", "world"), chunks=9))
    out, err = io.StringIO(), io.StringIO()
    code = run_model("ollama/qwen3", "say hi", base_url=f"{server.url}/v1",
                     system="be brief", out=out, err=err)
    assert code == 0, err.getvalue()
    assert out.getvalue() == "Hello, world\n"
    assert "[finished, stop, 3 in / 3 out tokens]" in err.getvalue()
    sent = json.loads(server.seen[0].body)
    assert sent["model"] == "qwen3"
    assert sent["stream"] is True
    assert sent["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "say hi"},
    ]


def test_run_reports_a_rejection_and_exits_nonzero(server: ReplayServer) -> None:
    body = json.dumps({"error": {"message": "model not found", "type": "invalid_request_error",
                                 "code": "model_not_found"}}).encode()
    server.queue(Reply(404, (("content-type", "application/json"),), body))
    out, err = io.StringIO(), io.StringIO()
    code = run_model("vllm/nope", "hi", base_url=f"{server.url}/v1", out=out, err=err)
    assert code == 1
    assert "HTTP 404" in err.getvalue()
    assert "model not found" in err.getvalue()
    assert "[failed, error" in err.getvalue()


def test_missing_key_fails_before_any_request_naming_the_variable(
    server: ReplayServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    code = main(["run", "--model", "anthropic/claude-sonnet-4-5", "hi"])
    assert code == 2
    assert "ANTHROPIC_API_KEY" in capsys.readouterr().err
    assert server.seen == []


def test_base_url_serves_a_bare_model_id(server: ReplayServer) -> None:
    server.queue(Reply(200, SSE, oa_text_stream("ok")))
    out, err = io.StringIO(), io.StringIO()
    code = run_model("llama-3.2-3b", "hi", base_url=f"{server.url}/v1", out=out, err=err)
    assert code == 0, err.getvalue()
    assert out.getvalue() == "ok\n"
    assert json.loads(server.seen[0].body)["model"] == "llama-3.2-3b"


def test_base_url_goes_with_the_models_own_key(
    server: ReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # --base-url for an openai/ model (a proxy): that route's key goes there, no other.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-cli")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-cli")
    server.queue(Reply(200, SSE, oa_text_stream("ok")))
    code = run_model("openai/gpt-4o-mini", "hi", base_url=f"{server.url}/v1",
                     out=io.StringIO(), err=io.StringIO())
    assert code == 0
    assert server.seen[0].headers["authorization"] == "Bearer sk-openai-cli"
    assert "sk-ant-cli" not in str(server.seen[0].headers)
