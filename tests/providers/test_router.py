"""Router ids, base URLs and keys; keys never shown anywhere."""

from __future__ import annotations

import logging
import pickle
import traceback

import pytest

from interpreters.provider import ProviderError
from interpreters.providers import (
    AnthropicCodec,
    AsyncResolver,
    OpenAIChatCodec,
    ProviderConfigError,
    Resolver,
    Secret,
    provider_config,
    resolve_async_provider,
    resolve_provider,
)
from pipeline.sanitize import MISTRAL
from tests.providers.helpers import KEY, ask, oa_text_stream, run_sync
from tests.providers.server import ReplayServer, Reply

ALL_KEYS = {
    "OPENAI_API_KEY": "sk-openai",
    "ANTHROPIC_API_KEY": "sk-ant",
    "OPENROUTER_API_KEY": "sk-or",
    "GROQ_API_KEY": "gsk",
    "MISTRAL_API_KEY": "mis",
}


@pytest.mark.parametrize(
    ("model_id", "route", "wire_model", "base_url", "key"),
    [
        ("openai/gpt-4o-mini", "openai", "gpt-4o-mini", "https://api.openai.com/v1", "sk-openai"),
        ("anthropic/claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5",
         "https://api.anthropic.com/v1", "sk-ant"),
        ("openrouter/google/gemini-2.0-flash-exp:free", "openrouter",
         "google/gemini-2.0-flash-exp:free", "https://openrouter.ai/api/v1", "sk-or"),
        ("groq/openai/gpt-oss-120b", "groq", "openai/gpt-oss-120b",
         "https://api.groq.com/openai/v1", "gsk"),
        ("mistral/mistral-small", "mistral", "mistral-small", "https://api.mistral.ai/v1", "mis"),
        ("ollama/qwen3:0.6b", "ollama", "qwen3:0.6b", "http://localhost:11434/v1", None),
        ("vllm/meta-llama/Llama-3-8B", "vllm", "meta-llama/Llama-3-8B",
         "http://localhost:8000/v1", None),
    ],
)
def test_routes(model_id: str, route: str, wire_model: str, base_url: str, key: str | None) -> None:
    cfg = provider_config(model_id, env=ALL_KEYS)
    assert (cfg.route, cfg.model, cfg.endpoint.base_url) == (route, wire_model, base_url)
    assert cfg.endpoint.wire_model(model_id) == wire_model
    got = cfg.endpoint.api_key.reveal() if cfg.endpoint.api_key else None
    assert got == key
    codec = cfg.codec()
    assert isinstance(codec, AnthropicCodec if route == "anthropic" else OpenAIChatCodec)


def test_route_specific_codec_options() -> None:
    openai = provider_config("openai/o3", env=ALL_KEYS).codec()
    assert isinstance(openai, OpenAIChatCodec)
    assert openai.options.max_tokens_field == "max_completion_tokens"
    assert openai.options.option_sections == ("openai",)
    mistral = provider_config("mistral/m", env=ALL_KEYS).codec()
    assert isinstance(mistral, OpenAIChatCodec)
    assert not mistral.options.stream_usage and mistral.options.profile == MISTRAL
    groq = provider_config("groq/m", env=ALL_KEYS).codec()
    assert isinstance(groq, OpenAIChatCodec) and groq.options.option_sections == ("groq",)


@pytest.mark.parametrize(
    ("model_id", "var"),
    [("openai/gpt-4o", "OPENAI_API_KEY"), ("anthropic/claude", "ANTHROPIC_API_KEY"),
     ("openrouter/x/y", "OPENROUTER_API_KEY"), ("groq/llama", "GROQ_API_KEY")],
)
def test_missing_key_fails_before_any_request_naming_the_variable(
    model_id: str, var: str, server: ReplayServer
) -> None:
    with pytest.raises(ProviderConfigError, match=var):
        resolve_provider(model_id, base_url=server.url, env={})
    with pytest.raises(ProviderConfigError, match=var):
        resolve_async_provider(model_id, base_url=server.url, env={"OTHER": "x"})
    assert server.seen == []


def test_key_in_code_overrides_the_environment() -> None:
    cfg = provider_config("openai/m", api_key="sk-code", env={"OPENAI_API_KEY": "sk-env"})
    assert cfg.endpoint.api_key == Secret("sk-code")


def test_local_servers_need_no_key_but_take_one() -> None:
    assert provider_config("ollama/qwen3", env={}).endpoint.api_key is None
    cfg = provider_config("vllm/m", env={"VLLM_API_KEY": "token"})
    assert cfg.endpoint.api_key == Secret("token")


