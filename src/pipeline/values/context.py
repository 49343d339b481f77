"""What every hook and tool can read of the run it is in: `RunContext`."""

from __future__ import annotations

from typing import Generic, TypeVar

import msgspec
from typing_extensions import TypeVar as DefaultTypeVar

from pipeline.values.messages import JsonObject

D = TypeVar("D")
Seen = DefaultTypeVar("Seen", covariant=True, default=object)
"""The deps a hook's args carry (`args.context.deps`): the agent's, for a processor typed
`Processor[Db]` (hooks taking `InputArgs[None, Db]`...); by default `object`."""


class RunContext(msgspec.Struct, Generic[Seen], frozen=True, kw_only=True):
    """Request-scoped values every hook can read (Mastra's requestContext)."""

    run_id: str
    thread_id: str | None = None
    resource_id: str | None = None
    values: JsonObject | None = None
    deps: Seen | None = None
    """The run's dependencies (`run(..., deps=...)`; None when the run was given none):
    typed in a `Processor[Db]`'s hooks, else read them typed with `deps_as`."""

    def deps_as(self, kind: type[D]) -> D:
        """The run's deps as a `kind`; TypeError when the run was given something else."""
        if not isinstance(self.deps, kind):
            raise TypeError(
                f"the run's deps are a {type(self.deps).__name__}, not a {kind.__name__}"
            )
        return self.deps
