"""Agents across processes over the Agent2Agent protocol (A2A), through the official
`a2a-sdk` (the `a2a` extra: `pip install 'pipeline-agents[a2a]'`).

- `a2a_app(agent, interpreter, url=...)`: an agent served over A2A (an ASGI app):
  `interpreters.a2a.server`.
- `RemoteAgents({...}).agent(name)`: a remote A2A agent as a child run of a local
  parent (`as_tool`, `as_handoff`): `interpreters.a2a.client`.

See docs/agents.md ("Agents across processes").
"""

from interpreters.a2a import extra  # noqa: F401  (first: the extra, or a clear ImportError)
from interpreters.a2a.client import (
    DECISION_TOOL,
    A2AProvider,
    RemoteAgentError,
    RemoteAgents,
    RemoteLimits,
)
from interpreters.a2a.server import A2AConfigError, AgentRunExecutor, a2a_app, agent_card

__all__ = [
    "DECISION_TOOL", "A2AConfigError", "A2AProvider", "AgentRunExecutor", "RemoteAgentError",
    "RemoteAgents", "RemoteLimits", "a2a_app", "agent_card",
]
