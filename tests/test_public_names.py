"""The public names: each names one thing across the packages, and every name the docs
import or mention is there (and exported, for the three packages' own names)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import warnings
from collections import defaultdict
from pathlib import Path
from types import ModuleType
from typing import TypeVar

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("effects", "pipeline", "interpreters")
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))


def _modules() -> list[ModuleType]:
    found: list[ModuleType] = []
    for name in PACKAGES:
        pkg = importlib.import_module(name)
        found.append(pkg)
        for info in pkgutil.walk_packages(pkg.__path__, f"{name}."):
            with warnings.catch_warnings():  # the old paths kept for a release warn
                warnings.simplefilter("ignore", DeprecationWarning)
                found.append(importlib.import_module(info.name))
    return found


MODULES = _modules()


def _defined(module: ModuleType) -> dict[str, object]:
    """The public classes and TypeVars a module defines (not those it imports)."""
    return {
        k: v for k, v in vars(module).items()
        if not k.startswith("_")
        and (inspect.isclass(v) or isinstance(v, TypeVar))
        and getattr(v, "__module__", None) == module.__name__
    }


def test_no_two_public_classes_share_a_name() -> None:
    homes: dict[str, list[str]] = defaultdict(list)
    for m in MODULES:
        for name, value in _defined(m).items():
            if inspect.isclass(value):
                homes[name].append(m.__name__)
    assert {n: ms for n, ms in homes.items() if len(ms) > 1} == {}


def test_no_type_variable_is_named_as_a_public_class() -> None:
    classes = {n for m in MODULES for n, v in _defined(m).items() if inspect.isclass(v)}
    typevars = {
        f"{m.__name__}.{n}" for m in MODULES for n, v in _defined(m).items()
        if isinstance(v, TypeVar) and n in classes
    }
    assert typevars == set()


def test_a_name_exported_twice_is_the_same_thing() -> None:
    things: dict[str, dict[int, str]] = defaultdict(dict)
    for m in MODULES:
        for name in getattr(m, "__all__", ()):
            things[name].setdefault(id(getattr(m, name)), m.__name__)
    assert {n: sorted(o.values()) for n, o in things.items() if len(o) > 1} == {}


def test_every_exported_name_exists() -> None:
    missing = [
        f"{m.__name__}.{name}" for m in MODULES for name in getattr(m, "__all__", ())
        if not hasattr(m, name)
    ]
    assert missing == []


FACES = (
    "pipeline", "pipeline.values", "pipeline.processors", "pipeline.protocol", "pipeline.loop",
    "pipeline.agents", "interpreters", "interpreters.testing", "interpreters.evals",
)
"""One namespace per audience: apps and processors (`pipeline`, its values and built-in
processors), interpreter writers (`pipeline.protocol`, `pipeline.loop`), running
(`interpreters`), tests (`interpreters.testing`) and evals (`interpreters.evals`)."""


def test_no_name_is_exported_by_two_faces() -> None:
    homes: dict[str, list[str]] = defaultdict(list)
    for face in FACES:
        for name in importlib.import_module(face).__all__:
            homes[name].append(face)
    assert {n: fs for n, fs in homes.items() if len(fs) > 1} == {}


def test_the_app_face_stays_small() -> None:
    import pipeline

    assert len(pipeline.__all__) <= 60
    assert len(set(pipeline.__all__)) == len(pipeline.__all__)


def test_every_face_has_its_api_page() -> None:
    pages = "\n".join(p.read_text() for p in (ROOT / "docs" / "api").glob("*.md"))
    assert [f for f in FACES if f"::: {f}\n" not in pages + "\n"] == []


def test_the_packages_export_what_their_users_need() -> None:
    import interpreters
    import interpreters.testing
    import pipeline
    import pipeline.protocol

    for name in ("Resolver", "AsyncResolver", "Recorder", "Journal", "Observer",
                 "RunOptions", "Handlers", "SyncInterpreter", "AsyncInterpreter",
                 "CancelSignal", "ReplayRun"):
        assert name in interpreters.__all__, name
    for name in ("Simulator", "AsyncSimulator", "ScriptedModel", "Say", "call"):
        assert name in interpreters.testing.__all__, name
        assert name not in interpreters.__all__, name  # a test writer's name
    # (what a loop is started from and a model call answered with, besides its commands)
    for name in ("AgentLoop", "ToolInvocation", "ToolOutcome", "EffectRecord",
                 "ModelEnded", "ModelFailed"):
        assert name in pipeline.protocol.__all__, name
        assert name not in pipeline.__all__, name  # an interpreter writer's name
    # (a pricer is a `PriceQuery -> Cost | None` any interpreter takes as `price=`)
    for name in ("Agent", "Processor", "ToolContext", "RunResult", "AskModel", "tool",
                 "Cost", "PriceQuery", "Pricer", "Continue", "Replace", "Abort", "ApprovedArgs",
                 "ApprovedResult"):
        assert name in pipeline.__all__, name


_IMPORT = re.compile(
    r"^\s*from\s+((?:effects|pipeline|interpreters)[\w.]*)\s+import\s+"
    r"(\([^)]*\)|[^\n]+)", re.M,
)
_MENTION = re.compile(r"`((?:effects|pipeline|interpreters)(?:\.\w+)*\.(?:[A-Z]\w*|\w+(?=\()))")
"""A class (`interpreters.Resolver`) or a call (`interpreters.providers.prices.genai_prices()`) the
docs name in code spans; lowercase dotted names without a call are often not Python
names (span attributes: `pipeline.judges.calls`)."""


def _doc_imports() -> list[tuple[str, str, str]]:
    """(doc, module, name) for each name a python block of the docs imports."""
    out: list[tuple[str, str, str]] = []
    for doc in DOCS:
        for block in re.findall(r"```python\n(.*?)```", doc.read_text(), re.S):
            for module, names in _IMPORT.findall(block):
                for part in names.strip("()").replace("\n", " ").split(","):
                    name = part.split("#")[0].split(" as ")[0].strip()
                    if name:
                        out.append((doc.name, module, name))
    return out


def _resolve(dotted: str) -> tuple[ModuleType, str] | None:
    """The deepest module of a dotted name, and the rest; None when nothing there."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        return module, ".".join(parts[cut:])
    return None


def _missing(module: ModuleType, rest: str) -> str | None:
    """Why `module`'s `rest` (a dotted attribute path) is not a public name, or None."""
    if not rest:
        return None
    head, *_ = rest.split(".")
    if head.startswith("_"):
        return "private"
    value: object = module
    for attr in rest.split("."):
        if not hasattr(value, attr):
            return "missing"
        value = getattr(value, attr)
    if module.__name__ in PACKAGES and head not in getattr(module, "__all__", ()):
        return "not exported"
    return None


def test_the_docs_import_only_public_names() -> None:
    imports = _doc_imports()
    assert len(imports) >= 10  # the blocks were read
    bad = []
    for doc, module_name, name in imports:
        module = importlib.import_module(module_name)
        why = _missing(module, name)
        if why is not None:
            bad.append(f"{doc}: from {module_name} import {name}: {why}")
    assert bad == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.name)
def test_the_names_the_docs_mention_exist(doc: Path) -> None:
    bad = []
    for dotted in sorted(set(_MENTION.findall(doc.read_text()))):
        found = _resolve(dotted)
        why = "missing" if found is None else _missing(*found)
        if why is not None:
            bad.append(f"{dotted}: {why}")
    assert bad == []
