"""Model providers over httpx: the OpenAI Chat Completions and Anthropic Messages wire
formats, streaming and not, sync (`httpx.Client`) and async (`httpx.AsyncClient`).

Start from a router id:

    provider = resolve_provider("openai/gpt-4o-mini")          # sync Provider
    aprovider = resolve_async_provider("anthropic/claude-sonnet-4-5")
    local = resolve_provider("ollama/qwen3")                    # no key needed
    other = resolve_provider("my-model", base_url="http://127.0.0.1:8080/v1")

For an interpreter, a resolver serves every id an agent asks for; its keys and base URLs
are per route, so a key never goes to another provider's host:

    resolve = Resolver(api_keys={"openai": "sk-..."},
                       base_urls={"ollama": "http://gpu-box:11434/v1"})

Each call makes one attempt and raises `ProviderError(ApiError)` on failure; the loop's
RetryPolicy retries what `ApiError.retryable` allows, after `retry_after` when given.
"""

from interpreters.providers.anthropic import AnthropicCodec, AnthropicOptions
from interpreters.providers.codec import ByteStreamDecoder, Codec, Encoded
from interpreters.providers.http import AsyncHttpProvider, Endpoint, HttpProvider, Timeouts
from interpreters.providers.limits import Limits
from interpreters.providers.openai_chat import OpenAIChatCodec, OpenAIChatOptions
from interpreters.providers.router import (
    ROUTES,
    AsyncResolver,
    ProviderConfig,
    ProviderConfigError,
    Resolver,
    Route,
    provider_config,
    resolve_async_provider,
    resolve_provider,
)
from interpreters.providers.secret import Secret
from interpreters.providers.sse import SseEvent, SseParser

__all__ = [
    "ROUTES",
    "AnthropicCodec",
    "AnthropicOptions",
    "AsyncHttpProvider",
    "AsyncResolver",
    "ByteStreamDecoder",
    "Codec",
    "Encoded",
    "Endpoint",
    "HttpProvider",
    "Limits",
    "OpenAIChatCodec",
    "OpenAIChatOptions",
    "ProviderConfig",
    "ProviderConfigError",
    "Resolver",
    "Route",
    "Secret",
    "SseEvent",
    "SseParser",
    "Timeouts",
    "provider_config",
    "resolve_async_provider",
    "resolve_provider",
]
