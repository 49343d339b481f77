"""What a run's model calls cost and use: priced as each call ends, summed at the end.

Each model call the agent makes is priced when its response finishes (`price_call`), a
call the run stopped during is counted as it can be (`count_stopped`), and the run's
cost at the end adds the calls its hooks' judges made (`cost.run_cost`). A cost is either
right or absent (`pipeline.values.cost`): one call no one can price makes the run's unknown.
"""

from __future__ import annotations

from decimal import Decimal

from pipeline.loop.state import RunConfig, RunState
from pipeline.values.chunks import ModelFinish
from pipeline.values.cost import Cost, PriceQuery, charge
from pipeline.values.result import JudgeCall, Spending


def price_call(
    rc: RunConfig, st: RunState, model: str, fin: ModelFinish, at: float
) -> Cost | None:
    """This call's cost, added to the run's; an unknown model makes the run's cost
    unknown for good."""
    c, st.cost, st.cost_known = charge(
        rc.price, PriceQuery(model, fin.model_id, fin.usage, at), st.cost, st.cost_known
    )
    return c


def count_stopped(rc: RunConfig, st: RunState, model: str, fin: ModelFinish | None) -> None:
    """A model call the run stopped during (a processor's abort or crash, a cancel, a
    broken stream) was made all the same: its usage counts if the provider reported it
    (the response had ended), else the call is unmetered and the run's cost unknown."""
    if fin is not None:
        st.usage = st.usage + fin.usage
        if rc.price is not None:  # (no clock read: see `judges`)
            price_call(rc, st, model, fin, last_time(st))
    else:
        st.unmetered += 1
        st.cost_known = False


def last_time(st: RunState) -> float:
    """The run's latest clock value without reading the clock: its last message's."""
    messages = st.ml.messages
    return messages[-1].created_at if messages else 0.0


def run_cost(rc: RunConfig, st: RunState) -> tuple[tuple[JudgeCall, ...], Cost | None]:
    """The run's judge calls, priced, and its cost: the agent's calls and the judges',
    or None if one of them is unknown."""
    if st.judges is None or not st.judges.asked:
        return (), st.cost if st.cost_known else None
    judges, known = st.judges.calls(rc.price, last_time(st))
    if not (st.cost_known and known):
        return judges, None
    cost = st.cost
    for j in judges:
        if j.cost is not None:
            cost = j.cost if cost is None else cost + j.cost
    return judges, cost


def spending(rc: RunConfig, st: RunState) -> Spending:
    """What the run has paid for so far (`Spending`): the agent's model calls, retried
    and discarded ones too, and its hooks' judges; for a resumed run, from its start."""
    own = Spending(
        st.model_calls, st.usage if st.usage_carried is None else st.usage - st.usage_carried,
        (st.cost or Cost(Decimal(0))) if st.cost_known and not st.unmetered else None,
    )
    if st.judges is not None and st.judges.asked:
        own = own + st.judges.spent(rc.price, last_time(st))
    if st.tree is not None:  # what its child runs paid for, once they returned
        own = own + st.tree.spent
    return st.carried + own if st.carried.model_calls else own
