"""A run that survives a crash: DBOS checkpoints every model call and tool call of it.

    python -m examples.durable_run                     # SQLite file runs.sqlite, here
    python -m examples.durable_run --crash             # dies after the tool ran...
    python -m examples.durable_run                     # ...and this picks the run up
    python -m examples.durable_run --db postgresql://user:pw@host/db   # scale-out store

The model is scripted (no network, no key) so the example runs anywhere; in your code,
pass a real provider (`interpreters.providers.Resolver()`...) instead. The run id is
yours: starting the same id again starts nothing and returns the same run.
"""

from __future__ import annotations

import argparse
import os
import sys

from interpreters.durable.dbos.runs import DurableRuns
from interpreters.testing import Say, ScriptedModel, call
from pipeline import Agent, ModelRequest, tool

RUN_ID = "order-1042"


def refund(order: str, cents: int) -> str:
    """Refund an order (a side effect that must not happen twice)."""
    print(f"REFUNDING {order}", file=sys.stderr)
    return f"refunded {cents} cents on {order}"


def script(request: ModelRequest) -> Say:
    if any(m.role == "tool" for m in request.messages):
        if os.environ.get("DURABLE_EXAMPLE_CRASH"):  # the refund is checkpointed by now
            os._exit(9)  # the process dies, like a SIGKILL: nothing is cleaned up
        return Say(["Done: ", "order 1042 ", "is refunded."])
    return Say(calls=[call("refund", order="1042", cents=1999)])


AGENT = Agent.create("support/model", tools=[tool(refund)])


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(prog="python -m examples.durable_run")
    p.add_argument("--db", default="sqlite:///runs.sqlite")
    p.add_argument("--crash", action="store_true", help="die after the tool ran")
    a = p.parse_args(argv)
    if a.crash:
        os.environ["DURABLE_EXAMPLE_CRASH"] = "1"
    runs = DurableRuns({"support": AGENT}, ScriptedModel(script), database_url=a.db)
    with runs:  # launch: resumes a run a crash left unfinished
        runs.start("support", "Please refund order 1042.", run_id=RUN_ID)
        for chunk in runs.chunks(RUN_ID, timeout=60):  # from the start, as they come
            print(type(chunk).__name__, file=sys.stderr)
        result = runs.result(RUN_ID, timeout=60)
    print(result.text)
    return result.text


if __name__ == "__main__":
    main()
