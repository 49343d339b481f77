"""A run's start: its configuration (the agent's hooks bound to their processors' state
slots, the stream's plan) and its state, fresh or as a suspended run left it."""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet
from typing import TypedDict, cast

import msgspec

from pipeline.agent import Agent, AgentTool
from pipeline.agents import ChildRun
from pipeline.approval import Resumption
from pipeline.loop.children import running, tree_bounds
from pipeline.loop.hooks import Bound, bind
from pipeline.loop.judges import JudgeLedger
from pipeline.loop.state import Ids, Level, RunConfig, RunState
from pipeline.loop.stream import fresh_seen, plan_stream
from pipeline.processor import BaseProcessor
from pipeline.protocol.replies import EffectRecorder
from pipeline.values.context import RunContext
from pipeline.values.cost import Pricer
from pipeline.values.messages import MessageList


def start_run(
    agent: Agent,
    messages: MessageList,
    context: RunContext,
    clock: Callable[[], float],
    record: EffectRecorder | None,
    price: Pricer | None,
    used: AbstractSet[str],
    resume: Resumption | None = None,
    child: ChildRun | None = None,
) -> tuple[RunConfig, RunState]:
    """The run's configuration and its state at the start (`used`: the input's tool-call
    ids, known from checking it; `child`: a child run's own, `docs/agents.md`)."""
    up = cast("Level | None", child.box.up) if child is not None else None
    template = _hookless(agent)
    if template is not None and (up is None or not up.tree_bounds):
        rc = msgspec.structs.replace(
            template, ctx=context, clock=clock, record=record, price=price, child=child,
            started_at=resume.suspension.started_at if resume is not None else 0.0,
        )
        st = _start_state(rc, messages, [], used, None, resume)
        if child is not None:
            child.box.running = running(rc, st)
        return rc, st
    procs = agent.all_processors()
    judges: JudgeLedger | None = None
    if procs or agent.prepare_step is not None:
        judges = JudgeLedger()
        states, hooks, flush = _bind_hooks(agent, procs, judges)
    else:  # no hook at all: nothing to bind (on the path of every run)
        states, hooks, flush = [], BoundHooks(), ()
    if up is not None and up.tree_bounds:  # the budgets above bound it too
        states.append(None)
        hooks["h_input_step"] = (*hooks.get("h_input_step", ()),
                                 *tree_bounds(up, len(states) - 1))
    plan = plan_stream(agent, hooks.get("h_stream", ()), flush)
    children = _runs_children(agent, procs)
    reviewers = tuple(
        Bound(p, p.id, "process_tool_call", review, i, False, judges)
        for i, p in enumerate(procs)
        if callable(review := getattr(p, "review_approval", None))
    )
    rc = RunConfig(agent=agent, ctx=context, clock=clock, record=record, price=price,
                   started_at=_started_at(clock, hooks.get("h_approved", ()), resume),
                   children=children, child=child, tool_rules=_tool_rules(agent, procs),
                   h_review=reviewers, **hooks, **plan)
    st = _start_state(rc, messages, states, used, judges, resume)
    if child is not None:
        child.box.running = running(rc, st)
    return rc, st


def _runs_children(agent: Agent, procs: tuple[BaseProcessor, ...]) -> bool:
    return any(isinstance(t, AgentTool) for t in agent.tools) or any(
        isinstance(t, AgentTool) for p in procs for t in p.tools
    )


def _tool_rules(agent: Agent, procs: tuple[BaseProcessor, ...]) -> bool:
    """Whether a tool of the agent (or one a processor declares) has its own
    `needs_approval` rule."""
    return any(t.needs_approval is not False for t in agent.tools) or any(
        t.needs_approval is not False for p in procs for t in p.tools
    )


_HOOKLESS: dict[int, tuple[Agent, RunConfig]] = {}
"""For an agent without hooks (no processor, no prepare_step), what its runs' configuration
holds but their own context, clock, recorder and pricer: made once per agent (a child
agent's runs start many times), for the last `MAX_HOOKLESS` such agents."""
MAX_HOOKLESS = 256
_NO_CONTEXT = RunContext(run_id="")


def _no_clock() -> float:
    return 0.0


def _hookless(agent: Agent) -> RunConfig | None:
    """The configuration every run of `agent` starts from, if it has no hook (else None:
    its hooks are bound to the run's state)."""
    if (agent.prepare_step is not None or agent.input_processors or agent.output_processors
            or agent.error_processors):
        return None
    kept = _HOOKLESS.get(id(agent))
    if kept is not None and kept[0] is agent:  # (kept, it is not collected: no id reuse)
        return kept[1]
    rc = RunConfig(agent=agent, ctx=_NO_CONTEXT, clock=_no_clock, record=None, price=None,
                   children=_runs_children(agent, ()), tool_rules=_tool_rules(agent, ()),
                   **plan_stream(agent, ()))
    if len(_HOOKLESS) >= MAX_HOOKLESS:
        _HOOKLESS.clear()
    _HOOKLESS[id(agent)] = (agent, rc)
    return rc


