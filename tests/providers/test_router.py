"""Router ids, base URLs and keys; keys never shown anywhere."""

from __future__ import annotations

import logging
import pickle
import traceback
from collections.abc import Iterator

import pytest

from effects import Continue, Replace
from interpreters.aio import AsyncInterpreter
from interpreters.providers import (
    AnthropicCodec,
    AsyncHttpProvider,
    AsyncResolver,
    HttpProvider,
    OpenAIChatCodec,
    ProviderConfigError,
    Resolver,
    Secret,
    provider_config,
    resolve_async_provider,
    resolve_provider,
)
from interpreters.providers.provider import ProviderError
from interpreters.sync import SyncInterpreter
from pipeline.agent import Agent
from pipeline.processor import (
    ApiErrorArgs,
    ApiErrorResult,
    InputStepArgs,
    InputStepResult,
    StepChange,
    processor,
)
from pipeline.tools import tool
from pipeline.values.model import ApiError
from pipeline.values.sanitize import MISTRAL
from tests.providers.helpers import (
    KEY,
    ask,
    oa_chunk,
    oa_text_stream,
    run_sync,
    sse,
)
from tests.providers.server import ReplayServer, Reply

SSE = (("content-type", "text/event-stream"),)
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
    r = Resolver(base_urls={"openai": server.url + "/v1"}, api_keys={"openai": KEY})
    assert r("openai/a") is r("openai/a")
    assert r("openai/a") is not r("openai/b")
    assert KEY not in repr(vars(r)) and KEY not in repr(vars(vars(r)["_routes"]))
    r.close()
    a = AsyncResolver(base_urls={"anthropic": server.url + "/v1"}, api_keys={"anthropic": KEY})
    assert a("anthropic/x") is a("anthropic/x")


# --- a resolver's keys are per route ---------------------------------------------------

K_OA, K_AN, K_LOCAL = "sk-openai-KEY-1111", "sk-ant-KEY-2222", "sk-local-KEY-3333"


def _endpoint(p: HttpProvider | AsyncHttpProvider) -> tuple[str, str | None]:
    key = p.endpoint.api_key
    return p.endpoint.base_url, key.reveal() if key is not None else None


@pytest.mark.parametrize("make", [Resolver, AsyncResolver])
def test_resolver_keys_and_base_urls_apply_to_their_own_route_only(
    make: type[Resolver] | type[AsyncResolver],
) -> None:
    # The review's case: one key given in code, then a step switches to another provider.
    r = make(api_key=K_OA, env={})
    with pytest.raises(ProviderConfigError, match="ANTHROPIC_API_KEY"):
        r("anthropic/claude-sonnet-4-5")
    with pytest.raises(ProviderConfigError, match="OPENAI_API_KEY"):
        r("openai/gpt-4o-mini")
    with pytest.raises(ProviderConfigError, match="unknown model id"):
        r("my-model")  # api_key= alone gives openai-compatible ids no base URL
    # ... and a local base URL never receives another route's key from the environment.
    env = {"ANTHROPIC_API_KEY": K_AN, "OPENAI_API_KEY": K_OA}
    local = "http://127.0.0.1:8080/v1"
    r = make(base_url=local, api_key=K_LOCAL, env=env)
    assert _endpoint(r("anthropic/claude-sonnet-4-5")) == ("https://api.anthropic.com/v1", K_AN)
    assert _endpoint(r("openai/gpt-4o-mini")) == ("https://api.openai.com/v1", K_OA)
    assert _endpoint(r("ollama/qwen3")) == ("http://localhost:11434/v1", None)
    assert _endpoint(r("my-model")) == (local, K_LOCAL)
    assert _endpoint(r("openai-compatible/phi")) == (local, K_LOCAL)
    # Per route: each key with its own route's base URL.
    r = make(api_keys={"openai": K_OA, "anthropic": K_AN},
             base_urls={"ollama": "http://gpu-box:11434/v1", "anthropic": local}, env={})
    assert _endpoint(r("openai/m")) == ("https://api.openai.com/v1", K_OA)
    assert _endpoint(r("anthropic/m")) == (local, K_AN)
    assert _endpoint(r("ollama/q")) == ("http://gpu-box:11434/v1", None)
    with pytest.raises(ProviderConfigError, match="GROQ_API_KEY"):
        r("groq/m")
    with pytest.raises(ProviderConfigError, match="unknown model id"):
        r("my-model")  # no base URL for openai-compatible ids


