"""spec.schedules: the JobQueue's periodic jobs, read from the spec and fired each poll.

Every operator replica (and every restart) may fire: each tick is enqueued once by the
database's unique key (pgwork.db.schedules), not by which replica leads. A schedule is stored
under `NAMESPACE/JOBQUEUE/NAME`, so JobQueues sharing a database keep their schedules apart.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg

from pgwork.db import Queue
from pgwork.errors import InvalidArgument, PgworkError
from pgwork.operator.conditions import timestamp
from pgwork.operator.fields import Reader, SpecError, shown
from pgwork.schedule import DEFAULT_CATCH_UP_LIMIT, MISSED, Schedule, check

MAX_SCHEDULES = 50
FIELDS = {"name", "cron", "timeZone", "jobType", "payload", "missed", "catchUpLimit"}
DEFAULTS: dict[str, Any] = {"timeZone": "UTC", "missed": "skip", "catchUpLimit": DEFAULT_CATCH_UP_LIMIT}


def parse_schedules(raw: Any, job_types: tuple[str, ...]) -> tuple[Schedule, ...]:
    """spec.schedules as Schedules (their short names), or SpecError naming the field."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise SpecError("spec.schedules", f"must be a list, got {type(raw).__name__}", "see the JobQueue reference")
    if len(raw) > MAX_SCHEDULES:
        raise SpecError("spec.schedules", f"has {len(raw)} entries", f"at most {MAX_SCHEDULES}")
    found: list[Schedule] = []
    for i, item in enumerate(raw):
        where = f"spec.schedules[{i}]"
        r = Reader(item, where, DEFAULTS)
        unknown = sorted(set(r.raw) - FIELDS)
        if unknown:
            raise SpecError(r.field(unknown[0]), "is not a field of a schedule", f"use {', '.join(sorted(FIELDS))}")
        name = r.string("name", required=True, fix="name the schedule, e.g. nightly-cleanup")
        cron = r.string("cron", required=True, fix="e.g. '*/10 * * * *' or @daily")
        job_type = r.string("jobType", required=True, fix="one of spec.jobTypes")
        payload = r.raw.get("payload") or {}
        schedule = Schedule(
            name=str(name),
            cron=str(cron),
            job_type=str(job_type),
            payload=payload,
            time_zone=str(r.string("timeZone")),
            missed=r.one_of("missed", MISSED, "skip (missed ticks are dropped) or catchUp (they run, up to the cap)"),
            catch_up_limit=r.integer("catchUpLimit", 1, 1000, "e.g. 10"),
        )
        try:
            check(schedule, where)
        except InvalidArgument as exc:
            raise SpecError(exc.field, exc.problem, exc.fix) from None
        if schedule.job_type not in job_types:
            raise SpecError(
                r.field("jobType"), f"{shown(schedule.job_type)} is not in spec.jobTypes", "add it there or fix it"
            )
        if any(s.name == schedule.name for s in found):
            raise SpecError(r.field("name"), f"{schedule.name!r} is used twice", "give each schedule its own name")
        found.append(schedule)
    return tuple(found)


def stored_name(namespace: str, jobqueue: str, name: str) -> str:
    return f"{namespace}/{jobqueue}/{name}"


@dataclass(frozen=True)
class Firing:
    """What firing a JobQueue's schedules gave: their status entries and problems to report."""

    status: list[dict[str, Any]]
    problems: list[str]


def fire_all(
    queue: Queue,
    namespace: str,
    jobqueue: str,
    schedules: tuple[Schedule, ...],
    *,
    now: datetime | None,
    explain: Callable[[BaseException], object],
    fix: str = "",
) -> Firing:
    """Fire each schedule once (each its own short transaction) and read back last/next ticks.
    `now` None: the database's clock. A schedule that fails is reported and the others still run;
    a refusal of the role's rights says `fix`."""
    problems: list[str] = []
    for schedule in schedules:
        stored = Schedule(**{**schedule.__dict__, "name": stored_name(namespace, jobqueue, schedule.name)})
        try:
            queue.fire_schedule(stored, now=now)
        except (psycopg.Error, PgworkError) as exc:  # report it; the next schedule still runs
            refused = isinstance(exc, psycopg.errors.InsufficientPrivilege) and fix
            problems.append(f"schedule {schedule.name}: {explain(exc)}" + (f"; {fix}" if refused else ""))
    rows = {}
    if schedules:
        try:
            rows = {row.name: row for row in queue.schedules()}
        except (psycopg.Error, PgworkError) as exc:
            problems.append(f"reading schedules: {explain(exc)}")
    status = []
    for schedule in schedules:
        row = rows.get(stored_name(namespace, jobqueue, schedule.name))
        entry: dict[str, Any] = {"name": schedule.name}
        if row is not None:
            entry["lastTick"] = _when(row.last_tick)
            entry["lastJobId"] = row.last_job_id
            entry["nextTick"] = _when(row.next_tick)
            entry["skippedTicks"] = row.skipped_ticks
        status.append({k: v for k, v in entry.items() if v is not None})
    return Firing(status, problems)


def new_problems(previous: Sequence[str], current: Sequence[str]) -> list[str]:
    """The firing problems to post as events (pure): those not reported by the last poll. A role
    that lacks the producer profile fails the same way every poll; one event says so, not one a
    poll (the next comes when the problem changes, or after it cleared and came back)."""
    return [p for p in current if p not in previous]


def _when(moment: datetime | None) -> str | None:
    return None if moment is None else timestamp(moment.astimezone(UTC).timestamp())


def fire_time(now: float, fixed_clock: bool) -> datetime | None:
    """The instant to fire at: the operator's clock when a test fixed it, else None (the database's)."""
    return datetime.fromtimestamp(now, UTC) if fixed_clock else None
