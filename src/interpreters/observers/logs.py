"""Standard `logging` for runs, on the `pipeline` logger.

- DEBUG: one line per command the loop yields (`run <id>: call openai/gpt-4o-mini
  (step 0, attempt 0, 3 messages)`), and the end of the run;
- WARNING: a transient failure retried after a wait, a processor asking for a retry
  (or recovering from an API error), an I/O request or tool runner that failed, and
  a run that ended fail-closed (tripped by a processor, or failed);
- INFO: a cancelled run.

Lines name commands, models, tools, processors and errors, never message content (pass
`content=True` to add chunks and tool results at DEBUG) and never an API key (each line
is scrubbed of the values of `*_API_KEY` environment variables). The real interpreters
log by default, once the application has configured logging (`logging.basicConfig()`,
or a handler on the `pipeline` logger); give `observers=[LogObserver(), ...]` to keep it
beside other observers.
"""

from __future__ import annotations

import logging
import os

from effects import Abort, Publish, Pull, Retry, Sleep
from interpreters.observers.observe import RunInfo, RunObserver, describe
from pipeline.protocol import EffectRecord, LoopCommand, RunCancelled
from pipeline.values.result import RunResult

log = logging.getLogger("pipeline")


class LogObserver:
    """Logs each run to the `pipeline` logger (see the module doc)."""

    def __init__(self, *, content: bool = False, logger: logging.Logger | None = None) -> None:
        self.content = content
        self.logger = logger or log

    def start(self, run: RunInfo) -> RunObserver | None:
        # Only when the application configured logging (a handler on the way up from
        # the logger): otherwise watching the run would cost it and print nothing.
        if not self.logger.isEnabledFor(logging.WARNING) or not self.logger.hasHandlers():
            return None
        return _RunLog(run, self.logger, self.content)


def _scrubber() -> tuple[str, ...]:
    return tuple(
        v for k, v in os.environ.items() if k.upper().endswith("_API_KEY") and len(v) >= 8
    )


class _RunLog(RunObserver):
    def __init__(self, run: RunInfo, logger: logging.Logger, content: bool) -> None:
        self.log = logger
        self.run_id = run.run_id
        self.debug = logger.isEnabledFor(logging.DEBUG)
        self.sees_stream = self.debug  # per-chunk lines only at DEBUG
        self.content = content
        self.max_retries = run.agent.max_processor_retries
        self.retries = 0
        self.secrets = _scrubber()

    def _emit(self, level: int, msg: str) -> None:
        for s in self.secrets:
            msg = msg.replace(s, "[redacted]")
        self.log.log(level, "run %s: %s", self.run_id, msg)

    def command(self, cmd: LoopCommand, at: float) -> None:
        if isinstance(cmd, Sleep):
            self._emit(logging.WARNING, f"transient failure, retrying in {cmd.seconds:g} s "
                                        f"({cmd.reason})")
        if self.debug:
            line = describe(cmd)[1]
            if self.content and isinstance(cmd, Pull | Publish):
                chunks = cmd.publish if isinstance(cmd, Pull) else cmd.chunks
                line += f" {list(chunks)!r}"
            self._emit(logging.DEBUG, line)

    def reply(self, cmd: LoopCommand, reply: object, at: float) -> None:
        if self.debug and self.content and not isinstance(cmd, Publish | Sleep):
            self._emit(logging.DEBUG, f"reply {reply!r}")

    def failed(self, cmd: LoopCommand, error: BaseException, at: float) -> None:
        if isinstance(error, RunCancelled):
            self._emit(logging.INFO, f"cancelled: {error.reason}")
        else:
            self._emit(logging.WARNING, f"{describe(cmd)[1]} failed: {type(error).__name__}")

    def effect(self, record: EffectRecord, at: float) -> None:
        e = record.effect
        if isinstance(e, Abort) and e.retry and record.hook == "process_output_step":
            if self.retries < self.max_retries:
                self.retries += 1
                self._emit(logging.WARNING, (
                    f"processor {record.processor_id!r} discarded the response, retry "
                    f"{self.retries} of {self.max_retries}: {e.reason}"
                ))
        elif isinstance(e, Retry):
            self._emit(logging.WARNING, (
                f"processor {record.processor_id!r} recovers from an API error: retrying"
            ))

    def end(self, result: RunResult | None, at: float) -> None:
        if result is None:
            self._emit(logging.INFO, "closed before it finished")
            return
        if result.status == "tripped" and result.tripwire is not None:
            t = result.tripwire
            self._emit(logging.WARNING,
                       f"tripped by processor {t.processor_id!r}: {t.reason}")
        elif result.status == "failed":
            self._emit(logging.WARNING, f"failed closed: {result.error}")
        elif self.debug:
            u = result.total_usage  # the judges' calls too
            judges = f" ({len(result.judges)} judge call(s))" if result.judges else ""
            self._emit(logging.DEBUG, (
                f"{result.status} after {len(result.steps)} step(s), "
                f"{u.input_tokens} in / {u.output_tokens} out tokens{judges}"
            ))


__all__ = ["LogObserver"]

