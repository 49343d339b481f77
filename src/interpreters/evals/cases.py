"""Datasets: typed cases, written in code, read from a JSON (or YAML) file, or built from
recorded runs (a folder of journals), so production runs become regression cases.

    dataset = Dataset("support", (
        Case(name="refund-1042", input="Refund order 1042", tags=("refund",)),
        Case(name="triage", input="Charged twice!", expected={"category": "refund"}),
    ))
    dataset = Dataset.load("evals/support.json")          # or .yaml (PyYAML)
    dataset = dataset_from_journals("journals/", agent="support", status="finished")

A file holds `{"name": ..., "cases": [...]}`; each case is checked against the schema
on reading, and one that does not fit is a `DatasetError` naming the case and the field
(`case 'triage' (#2): Expected `str`, got `int` - at `$.input``), before anything runs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from types import ModuleType

import msgspec

from interpreters.record.journal import MAX_JOURNAL_BYTES, Journal, JournalError
from pipeline.values.messages import JsonObject, Message

MAX_DATASET_BYTES = 64 * 1024 * 1024
"""The largest dataset file `Dataset.load` reads."""


class DatasetError(ValueError):
    """A dataset that cannot be used: a file that is not one, or a case that does not fit
    the schema (the message names the case and the field)."""


class Case(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One case: the run's input, what it should give (optional), and what it is about.

    `input` is a prompt or the messages of a conversation; `expected` the output the
    scorers compare with (a text, or an object for a typed output). `journal` is the
    recorded run a case was built from (`dataset_from_journals`): a comparison replays it.
    """

    name: str
    input: str | tuple[Message, ...]
    expected: str | dict[str, object] | None = None
    metadata: dict[str, object] | None = None
    tags: tuple[str, ...] = ()
    journal: str | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise DatasetError("a case needs a name")
        if isinstance(self.input, str) and not self.input:
            raise DatasetError(f"case {self.name!r}: input is empty")

    def digest(self) -> str:
        """What identifies the case's content (a case changed under its name runs again)."""
        return hashlib.blake2b(msgspec.json.encode(self, order="sorted"),
                               digest_size=12).hexdigest()