def test_base_url_from_argument_then_environment() -> None:
    env = {"OLLAMA_BASE_URL": "http://gpu-box:11434/v1"}
    assert provider_config("ollama/q", env=env).endpoint.base_url == "http://gpu-box:11434/v1"
    cfg = provider_config("ollama/q", base_url="http://127.0.0.1:9/v1", env=env)
    assert cfg.endpoint.base_url == "http://127.0.0.1:9/v1"


def test_any_openai_compatible_endpoint_by_base_url() -> None:
    cfg = provider_config("llama-3.2-3b", base_url="http://127.0.0.1:8080/v1", env={})
    assert (cfg.route, cfg.model, cfg.endpoint.api_key) == ("openai-compatible", "llama-3.2-3b",
                                                            None)
    cfg = provider_config("openai-compatible/phi", base_url="http://h/v1", env={})
    assert cfg.model == "phi"
    with pytest.raises(ProviderConfigError, match="base URL"):
        provider_config("openai-compatible/phi", env={})


def test_unknown_prefix_lists_the_known_ones() -> None:
    with pytest.raises(ProviderConfigError, match=r"anthropic/.*ollama/"):
        provider_config("nonsense/model", env={})


def test_malformed_key_is_rejected_without_echoing_it() -> None:
    with pytest.raises(ProviderConfigError) as info:
        provider_config("openai/m", api_key="sk-with\nnewline", env={})
    assert "newline" not in str(info.value)


def test_resolvers_reuse_one_provider_per_id(server: ReplayServer) -> None:
    r = Resolver(base_url=server.url + "/v1", api_key=KEY)
    assert r("openai/a") is r("openai/a")
    assert r("openai/a") is not r("openai/b")
    assert KEY not in repr(vars(r))
    r.close()
    a = AsyncResolver(base_url=server.url + "/v1", api_key=KEY)
    assert a("anthropic/x") is a("anthropic/x")


# --- secrets ---------------------------------------------------------------------------


def test_secret_never_shows_itself() -> None:
    s = Secret(KEY)
    assert KEY not in repr(s) and KEY not in str(s) and KEY not in f"{s}" and KEY not in f"{s!r}"
    assert s.reveal() == KEY
    with pytest.raises(TypeError):
        pickle.dumps(s)


def _all_text(err: BaseException) -> str:
    """Everything a trace could show of an exception: message, repr, chain, traceback."""
    parts = ["".join(traceback.format_exception(err)), repr(err)]
    e: BaseException | None = err
    while e is not None:
        parts += [str(e), repr(e), repr(vars(e))]
        e = e.__cause__ or e.__context__
    return "\n".join(parts)


@pytest.mark.parametrize("route", ["openai", "anthropic"])
def test_key_absent_from_errors_reprs_and_logs(
    route: str, server: ReplayServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # httpx and httpcore log requests at DEBUG/INFO
    # A server that echoes the key back, in the body and in its message.
    echo = ('{"error":{"message":"Incorrect API key provided: ' + KEY + '","type":"auth"}}')
    server.queue(
        Reply(401, (("content-type", "application/json"),), echo.encode()),
        Reply(200, (("content-type", "text/event-stream"),), oa_text_stream("hi"),
              cut_after=30),
    )
    p = resolve_provider(f"{route}/m", base_url=server.url + "/v1", api_key=KEY)
    assert KEY not in repr(p) and KEY not in repr(vars(p))
    with pytest.raises(ProviderError) as auth:
        list(p.stream(ask(route)))
    assert auth.value.error.status == 401
    assert "[redacted]" in auth.value.error.message
    with pytest.raises(ProviderError) as dropped:
        list(p.stream(ask(route)))
    # The key did go out, in the header this provider uses ...
    sent = server.seen[0].headers
    assert KEY in (sent.get("authorization", "") + sent.get("x-api-key", ""))
    # ... and nowhere else.
    for err in (auth.value, dropped.value):
        assert KEY not in _all_text(err)
        assert err.__context__ is None, "the httpx error (which holds the request) is dropped"
    assert KEY not in caplog.text
    assert any("HTTP Request" in r.getMessage() for r in caplog.records), "logging was on"
    p.close()


def test_key_absent_from_connection_errors() -> None:
    p = resolve_provider("openai/m", base_url="http://127.0.0.1:9/v1", api_key=KEY)
    out = run_sync(p, ask())
    assert out.error is not None and out.error.status is None
    assert KEY not in repr(out.error)
