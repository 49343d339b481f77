"""Refuse to run on another distribution's `pipeline` or `effects`.

Both names are taken on PyPI too. Installed beside this library, such a package either
comes first on the path or, in the same site-packages, overwrites our `__init__.py`; then
`import pipeline` runs someone else's code and the first import of ours fails with a
puzzling "cannot import name". This check runs first in `import interpreters` and says
what happened and how to fix it instead (importing this module runs the check). Only the
standard library here: it runs before the packages it checks are imported.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

DISTRIBUTION = "pipeline-agents"
MARKER = f'__distribution__ = "{DISTRIBUTION}"'
"""The line our packages' `__init__.py` hold (and the attribute it sets)."""
CHECKED = ("effects", "pipeline")


class ShadowedPackageError(ImportError):
    """`pipeline` or `effects` is another distribution's package, not this library's."""


def refuse_shadowed(names: tuple[str, ...] = CHECKED) -> None:
    """ShadowedPackageError when a name would import a package that is not ours."""
    for name in names:
        where = _not_ours(name)
        if where is not None:
            raise ShadowedPackageError(_message(name, where), name=name)


def _not_ours(name: str) -> str | None:
    """Where the package `import name` loads is, when it is not ours; None when it is."""
    loaded = sys.modules.get(name)
    if loaded is not None:
        if getattr(loaded, "__distribution__", None) == DISTRIBUTION:
            return None
        return str(getattr(loaded, "__file__", None) or name)
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is None or spec.origin is None:
        return "nowhere (it is not installed)"
    try:
        source = Path(spec.origin).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return spec.origin
    return None if MARKER in source else spec.origin


def _message(name: str, where: str) -> str:
    import importlib.metadata  # (only on a failure: it costs a few MiB at every import)

    others = sorted(
        d for d in importlib.metadata.packages_distributions().get(name, ())
        if d.lower().replace("_", "-") != DISTRIBUTION
    )
    owner = (
        f"it belongs to the distribution {', '.join(repr(o) for o in others)}, "
        f"which also provides a top-level `{name}`"
        if others else "it is another package of that name"
    )
    uninstall = f"`pip uninstall {' '.join(others)}`" if others else f"remove that `{name}`"
    return (
        f"`import {name}` loads {where}, which is not the `{name}` of {DISTRIBUTION}: {owner}. "
        f"{DISTRIBUTION} needs its own `effects` and `pipeline` packages. Fix: "
        f"{uninstall}, then `pip install --force-reinstall {DISTRIBUTION}` (or install "
        f"{DISTRIBUTION} in a virtual environment of its own)."
    )


refuse_shadowed()  # on import: `interpreters/__init__` imports this module first
