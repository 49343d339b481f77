"""Agents that call agents: the pure parts of a tree of runs (`docs/agents.md`).

An agent called as a tool (`Agent.as_tool`) or handed the conversation (`Agent.as_handoff`)
runs as a child run: the parent's tool step hands the interpreter a `ChildRun` in the
call's `ToolInvocation`, the interpreter drives the child's own agent loop through a
driver of its own (so the child's model calls, tools, judges and approvals are commands
like the parent's), and the parent folds what the child left (`ChildBox`) into its step:
the child's answer as the call's result, its chunks through the parent's stream
processors, its memory writes kept for the root's commit, its usage and cost added, a
suspension nested under the call.

This package holds the values and the pure functions over them; the loop's part is
`pipeline.loop.children`.
"""

from pipeline.agent import AgentTool, ChildMemory, InputFilter
from pipeline.agents.child import (
    ChildBox,
    ChildRun,
    Spender,
    Uplink,
    agent_chunk,
    agent_delta,
    agent_discarded,
    child_context,
    child_input,
    conversation_only,
    delivered_text,
    node_of,
    tool_value,
)
from pipeline.agents.nested import child_resumption, nested_pending, split_id

__all__ = [
    # what an app declares (`Agent.as_tool`, `Agent.as_handoff`)
    "AgentTool", "ChildMemory", "InputFilter", "conversation_only",
    # a child run as the loop hands it to an interpreter, and what it leaves
    "ChildBox", "ChildRun", "Spender", "Uplink", "agent_chunk", "agent_delta",
    "agent_discarded", "child_context", "child_input", "delivered_text",
    "child_resumption", "nested_pending", "node_of", "split_id", "tool_value",
]
