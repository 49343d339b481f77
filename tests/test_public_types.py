"""The public API's types, as mypy sees them: what an agent's deps and output types and a
request's answer type let a caller write (tests/typing_cases/accepted.py type-checks)
and refuse (each `# E:` line of tests/typing_cases/rejected.py is an error, no other)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mypy import api

ROOT = Path(__file__).resolve().parent.parent
CASES = Path(__file__).resolve().parent / "typing_cases"
_ERROR = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+): error: (?P<message>.*)$")
_EXPECTED = re.compile(r"#\s*E:\s*(?P<text>.+)$")


def _mypy_errors(monkeypatch: pytest.MonkeyPatch) -> dict[tuple[str, int], str]:
    """mypy --strict over both case files, with the project's configuration: each
    error's (file name, line) and message."""
    monkeypatch.chdir(ROOT)
    out, err, _status = api.run([
        "--config-file", str(ROOT / "pyproject.toml"), "--strict", "--no-error-summary",
        "--show-absolute-path", str(CASES / "accepted.py"), str(CASES / "rejected.py"),
    ])
    assert not err, err
    errors: dict[tuple[str, int], str] = {}
    for line in out.splitlines():
        m = _ERROR.match(line)
        if m is not None:
            key = (Path(m["path"]).name, int(m["line"]))
            errors[key] = errors.get(key, "") + m["message"]
    return errors


def _expected() -> dict[int, str]:
    lines = (CASES / "rejected.py").read_text().splitlines()
    return {
        n: m["text"].strip()
        for n, line in enumerate(lines, start=1)
        if (m := _EXPECTED.search(line)) is not None
    }


@pytest.mark.slow
def test_the_public_types_accept_what_fits_and_refuse_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    errors = _mypy_errors(monkeypatch)
    assert {k: v for k, v in errors.items() if k[0] == "accepted.py"} == {}
    expected = _expected()
    assert len(expected) >= 8  # the marks were read
    got = {line: msg for (name, line), msg in errors.items() if name == "rejected.py"}
    assert sorted(got) == sorted(expected), got
    for line, text in expected.items():
        assert text in got[line], (line, got[line])


def test_the_accepted_cases_run_as_they_are_typed() -> None:
    from interpreters.testing import Say, ScriptedModel, Simulator
    from tests.typing_cases import accepted as cases

    sim = Simulator(ScriptedModel([Say('{"text": "hi"}'), Say("plain")]))
    typed = sim.run(cases.typed, "go", deps=cases.LocalDb()).result
    assert typed.output == cases.Answer("hi")
    audited = sim.run(cases.audited, "go", deps=cases.Db()).result
    assert (audited.status, audited.output) == ("finished", None)
    assert cases.audited.deps_type is cases.Db
    assert len(cases.handlers) == len(cases.async_handlers) == 1
