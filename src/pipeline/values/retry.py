"""The backoff policy for transient model-call failures: pure, so it runs in virtual time."""

from __future__ import annotations

import zlib

import msgspec


class RetryPolicy(msgspec.Struct, frozen=True):
    """Exponential backoff with jitter, honouring the server's Retry-After.

    `max_retries` bounds the retries of one model call (so at most max_retries + 1
    attempts). The jitter comes from a hash of `key` and the attempt, not from a random
    source, so the same run always waits the same. A server's Retry-After longer than
    `max_retry_after` is not waited for, nor retried early: the call fails (see `waits`).
    """

    max_retries: int = 2
    base_delay: float = 0.5
    max_delay: float = 8.0
    jitter: float = 0.25
    max_retry_after: float = 60.0

    def waits(self, retry_after: float | None) -> bool:
        """Whether a retry may follow this server hint: none given, or one this policy is
        willing to wait. Retrying sooner than the server asked would only burn quota."""
        return retry_after is None or retry_after <= self.max_retry_after

    def delay(self, attempt: int, key: str, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number `attempt` (0-based)."""
        if retry_after is not None and 0 <= retry_after <= self.max_retry_after:
            return retry_after
        backoff = min(self.max_delay, self.base_delay * (1 << attempt))
        unit = (zlib.crc32(f"{key}:{attempt}".encode()) & 0xFFFF) / 0xFFFF
        return backoff * (1 - self.jitter * unit)

