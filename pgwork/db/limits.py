"""The Queue's per-type limits: set and clear (the maintainer profile) and read (any reader).
Split from pgwork.db.queue only to keep modules small: use `Queue`."""

from __future__ import annotations

from datetime import datetime

from pgwork.db.base import QueueBase
from pgwork.db.connect import AnyConnection
from pgwork.limits import Rate, TypeLimit, check_limit
from pgwork.validation import check_job_type


class Limits(QueueBase):
    def set_limit(
        self,
        job_type: str,
        *,
        max_running: int | None = None,
        rate: Rate | None = None,
        now: datetime | None = None,
        conn: AnyConnection | None = None,
    ) -> bool:
        """Limit `job_type` fleet-wide: at most `max_running` of its jobs running at once, at most
        `rate` claims per period. Replaces the type's whole limit (what is not given is not
        limited). True if the type had no limit before. Every claim that starts after this commits
        keeps to it; jobs already running finish."""
        limit = check_limit(job_type, max_running, rate)
        params = {
            "job_type": limit.job_type,
            "max_running": limit.max_running,
            "rate_count": limit.rate_count,
            "rate_seconds": limit.rate_seconds,
            "now": now,
        }
        return bool(self._scalar("set_limit", params, conn))

    def clear_limit(self, job_type: str, *, conn: AnyConnection | None = None) -> bool:
        """Lift `job_type`'s limit; its claims take the unlimited path again. False if it had none."""
        return bool(self._scalar("clear_limit", {"job_type": check_job_type(job_type)}, conn))

    def limits(self, *, now: datetime | None = None) -> list[TypeLimit]:
        """Every limit, with the type's running jobs and the tokens its bucket holds now."""
        return self._many("limits", {"now": now}, TypeLimit)
