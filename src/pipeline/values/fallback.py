"""Fallback models: the models a step tries in turn when a provider fails, and which
failures move on to the next one.

    Agent.create(("openai/gpt-4.1", "anthropic/claude-sonnet-4-5"), ...)
    Agent.create(Fallback.of("openai/gpt-4.1",
                             FallbackModel("anthropic/claude-sonnet-4-5",
                                           model_settings=ModelSettings(max_tokens=2048)),
                             on=(*DEFAULT_FAIL_OVER, "content-filter")), ...)

A failure is sorted into a `FailureKind` by `failure_kind` (from the typed `ApiError`
every provider reports); the step moves on when its kind is in `FailoverPolicy.on`. A
failure the policy does not name goes on as without a fallback (`process_api_error`,
then the run fails). A retryable failure (429, 5xx, a connection failure) is first
retried on the same model by the agent's `RetryPolicy`, then fails over.

What the caller already received stays consistent: by default a step fails over only
while nothing of the failed model's answer was released to the caller (what the stream
processors still held is dropped with the attempt). With `after_output=True` it also
fails over after; the caller is then sent a `StepReset` chunk (the UI stream's
`data-step-reset` part) saying to drop what the step streamed so far, and the step's
`StepResult.attempts` records it.

The circuit breaker (per process, in the interpreters: `interpreters.CircuitBreaker`) is
asked which models of a chain to skip for now (`CircuitCheck`) and told how each
attempt went (`CircuitReport`): typed requests the loop makes, so every interpreter,
a journal's replay and a durable run take the same path.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal, get_args

import msgspec

from effects.requests import Request
from pipeline.values.messages import JsonObject
from pipeline.values.model import ApiError, ModelSettings

FailureKind = Literal[
    "connection",
    "timeout",
    "server",
    "rate-limit",
    "unavailable",
    "auth",
    "content-filter",
    "invalid-request",
    "configuration",
    "circuit-open",
    "other",
]
"""What kind of failure a model call had (`failure_kind`):

