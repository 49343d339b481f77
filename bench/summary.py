"""The one JSON line a standalone benchmark prints last: its parameters, the machine's
load before and after, and its rows."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence


def summary(
    params: dict[str, object],
    timer: str,
    load: tuple[Sequence[float], Sequence[float]],
    started: float,
    rows: Sequence[dict[str, object]],
) -> str:
    """The summary line; `started` is the `time.perf_counter()` reading at the start."""
    return json.dumps({
        "params": params,
        "timer": timer,
        "loadavg_start": list(load[0]),
        "loadavg_end": list(load[1]),
        "python": sys.version.split()[0],
        "total_s": time.perf_counter() - started,
        "results": list(rows),
    })