def test_resolver_rejects_unknown_routes_conflicts_and_malformed_keys() -> None:
    with pytest.raises(ProviderConfigError, match="unknown route 'opanai'"):
        Resolver(api_keys={"opanai": K_OA})
    with pytest.raises(ProviderConfigError, match="unknown route 'gpt'"):
        AsyncResolver(base_urls={"gpt": "http://h/v1"})
    with pytest.raises(ProviderConfigError, match="give one"):
        Resolver(api_key=K_OA, api_keys={"openai-compatible": K_AN})
    with pytest.raises(ProviderConfigError, match="give one"):
        Resolver(base_url="http://a/v1", base_urls={"openai-compatible": "http://b/v1"})
    with pytest.raises(ProviderConfigError, match=r"api_keys\['openai'\]") as info:
        Resolver(api_keys={"openai": "sk-with\nnewline"})
    assert "newline" not in str(info.value)
    with pytest.raises(ProviderConfigError, match="from api_key= is malformed"):
        AsyncResolver(api_key="sk-with\nnewline")


def _keys_seen(srv: ReplayServer) -> set[str]:
    sent = "".join(str(r.headers) + r.body.decode() for r in srv.seen)
    return {k for k in (K_OA, K_AN, K_LOCAL) if k in sent}


def _switching_agent() -> Agent:
    """Step 0 on anthropic/ calls a tool; step 1 switches to openai/."""

    @tool
    def ping() -> str:
        """Answers pong."""
        return "pong"

    def switch(args: InputStepArgs[None]) -> InputStepResult[None]:
        return Replace(StepChange(model="openai/m")) if args.step_number else Continue()

    return Agent.create("anthropic/m", tools=[ping], prepare_step=switch)


