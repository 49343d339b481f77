"""The `pipeline` command: `pipeline demo` (the simulator), `pipeline run` (a real model)
and `pipeline replay` (a recorded run, offline)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TextIO


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="pipeline", description="LLM agents shaped by pure processors."
    )
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
    run.add_argument("--system", default="", help="instructions (a system message)")
    run.add_argument("--max-steps", type=int, default=1)
    replay = sub.add_parser("replay", help="replay a recorded run (a journal) offline")
    replay.add_argument("file", help="the NDJSON journal a Recorder wrote")
    replay.add_argument("--agent", help="module:name of the Agent to replay it with")
    args = parser.parse_args(argv)
    if args.command == "replay":
        from interpreters.replay_cli import replay_file

        return replay_file(args.file, args.agent)
    if args.command == "demo":
        from interpreters.demo import run_demo

        return run_demo()
    return run_model(args.model, args.prompt, base_url=args.base_url, system=args.system,
                     max_steps=args.max_steps)


def run_model(
    model: str,
    prompt: str,
    *,
    base_url: str | None = None,
    system: str = "",
    max_steps: int = 1,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Stream one run against a real provider; exit code 0 when it finished."""
    from interpreters.providers import ProviderConfigError, Resolver, provider_config
    from interpreters.sync import SyncInterpreter
    from pipeline import Agent, ErrorChunk, ReasoningDelta, TextDelta, Tripwire

    w, e = out or sys.stdout, err or sys.stderr
    try:
        # A missing key fails before any request.
        route = provider_config(model, base_url=base_url).route
    except ProviderConfigError as x:
        e.write(f"pipeline run: {x}\n")
        return 2
    # --base-url is for --model's route only: no other route's key is sent there.
    resolver = Resolver(base_urls={route: base_url} if base_url else None)
    try:
        agent = Agent.create(model, instructions=system or (), max_steps=max_steps)
        stream = SyncInterpreter(resolve=resolver).stream(agent, prompt)
        for chunk in stream:
            if isinstance(chunk, TextDelta):
                w.write(chunk.text)
            elif isinstance(chunk, ReasoningDelta):
                e.write(chunk.text)
            elif isinstance(chunk, ErrorChunk | Tripwire):
                w.flush()
                e.write(f"\npipeline run: {chunk}\n")
            w.flush()
        result = stream.result
    finally:
        resolver.close()
    w.write("\n")
    u = result.usage
    e.write(f"[{result.status}, {result.finish_reason}, "
            f"{u.input_tokens} in / {u.output_tokens} out tokens]\n")
    return 0 if result.status == "finished" else 1


if __name__ == "__main__":
    sys.exit(main())
