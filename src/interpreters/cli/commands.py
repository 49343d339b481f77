"""The `pipeline` command: `pipeline demo` (the simulator), `pipeline run` (a real model),
`pipeline replay` (a recorded run, offline), `pipeline studio` (recorded runs in a
browser) and `pipeline eval` (an eval suite, for CI).

Errors come out as one readable line on stderr (`pipeline run: ...`), never a repr or a
traceback; an HTTP 404 names the URL that was called, since a base URL without its
`/v1` is the usual cause.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TextIO, TypeVar

if TYPE_CHECKING:
    from pipeline.values.result import RunResult

MAX_ERROR = 500
"""Characters of an error line at most (a provider may send a whole page back)."""


def _version() -> str:
    import pipeline

    return str(pipeline.__version__)  # the installed distribution's metadata


_N = TypeVar("_N", int, float)


def _number(parse: Callable[[str], _N], what: str, fits: Callable[[_N], bool],
            bound: str) -> Callable[[str], _N]:
    """An argparse type: `parse` of the text, which `fits` (argparse reports anything
    else in one line: "not <what>: 'x'" or "<bound>, got n")."""

    def read(text: str) -> _N:
        try:
            n = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
        if not fits(n):
            raise argparse.ArgumentTypeError(f"{bound}, got {n}")
        return n

    return read


_byte_count = _number(int, "a number of bytes", lambda n: n >= 0,
                      "a number of bytes is at least 0")
_port = _number(int, "a port number", lambda n: 0 <= n <= 65535, "a port is 0 to 65535")
_positive_int = _number(int, "a whole number", lambda n: n >= 1, "at least 1")
_seconds = _number(float, "a number of seconds", lambda n: n > 0, "more than 0 seconds")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="pipeline", description="LLM agents shaped by pure processors."
    )
    parser.add_argument("--version", action="version", version=f"pipeline {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="run a small agent on the simulator and stream it")
    run = sub.add_parser("run", help="stream a real model's answer to a prompt")
    run.add_argument("prompt", help="the user message")
    run.add_argument("--model", required=True,
                     help="router id: openai/gpt-4o-mini, anthropic/claude-sonnet-4-5, "
                          "ollama/qwen3, groq/..., openrouter/..., vllm/...")
    run.add_argument("--base-url",
                     help="the endpoint for --model's route (a local server); a model id "
                          "without a router prefix is then an OpenAI-compatible one")
    run.add_argument("--api-key",
                     help="the key for --model's route, sent to that route only (default: "
                          "its environment variable, e.g. OPENAI_API_KEY, which keeps the "
                          "key out of the process list)")
    run.add_argument("--system", default="", help="instructions (a system message)")
    run.add_argument("--max-steps", type=int, default=1)
    replay = sub.add_parser("replay", help="replay a recorded run (a journal) offline")
    replay.add_argument("file", help="the NDJSON journal a Recorder wrote")
    replay.add_argument("--agent", help="module:name of the Agent to replay it with")
    replay.add_argument("--price", metavar="PRICER",
                        help="price the replay: 'genai-prices', or module:name of a Pricer "
                             "(default: the costs the journal recorded)")
    replay.add_argument("--deps", metavar="MODULE:NAME",
                        help="the run's deps, for tools that take a ToolContext (a value, "
                             "or a function of no arguments returning one)")
    replay.add_argument("--max-bytes", type=_byte_count, default=None,
                        help="the largest journal file read (default 256 MiB)")
    studio = sub.add_parser("studio", help="show recorded runs (journals) in a local web page")
    studio.add_argument("directory", nargs="?", default="journals",
                        help="the directory a Recorder wrote its journals to (default: "
                             "journals)")
    studio.add_argument("--agent", help="module:name of an Agent: the page's playground "
                                        "chats with it, and runs replay against it")
    studio.add_argument("--model", metavar="MODULE:NAME",
                        help="the model the playground runs the agent on (a ScriptedModel, "
                             "say; default: the agent's own provider, its key from the "
                             "environment)")
    studio.add_argument("--deps", metavar="MODULE:NAME",
                        help="the runs' deps in a replay, for tools that take a ToolContext "
                             "(a value, or a function of no arguments returning one)")
    studio.add_argument("--evals", metavar="DIR",
                        help="where the eval reports are (Report.write, pipeline eval "
                             "--json); default: the journals' directory")
    studio.add_argument("--approvals", metavar="URL",
                        help="an approval store (sqlite:///runs.db, postgresql://...): the "
                        "Approvals page shows its audit trail")
    studio.add_argument("--host", default="127.0.0.1",
                        help="the address to serve on (loopback only, unless --allow-remote)")
    studio.add_argument("--port", type=_port, default=None,
                        help="the port (default 8765; 0: any free one)")
    studio.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                        help="a host name (or address) to answer to besides 127.0.0.1, "
                             "localhost, [::1] and --host; repeatable (a page of any other "
                             "name is refused: DNS rebinding)")
    studio.add_argument("--allow-remote", action="store_true",
                        help="serve on a non-loopback address (journals hold model output "
                             "and tool results: anyone who reaches it reads them)")
    _eval_parser(sub)
    args = parser.parse_args(argv)
    if args.command == "eval":
        from interpreters.cli.evals import run_eval

        return run_eval(
            args.dataset, args.agent, against=args.against, scorers=args.scorers,
            target=args.target, results=args.results, json_out=args.json,
            html_out=args.html, concurrency=args.concurrency, timeout=args.timeout,
            thresholds=args.threshold, rerun_diverged=args.rerun_diverged, deps=args.deps,
        )
    if args.command == "studio":
        from interpreters.cli.studio import DEFAULT_PORT, serve

        return serve(args.directory, args.agent, args.host,
                     DEFAULT_PORT if args.port is None else args.port, args.allow_remote,
                     deps_spec=args.deps, allowed_hosts=tuple(args.allow_host),
                     model_spec=args.model, evals=args.evals,
                     approvals_url=args.approvals)
    if args.command == "replay":
        from interpreters.cli.replay import replay_file
        from interpreters.record.journal import MAX_JOURNAL_BYTES

        return replay_file(
            args.file, args.agent, price=args.price, deps=args.deps,
            max_bytes=MAX_JOURNAL_BYTES if args.max_bytes is None else args.max_bytes,
        )
    if args.command == "demo":
        from interpreters.cli.demo import run_demo

        return run_demo()
    return run_model(args.model, args.prompt, base_url=args.base_url, api_key=args.api_key,
                     system=args.system, max_steps=args.max_steps)


def _eval_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ev = sub.add_parser("eval", help="run an eval suite (exit 1 when a threshold fails)")
    ev.add_argument("dataset", help="module:name of a Suite or Dataset, a .json/.yaml "
                                    "dataset, or a directory of journals")
    ev.add_argument("--agent", required=True, help="module:name of the Agent to evaluate")
    ev.add_argument("--against", metavar="MODULE:NAME",
                    help="a changed Agent to compare with --agent (journals: replayed)")
    ev.add_argument("--scorers", metavar="MODULE:NAME", help="a list of Scorers (default: "
                    "the suite's; for a dataset file: the run finished)")
    ev.add_argument("--target", metavar="MODULE:NAME", help="where cases run (default: the "
                    "suite's; else real providers from the environment)")
    ev.add_argument("--results", metavar="FILE",
                    help="a SQLite file of finished cases: a run started again goes on")
    ev.add_argument("--json", metavar="FILE", help="write the report as JSON")
    ev.add_argument("--html", metavar="FILE", help="write the report as an HTML page")
    ev.add_argument("--concurrency", type=_positive_int, default=None,
                    help="cases at once (default: the suite's, 4)")
    ev.add_argument("--timeout", type=_seconds, default=None, help="seconds per case")
    ev.add_argument("--threshold", action="append", default=[], metavar="SCORER=RATE",
                    help="the share of cases a scorer must pass (0 to 1); repeatable")
    ev.add_argument("--deps", metavar="MODULE:NAME",
                    help="the runs' deps: a class (one per case), a function of the case, "
                         "or a value (default: the suite's)")
    ev.add_argument("--rerun-diverged", action="store_true",
                    help="journals: run a case the changed agent diverges on again on the "
                         "target (model calls)")


def run_model(
    model: str,
    prompt: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    system: str = "",
    max_steps: int = 1,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Stream one run against a real provider; exit code 0 when it finished."""
    w, e = out or sys.stdout, err or sys.stderr
    try:
        return _run(model, prompt, base_url, api_key, system, max_steps, w, e)
    except KeyboardInterrupt:
        e.write("\npipeline run: interrupted\n")
        return 130
    except Exception as x:  # anything unforeseen: one line, not a traceback
        text = str(x)
        e.write(f"pipeline run: {_one_line(type(x).__name__ + (': ' + text if text else ''))}\n")
        return 1


