"""What one step asks the model: process_input_step (+ prepare_step) and the request.

Every step starts from the agent's settings and the run's base system messages (so a
step's changes last that step only); the input-step hooks change them in list order.
"""

from __future__ import annotations

from collections.abc import Generator

import msgspec

from effects import Abort, Continue, Replace
from pipeline.loop.cost import spending
from pipeline.loop.hooks import raised, settle
from pipeline.loop.state import RunConfig, RunState, apply, trip
from pipeline.processor import InputStepArgs, StepChange, StepSettings
from pipeline.protocol.replies import LoopCommand
from pipeline.tools import Tool
from pipeline.values.messages import SystemMessage
from pipeline.values.model import ModelRequest
from pipeline.values.output_type import TypedOutput, output_prompt

_CHANGEABLE = tuple(f for f in StepSettings.__struct_fields__ if f in StepChange.__struct_fields__)
assert len(_CHANGEABLE) == len(StepSettings.__struct_fields__), "StepChange lacks a setting"
_replace = msgspec.structs.replace
"""(Per hook, the args of the hook before with its state: cheaper than making them.)"""


def base_settings(rc: RunConfig, base_system: tuple[SystemMessage, ...]) -> StepSettings:
    """The settings every step starts from: the agent's, with the run's base system
    messages (so a step's changes last that step only). Frozen: made once per run."""
    a = rc.agent
    return StepSettings(
        model=a.model,
        tool_choice=a.tool_choice,
        active_tools=None,
        tools=a.tools,
        system_messages=base_system,
        provider_options=a.provider_options,
        model_settings=a.model_settings,
        structured_output=a.structured_output,
        fallback=a.fallback,
    )


def input_step(
    rc: RunConfig, st: RunState, step: int, base: StepSettings
) -> Generator[LoopCommand, object, StepSettings]:
    """The step's settings: `base` (`base_settings`), changed by the input-step hooks in
    order."""
    cfg = base
    record = rc.record
    hooks = rc.h_input_step
    steps = st.steps
    spent = spending(rc, st)
    args: InputStepArgs[object] | None = None
    for b in hooks:
        if args is not None:  # the hook before passed: the same args but for its state
            state = st.states[b.slot]
            if state is not args.state:  # (the same state, often None: the same args)
                args = _replace(args, state=state)
        else:
            args = InputStepArgs(
                message_list=st.ml,
                step_number=step,
                steps=steps,
                system_messages=cfg.system_messages,
                model=cfg.model,
                tool_choice=cfg.tool_choice,
                active_tools=cfg.active_tools,
                tools=cfg.tools,
                provider_options=cfg.provider_options,
                model_settings=cfg.model_settings,
                structured_output=cfg.structured_output,
                state=st.states[b.slot],
                retry_count=st.retry_count,
                spent=spent,
                context=rc.ctx,
            )
        try:  # `invoke`, inline: a call less per hook per step (docs/DESIGN.md, speed)
            raw = b.fn(args)
        except Exception as e:
            raw = raised(b, e)
        if raw.__class__ is Continue and record is None:  # passed: nothing to settle
            continue
        args = None  # what the next hook sees may change: made anew
        eff = apply(rc, st, b, (yield from settle(b, raw)))
        if isinstance(eff, Abort):
            raise trip(b, eff)
        if isinstance(eff, Replace):
            ch: StepChange = eff.value
            if ch.message_list is not None:
                st.ml = ch.message_list
            changed = {
                f: v for f in _CHANGEABLE if (v := getattr(ch, f)) is not None
            }
            if changed:
                cfg = msgspec.structs.replace(cfg, **changed)
    return cfg


def step_tools(cfg: StepSettings) -> tuple[Tool, ...]:
    """The tools of this step: `tools` narrowed to `active_tools` when set."""
    if cfg.active_tools is None:
        return cfg.tools
    active = frozenset(cfg.active_tools)
    return tuple(t for t in cfg.tools if t.name in active)


def model_request(st: RunState, cfg: StepSettings) -> ModelRequest:
    """What the step asks the model."""
    tools = cfg.tools if cfg.active_tools is None else step_tools(cfg)
    stt = st.tools
    specs = stt.specs if tools is stt.specs_of else stt.make_specs(tools)
    so = cfg.structured_output
    system = cfg.system_messages
    if so is not None and so.mode == "prompted":  # the schema in the instructions
        system = (*system, output_prompt(so))
        so = None
    return ModelRequest(
        model=cfg.model,
        system=system,
        # Paired for every provider (the codecs still fit ids and names to the wire).
        messages=st.pairing.messages(st.ml),
        tools=specs,
        tool_choice=cfg.tool_choice,
        model_settings=cfg.model_settings,
        provider_options=cfg.provider_options,
        # A TypedOutput's decoder stays here: the request carries plain data.
        structured_output=(
            so.wire() if so is not None and isinstance(so, TypedOutput) else so
        ),
    )
