"""`@app.periodic`: schedules declared in Python, fired by the workers (pgwork.worker.periodic),
each tick once however many workers fire them. Clocks are fixed, never slept on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

import pgwork
from pgwork.db import Queue
from pgwork.errors import InvalidArgument
from pgwork.worker.periodic import LONGEST_WAIT, SHORTEST_WAIT, Periodic, next_wait

T0 = datetime(2026, 3, 2, 9, 0, 30, tzinfo=UTC)


def test_the_decorator_registers_the_handler_and_the_schedule() -> None:
    app = pgwork.App(name="sched")

    @app.periodic("*/10 * * * *", payload={"days": 7}, time_zone="Europe/Berlin", missed="catchUp")
    def cleanup(job: pgwork.Job) -> None: ...

    @app.periodic("@daily", job_type="report", name="daily-report")
    @app.handler("report", max_attempts=2)
    def report(job: pgwork.Job) -> None: ...

    one, two = app.registry.schedules
    assert (one.name, one.job_type, one.payload, one.time_zone, one.missed) == (
        "cleanup", "cleanup", {"days": 7}, "Europe/Berlin", "catchUp"
    )  # fmt: skip
    assert app.registry.spec("cleanup") is not None
    assert (two.name, two.job_type, two.max_attempts) == ("daily-report", "report", 2)
    assert [s.name for s in app.registry.copy().schedules] == ["cleanup", "daily-report"]


@pytest.mark.parametrize(
    ("cron", "kwargs", "field", "says"),
    [
        ("@every 10s", {}, "schedule.cron", "once a minute"),
        ("*/10 * * * * *", {}, "schedule.cron", "seconds field"),
        ("* * * * *", {"missed": "later"}, "schedule.missed", "skip or catchUp"),
        ("* * * * *", {"time_zone": "Berlin"}, "schedule.timeZone", "IANA"),
        ("* * * * *", {"name": "No Spaces"}, "schedule.name", "lowercase"),
    ],
)
def test_bad_schedules_fail_at_the_decorator(cron: str, kwargs: dict[str, str], field: str, says: str) -> None:
    app = pgwork.App(name="bad")
    with pytest.raises(InvalidArgument) as caught:
        app.periodic(cron, job_type="t", **kwargs)(lambda job: None)  # type: ignore[arg-type]
    assert caught.value.field == field and says in str(caught.value)


def test_a_schedule_declared_twice_is_refused() -> None:
    app = pgwork.App(name="twice")
    app.periodic("@hourly", job_type="t")(lambda job: None)
    with pytest.raises(InvalidArgument, match="declared twice"):
        app.periodic("@daily", job_type="t")(lambda job: None)


@pytest.mark.parametrize(
    ("offsets", "expected"),
    [([5.0, 20.0], 5.0), ([], LONGEST_WAIT), ([None], LONGEST_WAIT), ([-3.0], SHORTEST_WAIT), ([999.0], LONGEST_WAIT)],
)
def test_next_wait(offsets: list[float | None], expected: float) -> None:
    ticks = [None if o is None else T0 + timedelta(seconds=o) for o in offsets]
    assert next_wait(ticks, T0) == expected


def test_three_workers_firing_enqueue_each_tick_once_and_a_worker_runs_them(dsn: str) -> None:
    app = pgwork.App(dsn, name="ticks")
    ran: list[str] = []

    @app.periodic("* * * * *", payload={"n": 1})
    def sweep(job: pgwork.Job) -> None:
        ran.append(job.idempotency_key)

    now = [T0]
    queues = [Queue(dsn, pool_size=1) for _ in range(3)]
    firers = [Periodic(q, app.registry.schedules, clock=lambda: now[0]) for q in queues]
    for minute in range(4):
        now[0] = T0 + timedelta(minutes=minute)
        for firer in firers:
            firer.fire_once()
    for q in queues:
        q.close()
    assert app.run_worker(burst=True, worker_id="ticks-w", poll="50ms") == 0
    # (The worker's own firing, at the database's clock, may add today's tick.)
    ours = sorted(k for k in ran if "2026-03-02" in k)
    assert ours == [f"schedule:sweep:2026-03-02T09:0{m}:00Z" for m in (1, 2, 3)]
    app.close()


def test_run_worker_fires_its_schedules(dsn: str) -> None:
    with pgwork.App(dsn, name="fires") as app:
        app.periodic("@hourly", job_type="hourly")(lambda job: None)
        assert app.run_worker(burst=True, worker_id="fires-w", poll="50ms") == 0
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT name, next_tick > now() FROM pgwork.schedules").fetchone()
    assert row == ("hourly", True)
