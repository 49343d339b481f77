"""A field-by-field account of how two msgspec values differ (for assertion messages).

pytest shows two unequal Structs as two long reprs; this names each field that differs,
by its path (`result.messages[2].parts[0].text`), with both values.
"""

from __future__ import annotations

import msgspec

_MAX_LINES = 40


def struct_diff(left: object, right: object) -> list[str] | None:
    """The explanation for `left == right` failing, or None when neither is a Struct
    (pytest's own explanation is then used)."""
    if not (isinstance(left, msgspec.Struct) or isinstance(right, msgspec.Struct)):
        return None
    lines = [f"{type(left).__name__} != {type(right).__name__}: fields that differ:"]
    _diff(left, right, "", lines)
    if len(lines) > _MAX_LINES:
        lines = [*lines[:_MAX_LINES], f"... and {len(lines) - _MAX_LINES} more"]
    return lines


def _diff(left: object, right: object, path: str, out: list[str]) -> None:
    if left == right:
        return
    if (
        isinstance(left, msgspec.Struct)
        and type(left) is type(right)
    ):
        for f in left.__struct_fields__:
            _diff(getattr(left, f), getattr(right, f), f"{path}.{f}" if path else f, out)
        return
    if isinstance(left, tuple | list) and isinstance(right, tuple | list):
        if len(left) != len(right):
            out.append(f"  {path or '(value)'}: {len(left)} items != {len(right)} items")
        for i, (a, b) in enumerate(zip(left, right, strict=False)):
            _diff(a, b, f"{path}[{i}]", out)
        return
    if isinstance(left, dict) and isinstance(right, dict):
        for k in sorted(left.keys() | right.keys(), key=repr):
            _diff(left.get(k, "<missing>"), right.get(k, "<missing>"), f"{path}[{k!r}]", out)
        return
    out.append(f"  {path or '(value)'}: {left!r} != {right!r}")