class _File(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str
    cases: list[object]
    description: str = ""


class Dataset(msgspec.Struct, frozen=True):
    """Named cases (their names unique), in order."""

    name: str
    cases: tuple[Case, ...]
    description: str = ""

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for c in self.cases:
            if c.name in seen:
                raise DatasetError(f"dataset {self.name!r}: two cases are named {c.name!r}")
            seen.add(c.name)

    def __len__(self) -> int:
        return len(self.cases)

    def with_tags(self, *tags: str) -> Dataset:
        """The cases that have every one of `tags`."""
        want = set(tags)
        return Dataset(self.name, tuple(c for c in self.cases if want <= set(c.tags)),
                       self.description)

    def digest(self) -> str:
        h = hashlib.blake2b(digest_size=12)
        for c in self.cases:
            h.update(c.digest().encode())
        return h.hexdigest()

    def to_json(self) -> bytes:
        return msgspec.json.format(msgspec.json.encode(self), indent=2)

    def save(self, path: str | Path) -> None:
        """Write the dataset as JSON (or YAML for a `.yaml`/`.yml` path)."""
        p = Path(path)
        if p.suffix in (".yaml", ".yml"):
            yaml = _yaml()
            p.write_text(yaml.safe_dump(msgspec.to_builtins(self), sort_keys=False,
                                        allow_unicode=True))
        else:
            p.write_bytes(self.to_json() + b"\n")

    @classmethod
    def from_data(cls, data: object, *, source: str = "dataset") -> Dataset:
        """A dataset from decoded JSON/YAML: each case checked, a misfit named."""
        try:
            top = msgspec.convert(data, _File)
        except msgspec.ValidationError as e:
            raise DatasetError(f"{source}: {e}") from None
        cases: list[Case] = []
        for i, raw in enumerate(top.cases, 1):
            label = (f"case {raw.get('name')!r} (#{i})"
                     if isinstance(raw, dict) and isinstance(raw.get("name"), str)
                     else f"case #{i}")
            try:
                cases.append(msgspec.convert(raw, Case))
            except (msgspec.ValidationError, DatasetError) as e:
                raise DatasetError(f"{source}: {label}: {e}") from None
        try:
            return cls(top.name, tuple(cases), top.description)
        except DatasetError as e:
            raise DatasetError(f"{source}: {e}") from None

    @classmethod
    def load(cls, path: str | Path, *, max_bytes: int = MAX_DATASET_BYTES) -> Dataset:
        """Read a dataset file: JSON, or YAML for `.yaml`/`.yml` (needs PyYAML, the `evals`
        extra). DatasetError for a file that is not one, naming the case and the field."""
        p = Path(path)
        try:
            if p.stat().st_size > max_bytes:
                raise DatasetError(f"{p}: larger than {max_bytes} bytes")
            raw = p.read_bytes()
        except OSError as e:
            raise DatasetError(f"{p}: {e.strerror or e}") from None
        if p.suffix in (".yaml", ".yml"):
            yaml = _yaml()
            try:
                data: object = yaml.safe_load(raw)
            except yaml.YAMLError as e:
                raise DatasetError(f"{p}: not YAML: {e}") from None
        else:
            try:
                data = msgspec.json.decode(raw)
            except msgspec.DecodeError as e:
                raise DatasetError(f"{p}: not JSON: {e}") from None
        return cls.from_data(data, source=str(p))


def _yaml() -> ModuleType:
    try:
        import yaml
    except ImportError:
        raise DatasetError(
            "YAML datasets need PyYAML: pip install 'pipeline-agents[evals]' (or use JSON)"
        ) from None
    return yaml


# --- from recorded runs ----------------------------------------------------------------


def tags_of(values: JsonObject | None) -> tuple[str, ...]:
    """A run's tags: its `values["tags"]` (the strings of that list)."""
    tags = (values or {}).get("tags")
    if isinstance(tags, list | tuple):
        return tuple(t for t in tags if isinstance(t, str))
    return ()


def _when(t: float | datetime | None) -> float | None:
    return t.timestamp() if isinstance(t, datetime) else t


def dataset_from_journals(
    source: str | Path | Iterable[str | Path],
    *,
    name: str | None = None,
    agent: str | None = None,
    status: str | Sequence[str] | None = None,
    tags: Sequence[str] = (),
    since: float | datetime | None = None,
    until: float | datetime | None = None,
    limit: int | None = None,
    max_bytes: int = MAX_JOURNAL_BYTES,
) -> Dataset:
    """A case per recorded run (`Recorder("journals/")`): a folder of journals (or the
    journal files given), those of `agent` (its name), of a `status` (recorded end:
    "finished", "tripped"...; "unfinished" for a run that never ended), with every one
    of `tags` (the run's `values={"tags": [...]}`), started in `[since, until)`, oldest
    first, at most `limit`.

    Each case's input is the run's input messages and its `journal` the file, so a
    comparison replays it (`compare_agents`); `metadata` holds the run's id, agent, model,
    status and start time. A resumed run's journal (`<run>.resumed-<step>`) is part of
    another run and not a case. A file that is not a journal is a DatasetError naming it.
    """
    if isinstance(source, str | Path):
        folder = Path(source)
        if not folder.is_dir():
            raise DatasetError(f"{folder}: not a directory of journals")
        files = sorted(folder.glob("*.ndjson"))
        label = name or folder.name
    else:
        files = [Path(p) for p in source]
        label = name or "journals"
    statuses = {status} if isinstance(status, str) else set(status or ())
    lo, hi = _when(since), _when(until)
    found: list[tuple[float, Case]] = []
    for f in files:
        if ".resumed-" in f.name:
            continue
        try:
            j = Journal.read(f, max_bytes=max_bytes)
        except (OSError, JournalError) as e:
            raise DatasetError(f"{f}: not a journal: {e}") from None
        h = j.header
        if h.resume is not None:
            continue
        end = j.ended
        st = end.status if end is not None and end.status is not None else "unfinished"
        run_tags = tags_of(h.values)
        if agent is not None and h.agent.name != agent:
            continue
        if statuses and st not in statuses:
            continue
        if not set(tags) <= set(run_tags):
            continue
        if (lo is not None and h.at < lo) or (hi is not None and h.at >= hi):
            continue
        meta: dict[str, object] = {
            "run_id": h.run_id, "agent": h.agent.name, "model": h.agent.model,
            "status": st, "recorded_at": h.at,
        }
        if h.thread_id is not None:
            meta["thread_id"] = h.thread_id
        found.append((h.at, Case(
            name=f.stem, input=h.messages.messages, metadata=meta, tags=run_tags,
            journal=str(f),
        )))
    found.sort(key=lambda x: x[0])
    cases = tuple(c for _, c in found)
    return Dataset(label, cases[:limit] if limit is not None else cases)


def as_dataset(value: Dataset | Sequence[Case] | Mapping[str, object]) -> Dataset:
    """A dataset from a Dataset, cases, or decoded JSON."""
    if isinstance(value, Dataset):
        return value
    if isinstance(value, Mapping):
        return Dataset.from_data(dict(value))
    return Dataset("cases", tuple(value))


__all__ = [
    "MAX_DATASET_BYTES", "Case", "Dataset", "DatasetError", "as_dataset",
    "dataset_from_journals",
]
