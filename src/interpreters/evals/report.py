"""What an experiment reports: per case, what the run did and its scores; per scorer, how
many passed against its threshold; the whole run's cost. As a terminal table
(`report.table()`), JSON for CI (`report.to_json()`) and a static HTML page
(`report.html()`, `report.write("out/")`). A comparison of two agents reports, per case,
what changed and the score deltas (`Comparison`).
"""

from __future__ import annotations

import html as _html
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path

import msgspec

from interpreters.evals.scores import Observed, Score, run_cost


class CaseResult(msgspec.Struct, frozen=True, kw_only=True):
    """One case of an experiment: what its run did (None: it could not run) and its
    scores."""

    case: str
    digest: str
    tags: tuple[str, ...] = ()
    outcome: Observed | None = None
    scores: tuple[Score, ...] = ()
    attempts: int = 1
    error: str | None = None
    """Why the case could not run (the target raised), else None."""

    @property
    def passed(self) -> bool:
        return self.error is None and all(s.passed for s in self.scores)

    def score(self, scorer: str) -> Score | None:
        return next((s for s in self.scores if s.scorer == scorer), None)


class ScorerSummary(msgspec.Struct, frozen=True, kw_only=True):
    """One scorer over the cases: passed, failed, could not judge; the share passed
    against its threshold (could-not-judge counts as not passed)."""

    scorer: str
    passed: int
    failed: int
    could_not_judge: int
    mean: float | None
    threshold: float
    ok: bool

    @property
    def rate(self) -> float:
        n = self.passed + self.failed + self.could_not_judge
        return self.passed / n if n else 1.0


def _add(a: Decimal | None, b: Decimal) -> Decimal:
    return b if a is None else a + b


