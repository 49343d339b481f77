"""The studio's eval pages: the reports an experiment wrote (`Report.write`, `pipeline
eval --json`), one report's scorers and cases (each case linked to its recorded run when
the studio holds its journal), and what changed between two reports of the same cases
(or the two sides of a comparison `compare_agents` wrote).

A report is read whole, up to `MAX_REPORT_BYTES`; every answer is bounded (the files
listed, the cases per page, the characters of a text), as the rest of the studio's.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path

import msgspec

from interpreters.evals.report import CaseResult, Comparison, Report
from interpreters.evals.scores import Score

MAX_REPORT_BYTES = 16 << 20
"""The largest report file read (some 10,000 cases with their answers)."""
MAX_FILES = 1000
"""The `.json` files a listing looks at (the newest first)."""
MAX_TEXT = 2000
"""Characters of an answer or a reason shown."""

Json = object
"""A value made of dicts, lists, strings, numbers, bools and None."""

_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,254}")


class NoSuchReport(LookupError):
    """No eval report of that name in the studio's reports directory."""


class NotAReport(ValueError):
    """A file that is no eval report (nor a comparison), or one too large to read."""


def _cut(text: str, n: int = MAX_TEXT) -> str:
    return text if len(text) <= n else text[:n] + f"\u2026 ({len(text) - n} more characters)"


def _score(s: Score) -> dict[str, Json]:
    return {"scorer": s.scorer, "verdict": s.verdict, "value": s.value, "label": s.label,
            "reason": _cut(s.reason, 500)}


