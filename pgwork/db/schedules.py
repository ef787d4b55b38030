"""The Queue's schedules: fire a periodic job's due ticks, each exactly once (migration 21).
Split from pgwork.db.queue only to keep modules small."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from psycopg.types.json import Jsonb

from pgwork.db import statements
from pgwork.db.base import QueueBase
from pgwork.db.connect import AnyConnection
from pgwork.db.rows import ScheduleOpenRow, ScheduleRow, ScheduleTickRow
from pgwork.schedule import Schedule, decide


@dataclass(frozen=True)
class Fired:
    """What one firing did: the (tick, job id) pairs it enqueued, ticks passed over, the next tick."""

    name: str
    enqueued: tuple[tuple[datetime, int], ...]
    skipped: int
    next_tick: datetime | None


class Schedules(QueueBase):
    def fire_schedule(
        self, schedule: Schedule, *, now: datetime | None = None, conn: AnyConnection | None = None
    ) -> Fired:
        """Enqueue the schedule's due ticks (pgwork.schedule.decide) in one short transaction.
        Any number of schedulers may call this at once, for the same schedule: each tick gets one
        job. `now` None: the database's clock, so schedulers on several hosts agree."""
        cron, tz = schedule.parsed()
        with self._pool.connection(conn) as c, c.transaction():
            params = {
                "name": schedule.name,
                "cron": schedule.cron,
                "time_zone": schedule.time_zone,
                "job_type": schedule.job_type,
                "missed": schedule.missed,
                "now": now,
            }
            opened = statements.one(c, "schedule_open", params, ScheduleOpenRow)
            assert opened is not None  # an upsert returns its row
            at = opened.now_at
            decision = decide(
                cron,
                tz,
                watermark=opened.watermark,
                now=at,
                missed=schedule.missed,
                catch_up_limit=schedule.catch_up_limit,
            )
            fire = {
                "name": schedule.name,
                "ticks": list(decision.enqueue),
                "until": at,
                "next_tick": decision.next_tick,
                "skipped": decision.skipped,
                "job_type": schedule.job_type,
                "payload": Jsonb(schedule.payload),
                "priority": schedule.priority,
                "max_attempts": schedule.max_attempts,
            }
            rows = statements.many(c, "schedule_fire", fire, ScheduleTickRow)
        return Fired(schedule.name, tuple((r.tick_at, r.job_id) for r in rows), decision.skipped, decision.next_tick)

    def schedules(self, conn: AnyConnection | None = None) -> list[ScheduleRow]:
        """Every schedule fired on this database, by name: last and next tick, ticks passed over."""
        return self._many("schedules", {}, ScheduleRow, conn)