class Report(msgspec.Struct, frozen=True, kw_only=True):
    """An experiment's results."""

    experiment: str
    dataset: str
    agent: str
    cases: tuple[CaseResult, ...]
    summaries: tuple[ScorerSummary, ...]
    cost: Decimal | None
    """The runs' and the judges' cost summed (`currency`), over the cases whose cost is
    known; `cost_unknown` says how many are not in it."""
    currency: str = "USD"
    cost_unknown: int = 0
    judge_cost: Decimal | None = None
    reused: int = 0
    """Cases whose result was taken from the results file (finished before)."""
    errors: int = 0

    @property
    def ok(self) -> bool:
        """Every scorer met its threshold and every case ran."""
        return self.errors == 0 and all(s.ok for s in self.summaries)

    def case(self, name: str) -> CaseResult:
        for c in self.cases:
            if c.case == name:
                return c
        raise KeyError(name)

    def failures(self) -> list[str]:
        """What fails the experiment, one line each."""
        out = [f"{s.scorer}: {s.passed}/{s.passed + s.failed + s.could_not_judge} passed "
               f"({s.rate:.0%}), threshold {s.threshold:.0%}"
               for s in self.summaries if not s.ok]
        out += [f"case {c.case}: could not run: {c.error}" for c in self.cases if c.error]
        return out

    def to_json(self) -> bytes:
        data = msgspec.to_builtins(self)
        assert isinstance(data, dict)
        data["ok"] = self.ok
        return msgspec.json.format(msgspec.json.encode(data), indent=2)

    def table(self, *, width: int = 100) -> str:
        return render_table(self, width=width)

    def html(self) -> str:
        return render_html(self)

    def write(self, directory: str | Path, *, name: str | None = None) -> tuple[Path, Path]:
        """Write `<name>.json` and `<name>.html` into `directory`; their paths."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        stem = name or _file_name(self.experiment)
        j, h = d / f"{stem}.json", d / f"{stem}.html"
        j.write_bytes(self.to_json() + b"\n")
        h.write_text(self.html())
        return j, h


def _file_name(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:80] or "report"


def summarize(
    results: Sequence[CaseResult], scorers: Sequence[str],
    thresholds: Mapping[str, float] | None = None, default_threshold: float = 1.0,
) -> tuple[ScorerSummary, ...]:
    out: list[ScorerSummary] = []
    th = thresholds or {}
    for name in scorers:
        got = [s for r in results for s in r.scores if s.scorer == name]
        p = sum(1 for s in got if s.verdict == "pass")
        f = sum(1 for s in got if s.verdict == "fail")
        u = sum(1 for s in got if s.verdict == "could-not-judge")
        values = [s.value for s in got if s.value is not None]
        t = th.get(name, default_threshold)
        n = p + f + u
        out.append(ScorerSummary(
            scorer=name, passed=p, failed=f, could_not_judge=u,
            mean=sum(values) / len(values) if values else None, threshold=t,
            ok=(p / n if n else 1.0) >= t,
        ))
    return tuple(out)


def costs(results: Sequence[CaseResult]) -> tuple[Decimal | None, str, int, Decimal | None]:
    """The summed cost, its currency, how many cases' cost is unknown, the judges' part."""
    total: Decimal | None = None
    judges: Decimal | None = None
    currency = "USD"
    unknown = 0
    for r in results:
        o = r.outcome
        cost = run_cost(o) if o is not None else None
        known = cost is not None
        for s in r.scores:
            if s.usage is not None and s.usage.total_tokens:
                if s.cost is None:
                    known = False
                else:
                    judges = _add(judges, s.cost.total)
        if not known or cost is None:
            unknown += 1
            continue
        if cost.total:
            currency = cost.currency
        total = _add(total, cost.total + sum(
            (s.cost.total for s in r.scores if s.cost is not None), Decimal(0)))
    return total, currency, unknown, judges


# --- rendering ----------------------------------------------------------------------------


def _cell(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "\u2026"


def _mark(s: Score | None) -> str:
    if s is None:
        return "-"
    return {"pass": "ok", "fail": "FAIL", "could-not-judge": "??"}[s.verdict]


def render_table(report: Report, *, width: int = 100) -> str:
    names = [s.scorer for s in report.summaries]
    case_w = max([4, *(len(c.case) for c in report.cases)])
    case_w = min(case_w, 32)
    cols = [min(max(len(n), 4), 14) for n in names]
    lines = [f"{report.dataset} on {report.agent} ({report.experiment})"]
    head = "case".ljust(case_w) + "  status     " + "  ".join(
        _cell(n, w).ljust(w) for n, w in zip(names, cols, strict=True))
    lines += [head, "-" * min(len(head), width)]
    for c in report.cases:
        status = "error" if c.error else (c.outcome.status if c.outcome else "-")
        row = _cell(c.case, case_w).ljust(case_w) + "  " + status.ljust(9) + "  " + "  ".join(
            _mark(c.score(n)).ljust(w) for n, w in zip(names, cols, strict=True))
        lines.append(row)
    lines.append("")
    for s in report.summaries:
        mean = f", mean {s.mean:.2f}" if s.mean is not None else ""
        lines.append(
            f"{'ok  ' if s.ok else 'FAIL'} {s.scorer}: {s.passed} passed, {s.failed} failed, "
            f"{s.could_not_judge} could not judge ({s.rate:.0%}, threshold "
            f"{s.threshold:.0%}{mean})")
    cost = (f"{report.cost} {report.currency}" if report.cost is not None else "unknown")
    extra = f" ({report.cost_unknown} case(s) without a known cost)" if (
        report.cost_unknown and report.cost is not None) else ""
    judges = f", judges {report.judge_cost}" if report.judge_cost is not None else ""
    lines.append(f"cost: {cost}{extra}{judges}; {len(report.cases)} cases, "
                 f"{report.reused} from the results file, {report.errors} could not run")
    for c in report.cases:
        for sc in c.scores:
            if not sc.passed:
                lines.append(f"  {c.case} / {sc.scorer}: {_mark(sc)} {_cell(sc.reason, 120)}")
        if c.error:
            lines.append(f"  {c.case}: could not run: {_cell(c.error, 120)}")
    lines.append("PASSED" if report.ok else "FAILED")
    return "\n".join(lines)


_CSS = """body{font:14px system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;
vertical-align:top;text-align:left}.pass{background:#e6f4ea}.fail{background:#fce8e6}
.could-not-judge{background:#fef7e0}.why{color:#555;font-size:12px;max-width:30em}
h1{font-size:20px}pre{white-space:pre-wrap;max-width:50em;margin:0}"""


def _e(text: object) -> str:
    return _html.escape(str(text), quote=True)


def render_html(report: Report) -> str:
    names = [s.scorer for s in report.summaries]
    rows = []
    for c in report.cases:
        o = c.outcome
        cells = []
        for n in names:
            s = c.score(n)
            if s is None:
                cells.append("<td>-</td>")
            else:
                val = f" {s.value:.2f}" if s.value is not None else ""
                lab = f" [{_e(s.label)}]" if s.label else ""
                cells.append(f'<td class="{s.verdict}">{_e(s.verdict)}{val}{lab}'
                             f'<div class="why">{_e(s.reason)}</div></td>')
        answer = _e(o.text[:600]) if o is not None else _e(c.error or "")
        calls = ", ".join(_e(t.name) for t in o.tool_calls) if o is not None else ""
        cost = _e(o.cost.total) if o is not None and o.cost is not None else "?"
        status = _e(o.status) if o is not None else "error"
        div = (f'<div class="why">diverges: {_e(o.divergence)}</div>'
               if o is not None and o.divergence else "")
        rows.append(f"<tr><td>{_e(c.case)}</td><td>{status}{div}</td><td><pre>{answer}</pre>"
                    f"</td><td>{calls}</td><td>{cost}</td>{''.join(cells)}</tr>")
    summary = "".join(
        f'<tr class="{"pass" if s.ok else "fail"}"><td>{_e(s.scorer)}</td><td>{s.passed}</td>'
        f"<td>{s.failed}</td><td>{s.could_not_judge}</td><td>{s.rate:.0%}</td>"
        f"<td>{s.threshold:.0%}</td></tr>" for s in report.summaries)
    head = "".join(f"<th>{_e(n)}</th>" for n in names)
    verdict = "PASSED" if report.ok else "FAILED"
    cost = f"{report.cost} {report.currency}" if report.cost is not None else "unknown"
    return (
        f"<!doctype html><html><head><meta charset=utf-8><title>{_e(report.experiment)}"
        f"</title><style>{_CSS}</style></head><body><h1>{_e(report.dataset)} on "
        f"{_e(report.agent)}: {verdict}</h1><p>experiment {_e(report.experiment)}; "
        f"{len(report.cases)} cases; cost {_e(cost)}</p><table><tr><th>scorer</th>"
        f"<th>passed</th><th>failed</th><th>could not judge</th><th>rate</th>"
        f"<th>threshold</th></tr>{summary}</table><table><tr><th>case</th><th>status</th>"
        f"<th>answer</th><th>tools</th><th>cost</th>{head}</tr>{''.join(rows)}</table>"
        "</body></html>\n"
    )


# --- comparisons ------------------------------------------------------------------------


class ScoreDelta(msgspec.Struct, frozen=True):
    scorer: str
    before: str
    after: str
    delta: float | None = None


class CaseChange(msgspec.Struct, frozen=True, kw_only=True):
    """What changed in one case between two agents."""

    case: str
    output: bool
    tool_calls: bool
    guards: bool
    status: bool
    cost_delta: Decimal | None = None
    scores: tuple[ScoreDelta, ...] = ()
    divergence: str | None = None
    """Where the changed agent's replay first went another way than the recording."""
    before_text: str = ""
    after_text: str = ""

    @property
    def changed(self) -> bool:
        """What the run did changed: its output, tool calls, guards' verdicts, status
        or a score (a replay can diverge, its stream delivered in other pieces, and
        still do the same)."""
        return (self.output or self.tool_calls or self.guards or self.status
                or any(d.before != d.after for d in self.scores))

    @property
    def regressed(self) -> bool:
        """A score that passed before does not now."""
        return any(d.before == "pass" and d.after != "pass" for d in self.scores)


class Comparison(msgspec.Struct, frozen=True, kw_only=True):
    """Two agents on the same cases: both reports and what changed per case."""

    before: Report
    after: Report
    changes: tuple[CaseChange, ...]
    replayed: bool = False

    @property
    def changed(self) -> tuple[CaseChange, ...]:
        return tuple(c for c in self.changes if c.changed)

    @property
    def diverged(self) -> tuple[CaseChange, ...]:
        """The replayed cases that went another way than their recording."""
        return tuple(c for c in self.changes if c.divergence is not None)

    @property
    def regressions(self) -> tuple[CaseChange, ...]:
        return tuple(c for c in self.changes if c.regressed)

    @property
    def ok(self) -> bool:
        """The changed agent meets its thresholds and no score regressed."""
        return self.after.ok and not self.regressions

    def to_json(self) -> bytes:
        data = msgspec.to_builtins(self)
        assert isinstance(data, dict)
        data["ok"] = self.ok
        return msgspec.json.format(msgspec.json.encode(data), indent=2)

    def table(self) -> str:
        lines = [f"{self.before.agent} -> {self.after.agent} on {self.after.dataset}"
                 f" ({'replayed' if self.replayed else 're-run'}): "
                 f"{len(self.changed)} of {len(self.changes)} cases changed, "
                 f"{len(self.regressions)} regressed"
                 + (f", {len(self.diverged)} diverged from their recording"
                    if self.replayed else "")]
        for c in self.changes:
            if not c.changed and c.divergence is None:
                continue
            what = [k for k in ("output", "tool_calls", "guards", "status") if getattr(c, k)]
            deltas = ", ".join(f"{d.scorer} {d.before}->{d.after}" for d in c.scores
                               if d.before != d.after)
            cost = f", cost {c.cost_delta:+}" if c.cost_delta else ""
            lines.append(f"  {c.case}: {', '.join(what) or 'same'}{cost}"
                         + (f"; {deltas}" if deltas else ""))
            if c.divergence:
                lines.append(f"    diverges at {_cell(c.divergence, 160)}")
        lines += ["", "before:", self.before.table(), "", "after:", self.after.table()]
        lines.append("PASSED" if self.ok else "FAILED")
        return "\n".join(lines)

    def html(self) -> str:
        rows = "".join(
            f"<tr class=\"{'fail' if c.regressed else 'pass' if not c.changed else ''}\">"
            f"<td>{_e(c.case)}</td><td>{_e(', '.join(k for k in ('output', 'tool_calls', 'guards', 'status') if getattr(c, k)))}</td>"  # noqa: E501
            f"<td>{_e(', '.join(f'{d.scorer} {d.before}->{d.after}' for d in c.scores if d.before != d.after))}</td>"  # noqa: E501
            f"<td>{_e(c.divergence or '')}</td><td><pre>{_e(c.before_text[:400])}</pre></td>"
            f"<td><pre>{_e(c.after_text[:400])}</pre></td></tr>"
            for c in self.changes)
        body = (f"<h1>{_e(self.before.agent)} &rarr; {_e(self.after.agent)}: "
                f"{'PASSED' if self.ok else 'FAILED'}</h1><table><tr><th>case</th>"
                f"<th>changed</th><th>scores</th><th>divergence</th><th>before</th>"
                f"<th>after</th></tr>{rows}</table>")
        after = render_html(self.after)
        return after.replace("<body>", f"<body>{body}<h2>after</h2>", 1)


__all__ = [
    "CaseChange", "CaseResult", "Comparison", "Report", "ScoreDelta", "ScorerSummary",
    "costs", "render_html", "render_table", "summarize",
]
