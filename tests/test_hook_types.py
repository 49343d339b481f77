"""Per-hook return types make an illegal effect a mypy error (checked by running mypy)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mypy import api

HEADER = """
from effects import Continue, Replace, Retry, Skip, Abort, AskApproval, SkipCall
from pipeline import (Processor, InputArgs, InputResult, StreamArgs, StreamResult,
    ApiErrorArgs, ApiErrorResult, OutputStepArgs, OutputStepResult, MessageList, processor,
    FlushArgs, FlushResult, TextDelta, ToolCallArgs, ToolCallResult,
    ToolResultArgs, ToolResultResult)
from pipeline.values import TextEnd
"""

LEGAL = HEADER + """
class Ok(Processor):
    id = "ok"
    def process_input(self, args: InputArgs[None]) -> InputResult[None]:
        return Replace(args.message_list)
    def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
        return Skip()
    def process_output_step(self, args: OutputStepArgs[None]) -> OutputStepResult[None]:
        return Abort("x", retry=True)

class Recover(Processor):
    id = "recover"
    def process_api_error(self, args: ApiErrorArgs[None]) -> ApiErrorResult[None]:
        return Retry(args.message_list)

def fn(args: StreamArgs[None]) -> StreamResult[None]:
    return Continue()
p = processor("p", process_output_stream=fn)

class Holds(Processor):
    id = "holds"
    def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
        if isinstance(args.part, TextEnd):
            return Replace((TextDelta(args.part.id, "released"), args.part))
        if isinstance(args.part, TextDelta):
            return Replace(())
        return Replace(args.part)
    def flush_output_stream(self, args: FlushArgs[None]) -> FlushResult[None]:
        return Replace((TextDelta("t", "released"),))

class Gate(Processor):
    id = "gate"
    def process_tool_call(self, args: ToolCallArgs[None]) -> ToolCallResult[None]:
        if args.tool.name == "delete":
            return AskApproval("delete?")
        if args.tool.name == "cached":
            return SkipCall("cached result")
        return Replace({**args.args, "dry_run": True})
    def process_tool_result(self, args: ToolResultArgs[None]) -> ToolResultResult[None]:
        return Replace({"wrapped": args.result})
"""

ILLEGAL = {
    "skip from process_output_step": """
class Bad(Processor):
    id = "bad"
    def process_output_step(self, args: OutputStepArgs[None]) -> OutputStepResult[None]:
        return Skip()
""",
    "retry from a stream hook": """
class Bad(Processor):
    id = "bad"
    def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
        return Retry()
""",
    "override with a wider return type": """
class Bad(Processor):
    id = "bad"
    def process_input(self, args: InputArgs[None]) -> Skip:
        return Skip()
""",
    "replace with the wrong payload": """
class Bad(Processor):
    id = "bad"
    def process_input(self, args: InputArgs[None]) -> InputResult[None]:
        return Replace("not a message list")
""",
    "replace a chunk with a tuple of strings": """
class Bad(Processor):
    id = "bad"
    def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
        return Replace(("not", "chunks"))
""",
    "replace a chunk with a list of chunks": """
class Bad(Processor):
    id = "bad"
    def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
        return Replace([args.part])
""",
    "flush releasing one bare chunk": """
class Bad(Processor):
    id = "bad"
    def flush_output_stream(self, args: FlushArgs[None]) -> FlushResult[None]:
        return Replace(TextDelta("t", "x"))
""",
    "skip from a flush": """
class Bad(Processor):
    id = "bad"
    def flush_output_stream(self, args: FlushArgs[None]) -> FlushResult[None]:
        return Skip()
""",
    "approval asked from process_tool_result": """
class Bad(Processor):
    id = "bad"
    def process_tool_result(self, args: ToolResultArgs[None]) -> ToolResultResult[None]:
        return AskApproval("too late")
""",
    "a stream Skip from process_tool_call": """
class Bad(Processor):
    id = "bad"
    def process_tool_call(self, args: ToolCallArgs[None]) -> ToolCallResult[None]:
        return Skip()
""",
    "tool-call arguments replaced by a string": """
class Bad(Processor):
    id = "bad"
    def process_tool_call(self, args: ToolCallArgs[None]) -> ToolCallResult[None]:
        return Replace("not an object")
""",
    "a skipped call from process_output_step": """
class Bad(Processor):
    id = "bad"
    def process_output_step(self, args: OutputStepArgs[None]) -> OutputStepResult[None]:
        return SkipCall("x")
""",
    "function processor returning Skip from process_input": """
def fn(args: InputArgs[None]) -> Skip:
    return Skip()
p = processor("p", process_input=fn)
""",
}


def _mypy(tmp_path: Path, source: str) -> tuple[str, int]:
    f = tmp_path / "case.py"
    f.write_text(source)
    out, err, status = api.run(
        ["--strict", "--no-incremental", "--cache-dir", str(tmp_path / ".c"), str(f)]
    )
    return out + err, status


@pytest.mark.slow  # runs mypy
def test_legal_effects_type_check(tmp_path: Path) -> None:
    out, status = _mypy(tmp_path, LEGAL)
    assert status == 0, out


@pytest.mark.slow  # runs mypy
def test_each_illegal_effect_is_a_type_error(tmp_path: Path) -> None:
    # All cases in one file (one mypy run); each must have an error within its lines.
    source = HEADER
    spans: dict[str, range] = {}
    for i, (case, body) in enumerate(sorted(ILLEGAL.items())):
        first = source.count("\n") + 1
        source += body.replace("class Bad", f"class Bad{i}").replace("p = ", f"p{i} = ")
        spans[case] = range(first, source.count("\n") + 1)
    out, status = _mypy(tmp_path, source)
    assert status == 1, out
    error_lines = {
        int(m.group(1)) for m in re.finditer(r"case\.py:(\d+): error", out)
    }
    missed = [case for case, span in spans.items() if not error_lines & set(span)]
    assert missed == [], out


def test_the_runtime_checks_are_read_off_the_effect_aliases() -> None:
    """ALLOWED_EFFECTS and REPLACE_PAYLOAD are derived from the hook effect aliases, so
    the run-time check and the type checker always agree on what a hook may return."""
    from typing import get_args

    from effects import Abort, Continue, Emit, Replace, Retry, Skip
    from pipeline.processor import (
        ALLOWED_EFFECTS,
        HOOK_EFFECTS,
        HOOKS,
        REPLACE_PAYLOAD,
        Processor,
        StepChange,
    )
    from pipeline.values.chunks import Chunk
    from pipeline.values.messages import MessageList

    assert set(HOOK_EFFECTS) == set(HOOKS)
    assert all(callable(getattr(Processor, h)) for h in HOOKS)
    assert ALLOWED_EFFECTS["process_api_error"] == (Continue, Retry, Abort)
    assert ALLOWED_EFFECTS["process_output_stream"] == (Continue, Replace, Skip, Emit, Abort)
    assert REPLACE_PAYLOAD["process_input_step"] == (StepChange,)
    assert REPLACE_PAYLOAD["process_api_error"] == (MessageList, type(None))
    assert REPLACE_PAYLOAD["process_output_stream"] == (*get_args(Chunk), tuple)
