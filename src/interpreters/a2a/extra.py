"""The a2a-sdk package, or a clear error naming the extra that brings it."""

from __future__ import annotations

try:
    import a2a  # noqa: F401
    import starlette  # noqa: F401
except ImportError as e:  # pragma: no cover - the extra's absence
    raise ImportError(
        "interpreters.a2a needs the Agent2Agent SDK (a2a-sdk, with its HTTP server): "
        "pip install 'pipeline-agents[a2a]'"
    ) from e

EXTRA = "a2a"
