"""The agent loop: a run as a generator of commands, in phases, one module each.

`run` is the run and its steps; the phases are `start`, `step` (a step's settings),
`model_call`, `stream`, `output`, `gate` and `tool_step`; what a run holds between them is
`state`. Interpreters use `agent_loop` (and `rejected` for input refused at the door,
`relay` to drive a child run: `docs/agents.md`).
"""

from pipeline.loop.children import relay, watched_relay
from pipeline.loop.run import agent_loop, rejected

__all__ = ["agent_loop", "rejected", "relay", "watched_relay"]
