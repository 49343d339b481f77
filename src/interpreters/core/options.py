"""The options of a run, written once: every interpreter's `run` and `stream` take them
as keyword arguments (`interp.run(agent, prompt, thread_id="t1", timeout=30)`).

TypedDicts unpacked into `**options` (PEP 692): the type checker knows each keyword and
its type; at run time an unknown keyword is a TypeError (`check_options`), as it is for
an ordinary signature.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Generic, TypedDict

from interpreters.core.cancel import CancelSignal
from interpreters.core.trace import Trace
from pipeline.approval import Resumption
from pipeline.tools.context import Deps as Deps
from pipeline.values.messages import JsonObject


class ContextScope(TypedDict, total=False):
    """Whom and what a run is for: kept in its `RunContext`, which every hook reads."""

    thread_id: str | None
    resource_id: str | None
    values: JsonObject | None


class DurableScope(ContextScope, total=False):
    """The options of a durable run (`interpreters.durable.dbos.runs`): all of them are stored
    with the run, so no signal; `timeout` in seconds."""

    timeout: float | None
    deps: object
    """Dependencies stored with the run (msgspec-encodable: a Struct, a dict...), decoded
    as the type its tools ask for; live ones come from `DurableRuns(deps=factory)`."""


class RunScope(ContextScope, Generic[Deps], total=False):
    """A run's context options and its dependencies."""

    deps: Deps
    """The run's dependencies, handed to tools that ask for a `ToolContext`."""
    resume: Resumption | None
    """Go on with a suspended run (`pipeline.approval.resumption`): its messages are the
    input (the `messages` given are not read), under its run id."""


class TracedScope(RunScope[Deps], Generic[Deps], total=False):
    """A run's scope and the `Trace` that records its commands, effects and chunks."""

    trace: Trace | None


class CancellableScope(RunScope[Deps], Generic[Deps], total=False):
    """A run's scope, and what cancels it: `signal.cancel(reason)` or `timeout` seconds."""

    signal: CancelSignal | None
    timeout: float | None


class RunOptions(CancellableScope[Deps], TracedScope[Deps], Generic[Deps], total=False):
    """Every option of a run (`SyncInterpreter` and `AsyncInterpreter`)."""


def keys_of(options: type[ContextScope]) -> frozenset[str]:
    """The keywords of an options TypedDict (its own and inherited)."""
    return frozenset(options.__annotations__)


RUN_OPTIONS = keys_of(RunOptions)


def check_options(options: Mapping[str, object], allowed: frozenset[str] = RUN_OPTIONS) -> None:
    """TypeError for a keyword that is not one of `allowed` (a misspelt `thred_id` would
    otherwise be dropped without a word); ValueError for a bad `timeout`."""
    if not options:  # the common case, without a set per run
        return
    unknown = options.keys() - allowed
    if unknown:
        raise TypeError(
            f"unexpected run option(s) {', '.join(sorted(unknown))}; "
            f"the options are {', '.join(sorted(allowed))}"
        )
    timeout = options.get("timeout")
    if timeout is not None and not (isinstance(timeout, int | float) and timeout >= 0):
        raise ValueError(f"timeout must be a number of seconds >= 0, got {timeout!r}")