def _started_at(
    clock: Callable[[], float], approved: tuple[Bound, ...], resume: Resumption | None
) -> float:
    """When the run began: a resumed run's is the suspended one's; the clock is read
    only for a run whose process_approved hooks are told (a clock reading less for
    every other run, and its trace)."""
    if resume is not None:
        return resume.suspension.started_at
    return clock() if approved else 0.0


class BoundHooks(TypedDict, total=False):
    """An agent's hooks, bound to their processors' state slots, per hook point: the
    `RunConfig` fields of the same names (`RunConfig(..., **hooks)`)."""

    h_input: tuple[Bound, ...]
    h_input_step: tuple[Bound, ...]
    h_error: tuple[Bound, ...]
    h_stream: tuple[Bound, ...]
    h_output_step: tuple[Bound, ...]
    h_result: tuple[Bound, ...]
    h_approved: tuple[Bound, ...]
    h_tool_call: tuple[Bound, ...]
    h_tool_result: tuple[Bound, ...]


def _bind_hooks(
    agent: Agent, procs: tuple[BaseProcessor, ...], judges: JudgeLedger
) -> tuple[list[object], BoundHooks, tuple[Bound, ...]]:
    """The processors' initial states (by slot), their bound hooks, and the
    `flush_output_stream` ones (the stream's plan reads them); `prepare_step` runs last
    among the input-step hooks, with a slot of its own. The model calls the hooks ask
    for are counted in `judges`."""
    slots = {id(p): i for i, p in enumerate(procs)}
    states = [p.initial_state() for p in procs]
    fns = {id(p): p.hook_functions() for p in procs}  # once per processor, not per hook
    inp, out = agent.input_processors, agent.output_processors
    input_step = bind(inp, "process_input_step", slots, fns, judges)
    if agent.prepare_step is not None:
        prep = BaseProcessor()
        prep.id = "prepare_step"
        states.append(None)
        input_step += (
            Bound(prep, "prepare_step", "process_input_step", agent.prepare_step,
                  len(states) - 1, False, judges),
        )
    return states, BoundHooks(
        h_input=bind(inp, "process_input", slots, fns, judges),
        h_input_step=input_step,
        h_error=bind(agent.error_processors, "process_api_error", slots, fns, judges),
        h_stream=bind(out, "process_output_stream", slots, fns, judges),
        h_output_step=bind(out, "process_output_step", slots, fns, judges),
        h_result=bind(out, "process_output_result", slots, fns, judges),
        h_approved=bind(procs, "process_approved", slots, fns, judges),
        h_tool_call=bind(procs, "process_tool_call", slots, fns, judges),
        h_tool_result=bind(procs, "process_tool_result", slots, fns, judges),
    ), bind(out, "flush_output_stream", slots, fns, judges)


def _start_state(
    rc: RunConfig, messages: MessageList, states: list[object], used: AbstractSet[str],
    judges: JudgeLedger | None,
    resume: Resumption | None = None,
) -> RunState:
    """The run's state at the start (`start_run`); a resumed one's as it was suspended."""
    agent, price = rc.agent, rc.price
    if resume is not None:
        s = resume.suspension
        st = RunState(
            Ids(rc.ctx.run_id, s.ids_used), messages, list(s.states),
            cost_known=price is not None, seen=fresh_seen(rc), ids_used=used,
            judges=judges,
        )
        st.steps = tuple(s.steps)
        st.retry_count = s.retry_count
        st.carried = s.spent
        if s.leaving_calls:
            st.leaving.calls_changed({c.tool_call_id: c for c in s.leaving_calls})
        for done in s.steps:
            st.usage = st.usage + done.usage
        st.usage = st.usage + s.step.usage
        st.usage_carried = st.usage
        return st
    # The agent's instructions first, then the caller's system messages; a previous
    # run's (tagged) instructions in the input are replaced, not repeated.
    ml = messages.with_instructions(agent.instructions)
    if "response" in ml.sources:
        # A previous run's answer is this run's memory: `response` (the result's text,
        # what process_output_result sees and may drop) is only what this run adds.
        ml = MessageList(
            ml.messages,
            tuple("memory" if s == "response" else s for s in ml.sources),
            ml.system,
        )
    st = RunState(
        Ids(rc.ctx.run_id), ml, states,
        cost_known=price is not None, seen=fresh_seen(rc), ids_used=used,
        judges=judges,
    )
    if not used:  # the check read every part and found no tool call or result
        st.pairing.known_paired(ml)
    return st
