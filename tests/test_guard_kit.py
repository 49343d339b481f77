"""The guard conformance kit: `check_output_guard` passes the library's own PII guard
and catches a guard that checks each chunk alone (a value split over two chunks gets
through), one that leaks the value in its tripwire's reason, and one that fails open
when its judge fails."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Generator

import pytest

from effects import Continue, Replace
from interpreters.evals import GuardLeak, check_output_guard
from interpreters.testing import Say
from pipeline import (
    AskModel,
    Message,
    ModelAnswer,
    ModelRequest,
    OutputStepArgs,
    OutputStepResult,
    Processor,
    StreamArgs,
    StreamResult,
    TextDelta,
    TextPart,
    abort,
)
from pipeline.processors import PIIDetector

SECRET = "hunter2"


def test_the_builtin_pii_guard_passes() -> None:
    check_output_guard(lambda: [PIIDetector(strategy="redact")],
                       ["4111 1111 1111 1111", "ada@example.com"], examples=40)
    check_output_guard(PIIDetector(strategy="block"), ["4111 1111 1111 1111"], examples=20)


class PerChunk(Processor):
    """Redacts the secret in each chunk: a secret split over two chunks passes."""

    id = "per-chunk"

    def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
        if isinstance(args.part, TextDelta) and SECRET in args.part.text:
            return Replace(TextDelta(args.part.id, args.part.text.replace(SECRET, "***")))
        return Continue()


def test_a_guard_that_reads_each_chunk_alone_leaks() -> None:
    with pytest.raises(GuardLeak, match="the chunks the caller received"):
        check_output_guard(PerChunk(), [SECRET], examples=100)


class Telltale(Processor):
    """Stops the run, naming what it found: the reason reaches the caller."""

    id = "telltale"

    def process_output_step(self, args: OutputStepArgs[None]) -> OutputStepResult[None]:
        if SECRET in args.text:
            abort(f"found {SECRET}")
        return Continue()


def test_a_guard_whose_reason_quotes_the_value_leaks() -> None:
    with pytest.raises(GuardLeak, match=SECRET):
        check_output_guard(Telltale(), [SECRET], examples=50)


class OpenOnFailure(Processor):
    """Asks a judge whether the answer is safe; lets it through when the judge fails."""

    id = "fails-open"

    def process_output_step(
        self, args: OutputStepArgs[None]
    ) -> Generator[object, object, OutputStepResult[None]]:
        try:
            verdict = yield AskModel(ModelRequest(
                model="sim/judge", system=(),
                messages=(Message(id="j", role="user", parts=(TextPart(args.text),)),)))
        except Exception:
            return Continue()  # fails open: the defect the kit is for
        if isinstance(verdict, ModelAnswer) and verdict.text != "safe":
            abort("blocked")
        return Continue()


def test_a_guard_that_fails_open_when_its_judge_fails_leaks() -> None:
    with pytest.raises(GuardLeak):
        check_output_guard(OpenOnFailure(), [SECRET], judge_models=["sim/judge"],
                           judge=lambda r: Say("unsafe"), examples=60)


def test_without_hypothesis_the_kit_says_what_it_needs() -> None:
    code = (
        "import sys; sys.modules['hypothesis'] = None\n"
        "import interpreters.evals as e\n"
        "try:\n"
        "    e.check_output_guard\n"
        "except ImportError as x:\n"
        "    print(x)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    assert "needs hypothesis: pip install hypothesis" in out.stdout


def test_values_are_required() -> None:
    with pytest.raises(ValueError):
        check_output_guard(PerChunk(), [])