class EvalReports:
    """The reports in `directory`; the journals of their runs in `journals`."""

    def __init__(self, directory: Path, journals: Path) -> None:
        self.directory = directory
        self.journals = journals

    def _path(self, name: str) -> Path:
        if not _NAME.fullmatch(name) or name.startswith("."):
            raise NoSuchReport(name)
        path = self.directory / f"{name}.json"
        try:
            if not stat.S_ISREG(path.lstat().st_mode):  # not a symlink out of the folder
                raise NoSuchReport(name)
        except FileNotFoundError:
            raise NoSuchReport(name) from None
        return path

    def read(self, name: str) -> Report | Comparison:
        """The report (or comparison) `name`; `NotAReport` for any other file."""
        path = self._path(name)
        with path.open("rb") as f:
            data = f.read(MAX_REPORT_BYTES + 1)
        if len(data) > MAX_REPORT_BYTES:
            raise NotAReport(f"{name}.json is over {MAX_REPORT_BYTES} bytes")
        try:
            return msgspec.json.decode(data, type=Report)
        except msgspec.DecodeError:
            pass
        try:
            return msgspec.json.decode(data, type=Comparison)
        except msgspec.DecodeError:
            raise NotAReport(f"{name}.json is not an eval report") from None

    def listing(self, offset: int, limit: int) -> dict[str, Json]:
        """The reports and comparisons of the directory, the newest first; other JSON
        files are left out."""
        found: list[tuple[float, str]] = []
        truncated = False
        if self.directory.is_dir():
            with os.scandir(self.directory) as it:
                for entry in it:
                    name = entry.name
                    if not (name.endswith(".json") and _NAME.fullmatch(name[:-5])
                            and entry.is_file(follow_symlinks=False)):
                        continue
                    if len(found) >= MAX_FILES:
                        truncated = True
                        break
                    found.append((entry.stat(follow_symlinks=False).st_mtime, name[:-5]))
        found.sort(key=lambda f: (-f[0], f[1]))
        items: list[Json] = []
        for mtime, name in found:
            try:
                read = self.read(name)
            except (NotAReport, NoSuchReport, OSError):
                continue
            items.append({"name": name, "modified": mtime, **_headline(read)})
        return {"offset": offset, "limit": limit, "total": len(items),
                "truncated": truncated, "items": items[offset:offset + limit]}

    def report(self, name: str, offset: int, limit: int) -> dict[str, Json]:
        """One report: its scorers against their thresholds and a page of its cases; a
        comparison: what changed between its two sides."""
        read = self.read(name)
        if isinstance(read, Comparison):
            diverged = {c.case: c.divergence for c in read.changes if c.divergence}
            return {"name": name, "kind": "comparison", **self._diff(
                read.before, read.after, offset, limit, diverged)}
        cases = [self._case(c) for c in read.cases[offset:offset + limit]]
        return {"name": name, "kind": "report", **_headline(read),
                "summaries": [{"scorer": s.scorer, "passed": s.passed, "failed": s.failed,
                               "could_not_judge": s.could_not_judge, "rate": s.rate,
                               "threshold": s.threshold, "ok": s.ok, "mean": s.mean}
                              for s in read.summaries],
                "scorers": [s.scorer for s in read.summaries],
                "failures": [_cut(f, 500) for f in read.failures()[:50]],
                "page": {"offset": offset, "limit": limit, "total": len(read.cases)},
                "cases": cases}

    def diff(self, before: str, after: str, offset: int, limit: int) -> dict[str, Json]:
        """What changed from report `before` to report `after`, case by case."""
        a, b = self.read(before), self.read(after)
        if not (isinstance(a, Report) and isinstance(b, Report)):
            raise NotAReport("a comparison is compared already: open it on its own")
        return {"before_name": before, "after_name": after,
                **self._diff(a, b, offset, limit, {})}

    def _journal(self, run_id: str) -> str | None:
        """The studio's journal of a case's run, when it holds it."""
        if not run_id or not _NAME.fullmatch(run_id):
            return None
        return run_id if (self.journals / f"{run_id}.ndjson").is_file() else None

    def _case(self, c: CaseResult) -> dict[str, Json]:
        o = c.outcome
        return {
            "case": c.case, "tags": list(c.tags), "passed": c.passed,
            "status": "could not run" if o is None else o.status,
            "text": _cut(o.text if o is not None else (c.error or "")),
            "tools": [t.name for t in o.tool_calls][:50] if o is not None else [],
            "cost": str(o.cost.total) if o is not None and o.cost is not None else None,
            "steps": o.steps if o is not None else None,
            "divergence": _cut(o.divergence, 500) if o is not None and o.divergence else None,
            "journal": self._journal(o.run_id) if o is not None else None,
            "scores": [_score(s) for s in c.scores],
        }

    def _diff(self, before: Report, after: Report, offset: int, limit: int,
              diverged: Mapping[str, str]) -> dict[str, Json]:
        names = [s.scorer for s in after.summaries]
        names += [s.scorer for s in before.summaries if s.scorer not in names]
        old = {c.case: c for c in before.cases}
        new = {c.case: c for c in after.cases}
        order = [c.case for c in after.cases] + [c.case for c in before.cases
                                                 if c.case not in new]
        rows: list[dict[str, Json]] = []
        for case in order:
            a, b = old.get(case), new.get(case)
            verdicts = [{"scorer": n, "before": _verdict(a, n), "after": _verdict(b, n)}
                        for n in names]
            regressed = any(v["before"] == "pass" and v["after"] not in ("pass", "-")
                            for v in verdicts)
            row_a = self._case(a) if a is not None else None
            row_b = self._case(b) if b is not None else None
            changed = (a is None or b is None or regressed
                       or any(v["before"] != v["after"] for v in verdicts)
                       or (row_a is not None and row_b is not None
                           and (row_a["status"], row_a["text"], row_a["tools"])
                           != (row_b["status"], row_b["text"], row_b["tools"])))
            rows.append({"case": case, "changed": changed, "regressed": regressed,
                         "divergence": _cut(diverged[case], 500) if case in diverged else None,
                         "scores": verdicts, "before": row_a, "after": row_b})
        summaries = {s.scorer: s for s in before.summaries}
        return {
            "before": _headline(before), "after": _headline(after),
            "scorers": [{"scorer": s.scorer, "after": s.rate, "after_ok": s.ok,
                         "before": summaries[s.scorer].rate if s.scorer in summaries else None}
                        for s in after.summaries],
            "changed": sum(1 for r in rows if r["changed"]),
            "regressed": sum(1 for r in rows if r["regressed"]),
            "page": {"offset": offset, "limit": limit, "total": len(rows)},
            "cases": rows[offset:offset + limit],
        }


def _verdict(c: CaseResult | None, scorer: str) -> str:
    if c is None:
        return "-"
    if c.error is not None:
        return "could not run"
    s = c.score(scorer)
    return s.verdict if s is not None else "-"


def _headline(r: Report | Comparison) -> dict[str, Json]:
    if isinstance(r, Comparison):
        return {"kind": "comparison", "experiment": r.after.experiment,
                "dataset": r.after.dataset, "agent": f"{r.before.agent} \u2192 {r.after.agent}",
                "ok": r.ok, "cases": len(r.changes), "passed": len(r.changes) - len(
                    r.regressions), "cost": None, "currency": r.after.currency}
    return {"kind": "report", "experiment": r.experiment, "dataset": r.dataset,
            "agent": r.agent, "ok": r.ok, "cases": len(r.cases),
            "passed": sum(1 for c in r.cases if c.passed),
            "cost": str(r.cost) if r.cost is not None else None, "currency": r.currency}


__all__ = ["MAX_REPORT_BYTES", "EvalReports", "NoSuchReport", "NotAReport"]