- `connection`: no answer (refused, reset, DNS) before anything was delivered;
- `timeout`: nothing came in time (the connect or read timeout before the first event,
  408, 504, a provider's timeout error);
- `server`: a 5xx (529 overloaded included) or a provider's transient error frame;
- `rate-limit`: 429 (after the retry policy's retries);
- `unavailable`: the model is not there (404, `model_not_found`, not found errors);
- `auth`: 401 or 403;
- `content-filter`: the provider refused the content (a safety block);
- `invalid-request`: another 4xx (the request itself is wrong: it would fail anywhere);
- `configuration`: the model cannot be called as configured (no API key...);
- `circuit-open`: skipped, its circuit breaker is open (always fails over);
- `other`: anything else (a provider bug, a limit the stream exceeded...)."""

FAILURE_KINDS: frozenset[str] = frozenset(get_args(FailureKind))

DEFAULT_FAIL_OVER: tuple[FailureKind, ...] = (
    "connection", "timeout", "server", "rate-limit", "unavailable",
)
"""The failures that move a step on to its next model unless the policy says otherwise:
the provider's, never the request's (an invalid request or a content-filter block would
fail the same way elsewhere, and may cost there)."""

_TIMEOUT_TYPES = frozenset({
    "timeout", "read_timeout", "connect_timeout", "timeout_error", "deadline_exceeded",
    "DEADLINE_EXCEEDED", "ModelTimeoutException",
})
_CONNECTION_TYPES = frozenset({"connection_error", "connection_lost", "incomplete_stream"})
_UNAVAILABLE = frozenset({
    "model_not_found", "not_found_error", "NOT_FOUND", "ResourceNotFoundException",
    "ModelNotReadyException", "model_not_available", "UNAVAILABLE",
})
_FILTERED = re.compile(r"content[_ -]?(filter|policy|blocked)|safety|SAFETY|moderation", re.I)
_SERVER_TYPES = frozenset({
    "overloaded_error", "api_error", "server_error", "ServiceUnavailableException",
    "InternalServerException", "INTERNAL",
})


def failure_kind(error: ApiError) -> FailureKind:
    """The kind of a model call's failure (see `FailureKind`), from its status, type
    and code as the provider reported them."""
    et, code, status = error.error_type or "", error.code or "", error.status
    if et == "configuration":
        return "configuration"
    if et == "circuit_open":
        return "circuit-open"
    if et in _UNAVAILABLE or code in _UNAVAILABLE or status == 404:
        return "unavailable"
    if _FILTERED.search(et) or _FILTERED.search(code):
        return "content-filter"
    if et in _TIMEOUT_TYPES or status in (408, 504):
        return "timeout"
    if status == 429 or et in ("rate_limit_error", "RESOURCE_EXHAUSTED", "ThrottlingException"):
        return "rate-limit"
    if status in (401, 403) or et in ("authentication_error", "permission_error"):
        return "auth"
    if et in _SERVER_TYPES or (status is not None and status >= 500):
        return "server"
    if et in _CONNECTION_TYPES or (status is None and et in ("", "stream_error")):
        return "connection"
    if status is not None and 400 <= status < 500:
        return "invalid-request"
    return "other"


class FailoverPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """Which failures move a step on to its next model, and until when."""

    on: tuple[FailureKind, ...] = DEFAULT_FAIL_OVER
    """The kinds of failure that fail over (`FailureKind`); a skip for an open circuit
    always does."""
    after_output: bool = False
    """Also fail over once part of the failed model's answer reached the caller: the
    caller is sent a `StepReset` first (drop what this step streamed). False: a failure
    after the first released chunk fails the run as without a fallback."""

    def __post_init__(self) -> None:
        if type(self.on) is not tuple:
            raise ValueError(f"FailoverPolicy.on must be a tuple of failure kinds, "
                             f"got {self.on!r}")
        bad = [k for k in self.on if k not in FAILURE_KINDS]
        if bad:
            raise ValueError(f"FailoverPolicy.on: unknown failure kinds {bad} (the kinds "
                             f"are {sorted(FAILURE_KINDS)})")
        if type(self.after_output) is not bool:
            raise ValueError("FailoverPolicy.after_output must be True or False")

    def fails_over(self, error: ApiError) -> bool:
        kind = failure_kind(error)
        return kind == "circuit-open" or kind in self.on


class FallbackModel(msgspec.Struct, frozen=True, kw_only=True):
    """One model of a fallback chain, with its own settings (None: the step's)."""

    model: str
    model_settings: ModelSettings | None = None
    provider_options: JsonObject | None = None

    def __post_init__(self) -> None:
        if type(self.model) is not str or not self.model:
            raise ValueError(f"FallbackModel.model must be a model id, got {self.model!r}")
        if self.model_settings is not None and not isinstance(self.model_settings,
                                                                ModelSettings):
            raise ValueError("FallbackModel.model_settings must be a ModelSettings")


class Fallback(msgspec.Struct, frozen=True, kw_only=True):
    """The models a step tries in order, and when it moves on (`policy`). The agent's
    model is the first (`Agent.create(Fallback(...))`); a step that switches to another
    model (`StepChange(model=...)`) tries that one first, then this chain's others."""

    models: tuple[FallbackModel, ...]
    policy: FailoverPolicy = FailoverPolicy()

    def __post_init__(self) -> None:
        if type(self.models) is not tuple or not all(
            type(m) is FallbackModel for m in self.models
        ):
            raise ValueError("Fallback.models must be a tuple of FallbackModel")
        ids = [m.model for m in self.models]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"Fallback.models names a model more than once: {dupes}")
        if type(self.policy) is not FailoverPolicy:
            raise ValueError("Fallback.policy must be a FailoverPolicy")

    @staticmethod
    def of(
        *models: str | FallbackModel,
        on: Iterable[FailureKind] = DEFAULT_FAIL_OVER,
        after_output: bool = False,
    ) -> Fallback:
        """A chain of model ids (or `FallbackModel`s), tried in this order."""
        if not models:
            raise ValueError("Fallback.of needs at least one model")
        return Fallback(
            models=tuple(m if isinstance(m, FallbackModel) else FallbackModel(model=m)
                         for m in models),
            policy=FailoverPolicy(on=tuple(on), after_output=after_output),
        )

    @property
    def model_ids(self) -> tuple[str, ...]:
        return tuple(m.model for m in self.models)

    def entry(self, model: str) -> FallbackModel | None:
        return next((m for m in self.models if m.model == model), None)


class ModelAttempt(msgspec.Struct, frozen=True, kw_only=True):
    """A model a step tried that did not answer (`StepResult.attempts`, in order)."""

    model: str
    error: ApiError
    kind: FailureKind
    released: bool = False
    """Part of its answer had reached the caller (a `StepReset` followed)."""


# --- the circuit breaker's requests (answered by the interpreter) ---------------------


class CircuitStates(msgspec.Struct, frozen=True):
    """The breaker's answer: the models to skip now (open), and those it watches (with
    recent failures: their next answer is reported, to close them)."""

    open: tuple[str, ...] = ()
    watched: tuple[str, ...] = ()


class CircuitCheck(Request[CircuitStates], frozen=True):
    """Before a step's first attempt: which models of its chain to skip for now."""

    models: tuple[str, ...]


class CircuitOutcome(msgspec.Struct, frozen=True):
    """How one attempt went: `failed` its kind, or None (it answered)."""

    model: str
    failed: FailureKind | None = None


class CircuitReport(Request[bool], frozen=True):
    """After a step's attempts: how each went (the answer: True, noted)."""

    outcomes: tuple[CircuitOutcome, ...]


CIRCUIT_PROCESSOR = "fallback"
"""The `processor_id` of the loop's own `Perform`s of these requests (no processor asks)."""


__all__ = [
    "CIRCUIT_PROCESSOR", "DEFAULT_FAIL_OVER", "FAILURE_KINDS", "CircuitCheck", "CircuitOutcome",
    "CircuitReport", "CircuitStates", "FailoverPolicy", "FailureKind", "Fallback",
    "FallbackModel", "ModelAttempt", "failure_kind",
]
