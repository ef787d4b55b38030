"""Retry delays: base * 2^(attempt-1) seconds, capped, with jitter so failed jobs do not retry in step."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    base: float = 2.0
    cap: float = 3600.0
    # Fraction of the delay drawn at random, spread evenly either side of it.
    jitter: float = 0.2

    def __post_init__(self) -> None:
        if self.base <= 0:
            raise ValueError("backoff base must be > 0 seconds")
        if self.cap < self.base:
            raise ValueError("backoff cap must be >= base")
        if not 0 <= self.jitter <= 1:
            raise ValueError("backoff jitter must be within 0..1")

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait after failed attempt number `attempt` (1 for the first run)."""
        exponent = max(attempt, 1) - 1
        # Cap the exponent before raising so attempt 1000 cannot overflow a float.
        raw = self.base * 2.0 ** min(exponent, 64)
        capped = min(raw, self.cap)
        spread = capped * self.jitter
        return max(0.0, min(self.cap, capped - spread / 2 + spread * rand()))
