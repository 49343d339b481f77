"""`pipeline` CLI: --api-key, --version, errors as one readable line, and a 404 that
names the URL it called (a base URL without `/v1` is the usual cause)."""

from __future__ import annotations

import io
import json
import re
from importlib.metadata import version

import pytest

from interpreters.cli.commands import main, run_model
from tests.providers.helpers import oa_text_stream
from tests.providers.server import ReplayServer, Reply

SSE = (("content-type", "text/event-stream"),)
JSON = (("content-type", "application/json"),)


def _error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("pipeline run:")]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"pipeline {version('pipeline-agents')}"


def test_api_key_goes_to_the_models_route_only(
    server: ReplayServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.queue(Reply(200, SSE, oa_text_stream("ok")))
    code = main(["run", "--model", "openai/gpt-4o-mini", "--api-key", "sk-from-flag",
                 "--base-url", f"{server.url}/v1", "hi"])
    assert code == 0, capsys.readouterr().err
    assert server.seen[0].headers["authorization"] == "Bearer sk-from-flag"


def test_api_key_overrides_the_environment(
    server: ReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    server.queue(Reply(200, SSE, oa_text_stream("ok")))
    code = run_model("openai/gpt-4o-mini", "hi", base_url=f"{server.url}/v1",
                     api_key="sk-flag", out=io.StringIO(), err=io.StringIO())
    assert code == 0
    assert server.seen[0].headers["authorization"] == "Bearer sk-flag"


def test_without_a_key_the_route_needs_it_fails_naming_flag_and_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("GROQ_API_KEY", raising=False)
    assert main(["run", "--model", "groq/llama", "hi"]) == 2
    [line] = _error_lines(capsys.readouterr().err)
    assert "GROQ_API_KEY" in line and "--api-key" in line


def test_a_404_names_the_url_called_and_the_likely_cause(server: ReplayServer) -> None:
    server.queue(Reply(404, JSON, b'{"detail": "Not Found"}'))
    out, err = io.StringIO(), io.StringIO()
    code = run_model("vllm/m", "hi", base_url=server.url, out=out, err=err)  # no /v1
    assert code == 1
    [line] = _error_lines(err.getvalue())
    assert f"POST {server.url}/chat/completions" in line
    assert "/v1" in line  # the hint
    assert server.seen[0].path == "/chat/completions"


def test_a_404_with_v1_names_the_url_without_the_hint(server: ReplayServer) -> None:
    body = json.dumps({"error": {"message": "model not found"}}).encode()
    server.queue(Reply(404, JSON, body))
    err = io.StringIO()
    assert run_model("vllm/nope", "hi", base_url=f"{server.url}/v1", out=io.StringIO(),
                     err=err) == 1
    [line] = _error_lines(err.getvalue())
    assert f"POST {server.url}/v1/chat/completions" in line
    assert "model not found" in line
    assert "missing" not in line


def test_errors_are_one_readable_line_not_a_repr(server: ReplayServer) -> None:
    server.queue(Reply(400, JSON, b'{"error": {"message": "bad\\nrequest\\n  here"}}'))
    err = io.StringIO()
    assert run_model("vllm/m", "hi", base_url=f"{server.url}/v1", out=io.StringIO(),
                     err=err) == 1
    lines = _error_lines(err.getvalue())
    assert len(lines) == 1
    assert "bad request here" in lines[0]
    assert not re.search(r"[A-Z][a-zA-Z]+\(\w+=", err.getvalue())  # no Struct(field=...) repr


def test_an_unexpected_failure_is_one_line_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import interpreters.sync as sync

    def boom(*args: object, **kw: object) -> object:
        raise RuntimeError("something\nbroke")

    monkeypatch.setattr(sync.SyncInterpreter, "stream", boom)
    err = io.StringIO()
    code = run_model("ollama/qwen3", "hi", base_url="http://127.0.0.1:9/v1",
                     out=io.StringIO(), err=err)
    assert code == 1
    assert err.getvalue() == "pipeline run: RuntimeError: something broke\n"


def test_a_connection_failure_names_the_url() -> None:
    err = io.StringIO()
    # port 9 (discard) on loopback: nothing listens, the connection is refused at once
    code = run_model("ollama/qwen3", "hi", base_url="http://127.0.0.1:9/v1",
                     out=io.StringIO(), err=err)
    assert code == 1
    [line] = _error_lines(err.getvalue())
    assert "http://127.0.0.1:9/v1/chat/completions" in line


def test_a_stream_that_breaks_names_the_url(server: ReplayServer) -> None:
    body = oa_text_stream("Hello", " there", " friend")
    server.queue(Reply(200, SSE, body, cut_after=len(body) // 2))
    out, err = io.StringIO(), io.StringIO()
    assert run_model("vllm/m", "hi", base_url=f"{server.url}/v1", out=out, err=err) == 1
    [line] = _error_lines(err.getvalue())
    assert f"(POST {server.url}/v1/chat/completions)" in line
