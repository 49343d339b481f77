"""The packages are layers: every import (at run time, under `TYPE_CHECKING`, or inside a
function) goes down this list or stays in its own package, and no modules import each
other in a circle. The pure core imports no I/O: no httpx, anyio, sqlite3, threading or
clock."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("effects",),
    ("pipeline.lazy",),
    ("pipeline.values",),
    ("pipeline.tools",),
    ("pipeline.processor",),
    ("pipeline.agent",),
    ("pipeline.definition",),
    ("pipeline.approval",),
    ("pipeline.agents",),
    ("pipeline.protocol", "pipeline.ui_stream", "pipeline.agui"),
    ("pipeline.loop", "pipeline.processors"),
    ("pipeline",),
    ("interpreters.core",),
    ("interpreters.providers",),
    ("interpreters.memory", "interpreters.observers"),
    ("interpreters.approvals", "interpreters.run"),
    ("interpreters.sync", "interpreters.aio", "interpreters.mcp_tools"),
    ("interpreters.record",),
    ("interpreters.sim", "interpreters.durable", "interpreters.a2a"),
    ("interpreters.evals",),
    ("interpreters.cli", "interpreters.testing"),
    # the face, and the old paths kept for one release
    ("interpreters", "interpreters.simulator", "interpreters.otel", "interpreters.prices",
     "interpreters.approvals_sql", "interpreters.pytest_plugin"),
)
"""Lowest first. A module belongs to the longest entry it is or is inside of; it may
import its own entry's modules and those of lower lines, nothing of its line's other
entries or of a higher line."""

PURE = ("effects", "pipeline")
NO_IO = {
    "httpx", "httpcore", "anyio", "sqlite3", "threading", "time", "datetime", "socket", "asyncio",
    "ssl", "selectors",
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {
    _module_name(p): p for p in SRC.rglob("*.py")
    if _module_name(p).split(".")[0] in {"effects", "pipeline", "interpreters"}
}


def _imports(name: str, path: Path) -> Iterator[str]:
    """Every module `name` imports, by absolute name (a name imported from a package
    that is one of its modules counts as that module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            for a in node.names:
                yield f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base


def _ours(imported: str) -> str | None:
    """The module of ours `imported` names (the nearest enclosing one), or None."""
    while imported and imported not in MODULES:
        imported = imported.rpartition(".")[0]
    return imported or None


def _place(module: str) -> tuple[int, str]:
    best: tuple[int, str] | None = None
    for rank, entries in enumerate(LAYERS):
        for entry in entries:
            if (module == entry or module.startswith(entry + ".")) and (
                best is None or len(entry) > len(best[1])
            ):
                best = (rank, entry)
    assert best is not None, f"{module} has no place in LAYERS"
    return best


GRAPH = {
    m: {o for i in _imports(m, p) if (o := _ours(i)) is not None and o != m}
    for m, p in MODULES.items()
}


def test_every_module_has_a_place_in_the_layers() -> None:
    for m in MODULES:
        _place(m)


def test_imports_only_go_down_the_layers() -> None:
    wrong = []
    for m, targets in sorted(GRAPH.items()):
        rank, entry = _place(m)
        for t in sorted(targets):
            t_rank, t_entry = _place(t)
            if t_rank > rank or (t_rank == rank and t_entry != entry):
                wrong.append(f"{m} ({entry}) imports {t} ({t_entry})")
    assert wrong == []


def test_no_modules_import_each_other_in_a_circle() -> None:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert circles == []


def test_the_pure_core_imports_no_io_threads_or_clock() -> None:
    found = []
    for m, p in MODULES.items():
        if m.split(".")[0] not in PURE:
            continue
        for i in _imports(m, p):
            if i.split(".")[0] in NO_IO:
                found.append(f"{m} imports {i}")
    assert found == []


def test_interpreters_reach_the_core_through_its_faces() -> None:
    """The protocol through `pipeline.protocol` and the loop through `pipeline.loop`, never
    a module inside either: an interpreter's writer has those two namespaces to read."""
    found = [
        f"{m} imports {t}" for m, targets in GRAPH.items() if m.startswith("interpreters")
        for t in targets if t.startswith(("pipeline.protocol.", "pipeline.loop."))
    ]
    assert found == []


def test_the_check_sees_what_it_checks() -> None:
    """The walk finds the imports it must judge: a test that finds nothing passes."""
    assert len(MODULES) > 150
    assert "pipeline.values.messages" in GRAPH["pipeline.loop.state"]
    assert "pipeline.protocol.replies" in GRAPH["pipeline.protocol.driver"]
    assert GRAPH["pipeline.values.messages"] <= set(MODULES)
