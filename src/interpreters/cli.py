"""The `pipeline` command: `pipeline demo` (the simulator) and `pipeline run` (a real model)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="pipeline", description="LLM agents shaped by pure processors."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="run a small agent on the simulator and stream it")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from interpreters.demo import run_demo

        return run_demo()
    parser.error(f"unknown command {args.command}")
    return 2  # pragma: no cover - parser.error exits


if __name__ == "__main__":
    sys.exit(main())
