"""What the commands load by name: the attribute `module:name` names."""

from __future__ import annotations

import importlib
import os
import sys
from typing import cast


def attribute(spec: str, option: str, error: type[Exception],
              wants: str = "module:name") -> object:
    """The attribute `module:name` names; `error` (the command's own usage error) when
    `spec` is not of that form or does not load."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise error(f"{option} wants {wants}, got {spec!r}")
    # As `python -m` does: a console script's path lacks the current directory, where the
    # user's own module (`--agent my_agents:support`) usually is.
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return cast(object, getattr(importlib.import_module(module_name), attr))
    except (ImportError, AttributeError) as e:
        raise error(f"cannot load {spec!r}: {e}") from e