def _queue_switch(oa: ReplayServer, an: ReplayServer) -> None:
    an.queue(Reply(200, SSE, sse(
        {"type": "message_start", "message": {"id": "msg_1", "model": "m",
                                              "usage": {"input_tokens": 5, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {
            "type": "tool_use", "id": "toolu_1", "name": "ping", "input": {}}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "input_json_delta", "partial_json": "{}"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
         "usage": {"output_tokens": 3}},
        {"type": "message_stop"},
    )))
    oa.queue(Reply(200, SSE, oa_text_stream("done")))


@pytest.fixture
def hosts(server: ReplayServer) -> Iterator[tuple[ReplayServer, ReplayServer, ReplayServer]]:
    """Three hosts: OpenAI's, Anthropic's and a local server's."""
    oa, an = ReplayServer(), ReplayServer()
    yield oa, an, server
    oa.close()
    an.close()


def _resolver_kw(how: str, oa: ReplayServer, an: ReplayServer, local: ReplayServer
                 ) -> dict[str, object]:
    """A local server given by `base_url=` (with its own key, or none), and the two
    providers' hosts and keys given in the environment or in code."""
    env = {"ANTHROPIC_API_KEY": K_AN, "ANTHROPIC_BASE_URL": an.url + "/v1"}
    kw: dict[str, object] = {"base_url": local.url + "/v1", "env": env}
    if how != "env, no local key":
        kw["api_key"] = K_LOCAL
    if how.startswith("env"):
        env |= {"OPENAI_API_KEY": K_OA, "OPENAI_BASE_URL": oa.url + "/v1"}
    else:
        kw |= {"api_keys": {"openai": K_OA}, "base_urls": {"openai": oa.url + "/v1"}}
    return kw


def _check_hosts(oa: ReplayServer, an: ReplayServer, local: ReplayServer) -> None:
    assert (_keys_seen(oa), _keys_seen(an), _keys_seen(local)) == ({K_OA}, {K_AN}, set())
    assert [len(oa.seen), len(an.seen), len(local.seen)] == [1, 1, 0]
    assert oa.seen[0].headers["authorization"] == f"Bearer {K_OA}"
    assert an.seen[0].headers["x-api-key"] == K_AN


@pytest.mark.parametrize("how", ["env", "env, no local key", "code"])
def test_a_key_is_never_sent_to_another_providers_host_sync(
    hosts: tuple[ReplayServer, ReplayServer, ReplayServer], how: str
) -> None:
    oa, an, local = hosts
    _queue_switch(oa, an)
    resolver = Resolver(**_resolver_kw(how, oa, an, local))  # type: ignore[arg-type]
    result = SyncInterpreter(resolve=resolver).run(_switching_agent(), "go")
    resolver.close()
    _check_hosts(oa, an, local)
    assert result.status == "finished", result.error
    assert result.text == "done"


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["env", "env, no local key", "code"])
async def test_a_key_is_never_sent_to_another_providers_host_async(
    hosts: tuple[ReplayServer, ReplayServer, ReplayServer], anyio_backend: str, how: str
) -> None:
    oa, an, local = hosts
    _queue_switch(oa, an)
    resolver = AsyncResolver(**_resolver_kw(how, oa, an, local))  # type: ignore[arg-type]
    result = await AsyncInterpreter(resolve=resolver).run(_switching_agent(), "go")
    await resolver.aclose()
    _check_hosts(oa, an, local)
    assert result.status == "finished", result.error
    assert result.text == "done"


# --- configuration errors --------------------------------------------------------------


def test_config_error_is_a_provider_error_of_type_configuration() -> None:
    with pytest.raises(ProviderConfigError) as info:
        provider_config("anthropic/m", env={})
    e = info.value
    assert isinstance(e, ProviderError) and isinstance(e, ValueError)
    assert str(e) == ("no API key for anthropic/ models: set the ANTHROPIC_API_KEY "
                      "environment variable or pass it in code: "
                      "Resolver(api_keys={'anthropic': ...})")
    assert e.error == ApiError(status=None, message=str(e), error_type="configuration",
                               retryable=False)
    assert pickle.loads(pickle.dumps(e)).error == e.error


def test_a_missing_key_for_a_switched_model_is_a_configuration_error(
    server: ReplayServer,
) -> None:
    # Step 0 on openai/ (served) calls a tool; step 1 switches to anthropic/, which has
    # no key: the run reports that configuration, not a generic provider failure.
    asked: list[ApiError] = []

    def note(args: ApiErrorArgs[None]) -> ApiErrorResult[None]:
        asked.append(args.error)
        return Continue()

    @tool
    def ping() -> str:
        """Answers pong."""
        return "pong"

    def switch(args: InputStepArgs[None]) -> InputStepResult[None]:
        return Replace(StepChange(model="anthropic/m")) if args.step_number else Continue()

    server.queue(Reply(200, SSE, sse(
        oa_chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                  "function": {"name": "ping", "arguments": "{}"}}]}),
        oa_chunk(finish="tool_calls"), "data: [DONE]\n\n")))
    agent = Agent.create("openai/m", tools=[ping], prepare_step=switch,
                         error_processors=[processor("note", process_api_error=note)])
    resolver = Resolver(env={"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": server.url + "/v1"})
    result = SyncInterpreter(resolve=resolver).run(agent, "hi")
    resolver.close()
    assert result.status == "failed" and len(server.seen) == 1
    assert [(a.error_type, a.retryable, a.status) for a in asked] == [
        ("configuration", False, None)]
    assert "ANTHROPIC_API_KEY" in asked[0].message
    assert "ProviderConfigError" not in asked[0].message
    assert "provider-error" not in str(result.error)


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


@pytest.mark.parametrize("make", [Resolver, AsyncResolver])
def test_resolver_check_names_every_missing_variable_before_any_request(
    make: type[Resolver] | type[AsyncResolver],
) -> None:
    r = make(api_keys={"openai": K_OA}, env={})
    models = ["openai/gpt-4o-mini", "anthropic/claude-sonnet-4-5", "anthropic/claude-haiku",
              "groq/llama", "ollama/qwen3", "my-model"]
    with pytest.raises(ProviderConfigError) as info:
        r.check(models)
    message = str(info.value)
    for name in ("ANTHROPIC_API_KEY", "GROQ_API_KEY", "'my-model'"):
        assert name in message
    assert message.count("ANTHROPIC_API_KEY") == 1  # one line per problem, with its ids
    assert "anthropic/claude-sonnet-4-5" in message and "anthropic/claude-haiku" in message
    assert "openai/gpt-4o-mini" not in message and "ollama/qwen3" not in message
    assert info.value.error.error_type == "configuration"
    # What can be served passes, and a check builds no provider (nor a client).
    r.check(["openai/gpt-4o-mini", "ollama/qwen3"])
    r.check("openai/gpt-4o-mini")  # one id as it is, not its letters
    assert r._client is None and not r._providers
    ok = make(env={"ANTHROPIC_API_KEY": K_AN, "GROQ_API_KEY": K_OA})
    ok.check(["anthropic/claude-sonnet-4-5", "groq/llama"])
