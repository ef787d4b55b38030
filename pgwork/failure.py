"""What a failed attempt leads to: a retry after a backoff, or dead, and why (pure, no I/O).

The database applies the decision through pgwork.set_state_if_held, which holds the same bounds
(see migrations/0003_guarded_fail.sql): it is the last word, this is the first.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta

# The furthest ahead a retry may be scheduled; pgwork.set_state_if_held clamps to the same.
MAX_RETRY_DELAY = 86_400.0


class DeadReason(enum.Enum):
    ATTEMPTS_USED_UP = "attempts_used_up"
    NOT_RETRYABLE = "not_retryable"


@dataclass(frozen=True)
class FailureDecision:
    """`state` pending (retry at `available_at`, after `retry_delay` seconds) or dead (`reason`)."""

    state: str
    available_at: datetime | None = None
    retry_delay: float | None = None
    reason: DeadReason | None = None


def decide_failure(attempt: int, max_attempts: int, retryable: bool, backoff: float, now: datetime) -> FailureDecision:
    """After failed attempt number `attempt` (1 for the first run) of `max_attempts`: a
    non-retryable error is dead at once; a retryable one retries `backoff` seconds from `now`
    (clamped to 0..MAX_RETRY_DELAY) while attempts remain, and is dead once they are used up."""
    if not retryable:
        return FailureDecision("dead", reason=DeadReason.NOT_RETRYABLE)
    if attempt >= max_attempts:
        return FailureDecision("dead", reason=DeadReason.ATTEMPTS_USED_UP)
    delay = min(max(float(backoff), 0.0), MAX_RETRY_DELAY)
    return FailureDecision("pending", available_at=now + timedelta(seconds=delay), retry_delay=delay)
