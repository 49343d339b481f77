"""Router ids (`openai/gpt-4o-mini`, `anthropic/claude-sonnet-4-5`, `ollama/qwen3`...) to
configured providers, with keys from the usual environment variables.

`provider_config` is pure (the environment is a parameter; providers/routes.py);
`resolve_provider` and `resolve_async_provider` build the sync and async providers on top
of it. A missing key fails there, before any request, with a message that names the
variable.

`Resolver` and `AsyncResolver` serve every router id an agent asks for (a step may switch
models), so their keys and base URLs are per route: a route's key is only ever sent to
that route's base URL, never to another provider's host. What the sync and async ones
share is written once (`ResolverBase`, `HttpProviderBase.for_model`: providers/common.py);
the async ones add their waits (providers/_async/router.py), the sync ones are generated
from them by `scripts/unasync.py`.
"""

from interpreters.providers._async.router import AsyncResolver, resolve_async_provider
from interpreters.providers._sync.router import Resolver, resolve_provider
from interpreters.providers.routes import (
    COMPATIBLE,
    ProviderConfig,
    ProviderConfigError,
    provider_config,
    route_of,
)
from interpreters.providers.table import ROUTES, Route

__all__ = [
    "COMPATIBLE",
    "ROUTES",
    "AsyncResolver",
    "ProviderConfig",
    "ProviderConfigError",
    "Resolver",
    "Route",
    "provider_config",
    "resolve_async_provider",
    "resolve_provider",
    "route_of",
]
