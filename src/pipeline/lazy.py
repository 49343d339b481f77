"""Names a package exports but loads when first used (an optional extra's, or a heavy
module's, so that importing the package needs neither), and names that moved to another
module (found there, with a warning, for one release)."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(
    package: str, homes: Mapping[str, str], moved: Mapping[str, str] | None = None
) -> Callable[[str], Any]:
    """A module `__getattr__` for `package`: each of `homes` (name -> module) imported on
    first use and kept in the package's namespace, so later lookups are plain; each of
    `moved` (name -> its new module) found there with a `DeprecationWarning`."""
    moved = moved or {}

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            new = moved.get(name)
            if new is None:
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            warnings.warn(
                f"{package}.{name} moved to {new}.{name}; import it from there",
                DeprecationWarning,
                stacklevel=2,
            )
            return getattr(importlib.import_module(new), name)
        value = getattr(importlib.import_module(home), name)
        setattr(importlib.import_module(package), name, value)
        return value

    return __getattr__
