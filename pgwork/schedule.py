"""A periodic job's definition and the pure decision of which ticks to enqueue.

The same definition comes from a JobQueue's spec.schedules (the operator) and from
`@app.periodic` (a worker run without the operator); pgwork.db.schedules fires it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from pgwork import crontab
from pgwork.errors import InvalidArgument
from pgwork.jsonshape import check_json
from pgwork.validation import check_int, check_job_type

MISSED = ("skip", "catchUp")
# A tick less than this late is on time: a scheduler polls every few seconds, so a tick it sees
# within the minute runs under either policy; a tick a minute or more late is a missed tick.
ON_TIME = timedelta(seconds=60)
# With catchUp, at most this many missed ticks are enqueued by default (the newest ones).
DEFAULT_CATCH_UP_LIMIT = 10
# At most this many ticks fall within ON_TIME (cron's grain is a minute; both ends count).
ON_TIME_TICKS = 2
MAX_CATCH_UP_LIMIT = 1000
# A schedule's payload is repeated on every tick's job and lives in the JobQueue spec.
MAX_PAYLOAD_BYTES = 64 * 1024
NAME_PATTERN = r"[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?"
_NAME = re.compile(NAME_PATTERN)


@dataclass(frozen=True)
class Schedule:
    """One periodic job. `name` is unique per database: its ticks are keyed by it."""

    name: str
    cron: str
    job_type: str
    payload: dict[str, Any] = field(default_factory=dict)
    time_zone: str = "UTC"
    missed: str = "skip"
    catch_up_limit: int = DEFAULT_CATCH_UP_LIMIT
    priority: int = 100
    max_attempts: int = 5

    def parsed(self) -> tuple[crontab.Cron, ZoneInfo]:
        return checked_cron(self.cron, "cron"), checked_zone(self.time_zone, "timeZone")


def checked_cron(text: str, where: str) -> crontab.Cron:
    try:
        return crontab.parse(text)
    except crontab.CronError as exc:
        raise InvalidArgument(where, exc.problem, exc.fix) from None


def checked_zone(name: str, where: str) -> ZoneInfo:
    try:
        return crontab.zone(name)
    except crontab.CronError as exc:
        raise InvalidArgument(where, exc.problem, exc.fix) from None


def check(schedule: Schedule, where: str = "schedule") -> Schedule:
    """The schedule, or InvalidArgument naming the field (`where` prefixes it) and the fix."""
    if not isinstance(schedule.name, str) or not _NAME.fullmatch(schedule.name):
        raise InvalidArgument(
            f"{where}.name", f"{schedule.name!r} is not a name", "use 1-63 lowercase letters, digits, '.', '_' or '-'"
        )
    checked_cron(schedule.cron, f"{where}.cron")
    checked_zone(schedule.time_zone, f"{where}.timeZone")
    check_job_type(schedule.job_type, f"{where}.jobType")
    if schedule.missed not in MISSED:
        raise InvalidArgument(f"{where}.missed", f"{schedule.missed!r} is no policy", "use skip or catchUp")
    if not isinstance(schedule.payload, dict):
        raise InvalidArgument(f"{where}.payload", "must be a JSON object", 'e.g. {"days": 7}')
    check_json(
        schedule.payload,
        f"{where}.payload",
        MAX_PAYLOAD_BYTES,
        canonical=False,
        size_fix="keep a schedule's payload small; put bulk data in a table",
        types_fix="use JSON values only",
    )
    check_int(schedule.catch_up_limit, f"{where}.catchUpLimit", 1, MAX_CATCH_UP_LIMIT, "e.g. 10")
    return schedule


@dataclass(frozen=True)
class Decision:
    """Which ticks in (watermark, now] to enqueue, how many were passed over, and the next one."""

    enqueue: tuple[datetime, ...]
    skipped: int
    next_tick: datetime | None


def decide(
    cron: crontab.Cron, tz: ZoneInfo, *, watermark: datetime, now: datetime, missed: str, catch_up_limit: int
) -> Decision:
    """Pure: the ticks after `watermark` up to `now`. On-time ticks (within ON_TIME of `now`) are
    enqueued under either policy; with `skip` the older (missed) ones are passed over, with
    `catchUp` the newest `catch_up_limit` of them are enqueued and the rest passed over."""
    limit = catch_up_limit if missed == "catchUp" else 0
    due, older = crontab.last_ticks(cron, tz, watermark, now, limit + ON_TIME_TICKS)
    on_time = [t for t in due if now - t < ON_TIME]
    late = [t for t in due if now - t >= ON_TIME]
    kept_late = late[len(late) - limit :] if limit else []
    skipped = older + len(late) - len(kept_late)
    return Decision(tuple(kept_late + on_time), skipped, crontab.next_tick(cron, tz, now))


def job_key(name: str, tick: datetime) -> str:
    """The idempotency key of a tick's job (schedule_fire writes the same)."""
    return f"schedule:{name}:{tick.astimezone(ZoneInfo('UTC')).strftime('%Y-%m-%dT%H:%M:%SZ')}"
