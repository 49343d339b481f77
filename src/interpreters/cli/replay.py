"""`pipeline replay FILE`: replay a recorded run offline (see `interpreters.record.journal`).

    pipeline replay journals/abc.ndjson                       # what the journal holds
    pipeline replay journals/abc.ndjson --agent app.agents:support
    pipeline replay journals/abc.ndjson --agent app.agents:support --price genai-prices

With `--agent module:name` (an `Agent`, or a function of no arguments returning one) the
run is replayed with that agent: its chunks are streamed as in the recorded run, and the
last line says whether the replay is identical to the recording or where it diverges
(exit code 0 only when identical). A replay makes no request and reads no key. A run
recorded with a pricer replays with the costs it recorded, unless `--price` names one
(`genai-prices`, or `module:name` of a Pricer) to price it again; `--deps module:name`
gives tools that take a `ToolContext` the run's dependencies.

The file must be a regular file of at most `--max-bytes` (256 MiB by default); anything
else (a device, a FIFO, a directory, a larger file) is refused with one line and exit
code 2, without being read; so is a line nested deeper than `MAX_ENTRY_DEPTH`. What a
journal holds is printed with its terminal control characters escaped (`\x1b`,
`\u202e`...): a journal is untrusted input.
"""

from __future__ import annotations

import sys
import unicodedata
from typing import TextIO, cast

from interpreters.cli.load import attribute
from interpreters.record.journal import MAX_JOURNAL_BYTES, Journal, JournalError
from interpreters.record.replay import replay_sync
from pipeline.agent import Agent
from pipeline.tools import check_deps
from pipeline.values.chunks import ErrorChunk, ReasoningDelta, TextDelta, Tripwire
from pipeline.values.cost import Pricer


class AgentNotFound(LookupError):
    """`--agent` does not name an Agent."""


def _attribute(spec: str, option: str, wants: str = "module:name") -> object:
    return attribute(spec, option, AgentNotFound, wants)


def load_agent(spec: str) -> Agent:
    """The agent `module:name` names (an Agent, or a function returning one)."""
    value = _attribute(spec, "--agent")
    if not isinstance(value, Agent) and callable(value):
        value = value()
    if not isinstance(value, Agent):
        raise AgentNotFound(f"{spec!r} is a {type(value).__name__}, not an Agent")
    return value


def load_value(spec: str, option: str) -> object:
    """The value `module:name` names (a function of no arguments: what it returns)."""
    value = _attribute(spec, option)
    if callable(value) and not isinstance(value, type):
        value = value()
    return value


def load_pricer(spec: str) -> Pricer:
    """`genai-prices` (the maintained price table), or the Pricer `module:name` names."""
    if spec == "genai-prices":
        from interpreters.providers.prices import genai_prices

        return genai_prices()
    value = _attribute(spec, "--price", "genai-prices or module:name")
    if not callable(value):
        raise AgentNotFound(f"{spec!r} is a {type(value).__name__}, not a Pricer")
    return cast(Pricer, value)


def escaped(text: str, *, keep: str = "") -> str:
    """`text` with control and format characters (terminal escapes, bidi overrides)
    written as `\\xNN` / `\\uNNNN`, but for those in `keep`."""
    out: list[str] = []
    for c in text:
        if c not in keep and unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp"):
            n = ord(c)
            out.append(f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000
                       else f"\\U{n:08x}")
        else:
            out.append(c)
    return "".join(out)


def _text(text: str) -> str:
    """Replayed text: escaped, but its lines and tabs kept."""
    return escaped(text, keep="\n\t")


def replay_file(
    path: str,
    agent_spec: str | None,
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
    max_bytes: int = MAX_JOURNAL_BYTES,
    price: str | None = None,
    deps: str | None = None,
) -> int:
    w, e = out or sys.stdout, err or sys.stderr
    try:
        journal = Journal.read(path, max_bytes=max_bytes)
    except (OSError, JournalError) as x:
        hint = " (--max-bytes to change the bound)" if "bound" in str(x) else ""
        e.write(f"pipeline replay: cannot read {escaped(path)}: {escaped(str(x))}{hint}\n")
        return 2
    h = journal.header
    end = journal.ended
    e.write(escaped(
        f"run {h.run_id}: agent {h.agent.name!r} on {h.agent.model}, processors "
        f"{list(h.agent.processors)}, tools {list(h.agent.tools)}; recorded status "
        f"{end.status if end is not None else 'unfinished'}, "
        f"{len(journal.commands())} commands"
        + (f", {len(runs)} child runs" if (runs := journal.runs()) else "")
    ) + "\n")
    if agent_spec is None:
        for c in journal.commands():
            w.write(f"{escaped(c.what)}\n")
        e.write("give --agent module:name to replay the run\n")
        return 0
    try:
        agent = load_agent(agent_spec)
    except AgentNotFound as x:
        e.write(f"pipeline replay: {escaped(str(x))}\n")
        return 2
    try:
        pricer = load_pricer(price) if price is not None else None
        run_deps = load_value(deps, "--deps") if deps is not None else None
    except AgentNotFound as x:
        e.write(f"pipeline replay: {escaped(str(x))}\n")
        return 2
    try:
        check_deps(agent.tools, run_deps)
    except TypeError as x:
        e.write(f"pipeline replay: {escaped(str(x))} (--deps module:name gives them)\n")
        return 2
    from interpreters.run.base import AsyncNotSupportedError

    try:
        run = replay_sync(journal, agent, price=pricer, deps=run_deps)
    except AsyncNotSupportedError as x:
        e.write(f"pipeline replay: {escaped(str(x))}\n")
        return 2
    for chunk in run.trace.chunks:
        if isinstance(chunk, TextDelta):
            w.write(_text(chunk.text))
        elif isinstance(chunk, ReasoningDelta):
            e.write(_text(chunk.text))
        elif isinstance(chunk, ErrorChunk | Tripwire):
            e.write(f"\n{escaped(str(chunk))}\n")
    w.write("\n")
    e.write(escaped(f"[{run.result.status}, {run.result.finish_reason}]") + "\n")
    if run.identical:
        e.write("identical to the recording\n")
        return 0
    if run.divergence is not None:
        e.write(f"diverges from the recording at {escaped(str(run.divergence))}\n")
    else:
        e.write("the same commands, but a different result\n")
    return 1
