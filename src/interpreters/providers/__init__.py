"""Model providers over httpx: the OpenAI Chat Completions, OpenAI Responses, Anthropic
Messages, AWS Bedrock Converse and Gemini generateContent wire formats, streaming and not,
sync (`httpx.Client`) and async (`httpx.AsyncClient`). (Embeddings over the same routes
are `interpreters.memory.embed`.)

Start from a router id:

    provider = resolve_provider("openai/gpt-4o-mini")          # sync Provider
    aprovider = resolve_async_provider("anthropic/claude-sonnet-4-5")
    local = resolve_provider("ollama/qwen3")                    # no key needed
    other = resolve_provider("my-model", base_url="http://127.0.0.1:8080/v1")

For an interpreter, a resolver serves every id an agent asks for; its keys and base URLs
are per route, so a key never goes to another provider's host:

    resolve = Resolver(api_keys={"openai": "sk-..."},
                       base_urls={"ollama": "http://gpu-box:11434/v1"})

The wire formats and the routes are tables (providers/table.py): `register_wire_format`
and `register_route` add a format (a module with its `Codec` and `WireFormat`) and a
router prefix that speaks it.

Each call makes one attempt and raises `ProviderError(ApiError)` on failure; the loop's
RetryPolicy retries what `ApiError.retryable` allows, after `retry_after` when given.
"""

from typing import TYPE_CHECKING

from pipeline.lazy import lazy_names

if TYPE_CHECKING:
    from interpreters.providers.anthropic import AnthropicCodec, AnthropicOptions
    from interpreters.providers.bedrock import BedrockCodec, BedrockOptions
    from interpreters.providers.codec import (
        ByteStreamDecoder,
        Codec,
        Encoded,
        WireFormat,
        WireRoute,
        route_options,
    )
    from interpreters.providers.gemini import GeminiCodec, GeminiOptions
    from interpreters.providers.http import AsyncHttpProvider, Endpoint, HttpProvider, Timeouts
    from interpreters.providers.limits import Limits
    from interpreters.providers.openai_chat import OpenAIChatCodec, OpenAIChatOptions
    from interpreters.providers.openai_responses import (
        OpenAIResponsesCodec,
        OpenAIResponsesOptions,
    )
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
    from interpreters.providers.table import (
        WIRE_FORMATS,
        register_route,
        register_wire_format,
        unregister_route,
        unregister_wire_format,
    )

# Loaded when first used: `interpreters.providers.provider` (the contract every interpreter
# imports) must not bring httpx and the wire formats in with it.
_HOME = {
    "ROUTES": "router", "AsyncResolver": "router", "ProviderConfig": "router",
    "ProviderConfigError": "router", "Resolver": "router", "Route": "router",
    "provider_config": "router", "resolve_async_provider": "router",
    "resolve_provider": "router",
    "AnthropicCodec": "anthropic", "AnthropicOptions": "anthropic",
    "BedrockCodec": "bedrock", "BedrockOptions": "bedrock",
    "GeminiCodec": "gemini", "GeminiOptions": "gemini",
    "ByteStreamDecoder": "codec", "Codec": "codec", "Encoded": "codec",
    "WireFormat": "codec", "WireRoute": "codec", "route_options": "codec",
    "WIRE_FORMATS": "table", "register_route": "table", "register_wire_format": "table",
    "unregister_route": "table", "unregister_wire_format": "table",
    "AsyncHttpProvider": "http", "Endpoint": "http", "HttpProvider": "http", "Timeouts": "http",
    "Limits": "limits", "OpenAIChatCodec": "openai_chat", "OpenAIChatOptions": "openai_chat",
    "OpenAIResponsesCodec": "openai_responses", "OpenAIResponsesOptions": "openai_responses",
    "Secret": "secret", "SseEvent": "sse", "SseParser": "sse",
}

__getattr__ = lazy_names(
    __name__, {name: f"{__name__}.{home}" for name, home in _HOME.items()}
)


__all__ = [
    "ROUTES",
    "WIRE_FORMATS",
    "AnthropicCodec",
    "AnthropicOptions",
    "AsyncHttpProvider",
    "AsyncResolver",
    "BedrockCodec",
    "BedrockOptions",
    "ByteStreamDecoder",
    "Codec",
    "Encoded",
    "Endpoint",
    "GeminiCodec",
    "GeminiOptions",
    "HttpProvider",
    "Limits",
    "OpenAIChatCodec",
    "OpenAIChatOptions",
    "OpenAIResponsesCodec",
    "OpenAIResponsesOptions",
    "ProviderConfig",
    "ProviderConfigError",
    "Resolver",
    "Route",
    "Secret",
    "SseEvent",
    "SseParser",
    "Timeouts",
    "WireFormat",
    "WireRoute",
    "provider_config",
    "register_route",
    "register_wire_format",
    "resolve_async_provider",
    "resolve_provider",
    "route_options",
    "unregister_route",
    "unregister_wire_format",
]
