"""Resumes a worker refused: a run recorded on another definition of its agent.

Such a run is not ended (its tools may have run; the agent it started on, or a worker
that accepts the old definition, must still be able to finish it): the worker stops
that execution without recording anything, so the run stays PENDING, and writes why
here (table `pipeline_agents_refusals`), where `result` finds it to raise
`AgentChangedError` instead of waiting. The refusal stands while the refusing execution
still owns the run: a later resume (a restarted worker, another one the run was handed
to) owns it under another token, and the refusal no longer counts.
"""

from __future__ import annotations

import msgspec
import sqlalchemy as sa

from interpreters.durable.dbos.store import ensure_table

REFUSALS = sa.Table(
    "pipeline_agents_refusals",
    sa.MetaData(),
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("refusal", sa.Text, nullable=False),
)
"""One row per run whose last resume was refused: the `Refusal`, JSON."""


class Refusal(msgspec.Struct, frozen=True):
    """Why a worker did not resume a run: its agent's definition differs."""

    agent: str
    changed: tuple[str, ...]
    recorded: str
    """The digest of the definition the run recorded."""
    current: str
    """The digest of the refusing worker's definition."""
    executor_id: str
    token: str | None
    """The ownership token of the refusing execution."""


_REFUSAL = msgspec.json.Decoder(Refusal)


class RunRefused(BaseException):
    """A resume this worker refused: the execution stops here, recording nothing, and
    the run stays pending (a BaseException, so neither the agent loop nor DBOS takes it
    for the run's outcome)."""


def create(engine: sa.Engine) -> None:
    ensure_table(engine, REFUSALS)


def record(engine: sa.Engine, run_id: str, refusal: Refusal) -> None:
    ensure_table(engine, REFUSALS)
    with engine.begin() as c:
        c.execute(sa.delete(REFUSALS).where(REFUSALS.c.run_id == run_id))
        c.execute(sa.insert(REFUSALS).values(
            run_id=run_id, refusal=msgspec.json.encode(refusal).decode()))


def find(engine: sa.Engine, run_id: str, owner: str | None) -> Refusal | None:
    """The refusal of `run_id` by its execution that holds it now (`owner`, its
    ownership token), if that one refused it (None also where no worker made the table
    yet)."""
    try:
        with engine.begin() as c:
            text = c.execute(
                sa.select(REFUSALS.c.refusal).where(REFUSALS.c.run_id == run_id)
            ).scalar()
    except sa.exc.DBAPIError:
        if sa.inspect(engine).has_table(REFUSALS.name):
            raise
        return None
    if text is None:
        return None
    r = _REFUSAL.decode(text)
    return r if r.token is not None and r.token == owner else None