def _run(
    model: str,
    prompt: str,
    base_url: str | None,
    api_key: str | None,
    system: str,
    max_steps: int,
    w: TextIO,
    e: TextIO,
) -> int:
    from interpreters.providers import ProviderConfigError, Resolver, provider_config
    from interpreters.sync import SyncInterpreter
    from pipeline import Agent, TextDelta
    from pipeline.values import ReasoningDelta

    try:
        # A missing key fails before any request.
        cfg = provider_config(model, base_url=base_url, api_key=api_key)
    except ProviderConfigError as x:
        hint = " (or pass --api-key)" if "no API key" in str(x) else ""
        e.write(f"pipeline run: {_one_line(str(x))}{hint}\n")
        return 2
    route = cfg.route
    url = cfg.endpoint.url(cfg.codec().path(cfg.model, stream=True))
    # --base-url and --api-key are for --model's route only: no other route gets them.
    resolver = Resolver(
        base_urls={route: base_url} if base_url else None,
        api_keys={route: api_key} if api_key else None,
    )
    try:
        agent = Agent.create(model, instructions=system or (), max_steps=max_steps)
        stream = SyncInterpreter(resolve=resolver).stream(agent, prompt)
        for chunk in stream:
            if isinstance(chunk, TextDelta):
                w.write(chunk.text)
            elif isinstance(chunk, ReasoningDelta):
                e.write(chunk.text)
            w.flush()
        result = stream.result
    finally:
        resolver.close()
    w.write("\n")
    problem = _problem(result, url)
    if problem:
        e.write(f"pipeline run: {problem}\n")
    u = result.total_usage  # the judges' calls too (`judges=N` says how many)
    judges = f", judges={len(result.judges)}" if result.judges else ""
    e.write(f"[{result.status}, {result.finish_reason}, "
            f"{u.input_tokens} in / {u.output_tokens} out tokens{judges}]\n")
    return 0 if result.status == "finished" else 1


def _problem(result: RunResult, url: str) -> str | None:
    """Why the run did not finish, as one line; a failed call names the URL called."""
    from pipeline.values.result import ApiFailed, StreamFailed

    if result.tripwire is not None:
        t = result.tripwire
        return _one_line(f"blocked by processor {t.processor_id!r}: {t.reason}")
    error = result.error
    if error is None:
        return None
    line = _one_line(str(error))
    if isinstance(error, StreamFailed):
        line += f" (POST {url})"
    if isinstance(error, ApiFailed):
        line += f" (POST {url})"
        path = url.split("://", 1)[-1].partition("/")[2]
        if error.error.status == 404 and not path.startswith("v1/") and "/v1/" not in path:
            line += "; is /v1 missing from the base URL?"
    return line


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MAX_ERROR else line[: MAX_ERROR - 1] + "…"


if __name__ == "__main__":
    sys.exit(main())
