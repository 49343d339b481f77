"""The command line (`pipeline demo`, `pipeline replay`, `pipeline studio`)."""

from interpreters.cli.commands import main

__all__ = ["main"]
