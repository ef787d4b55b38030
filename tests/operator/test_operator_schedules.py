"""spec.schedules: the CRD and the operator refuse the same hostile schedules; on the emulator,
two operators firing at once enqueue each tick once, and an operator stopped across three ticks
comes back by its `missed` policy. The operators' clock is fixed and stepped (no sleeping a minute)."""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Generator, Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import psycopg
import pytest

from pgwork.operator.handlers import OperatorOptions
from pgwork.operator.kube import Kube
from pgwork.operator.schedules import new_problems
from tests.support import stories
from tests.support.crd import BASE, api_server_verdict, operator_verdict
from tests.support.db import MakeRole, role_maker
from tests.support.operator import Emulator, OperatorThread, eventually, running

EVERY_MINUTE = {"name": "sweep", "cron": "* * * * *", "jobType": "ocr", "payload": {"older": "7d"}}


def with_schedules(*schedules: dict[str, Any]) -> dict[str, Any]:
    return {**copy.deepcopy(BASE), "schedules": list(schedules)}


AGREED = [  # (case, schedule fields over EVERY_MINUTE, valid)
    ("every minute", {}, True),
    ("macro in Berlin, catch up", {"cron": "@daily", "timeZone": "Europe/Berlin", "missed": "catchUp"}, True),
    ("@every", {"cron": "@every 10s"}, False),
    ("six fields (seconds)", {"cron": "*/10 * * * * *"}, False),
    ("minute 60", {"cron": "60 * * * *"}, False),
    ("leading space", {"cron": " * * * * *"}, False),
    ("newline", {"cron": "* * * * *\n"}, False),
    ("name with a slash", {"name": "a/b"}, False),
    ("name upper case", {"name": "Sweep"}, False),
    ("name too long", {"name": "a" * 64}, False),
    ("missed unknown", {"missed": "always"}, False),
    ("catchUpLimit 0", {"catchUpLimit": 0}, False),
    ("catchUpLimit huge", {"catchUpLimit": 10**6}, False),
    ("payload a list", {"payload": [1, 2]}, False),
    ("time zone with spaces", {"timeZone": "Europe/Ber lin"}, False),
    ("job type with a space", {"jobType": "o cr"}, False),
]


@pytest.mark.parametrize(("case", "fields", "valid"), AGREED, ids=[c[0] for c in AGREED])
def test_crd_and_operator_agree_on_schedules(case: str, fields: dict[str, Any], valid: bool) -> None:
    spec = with_schedules({**EVERY_MINUTE, **fields})
    assert (not api_server_verdict(spec)) is valid, api_server_verdict(spec)
    verdict = operator_verdict(spec)
    assert (verdict is None) is valid, verdict
    if not valid:
        assert verdict is not None and verdict.startswith("spec.schedules[0]")


@pytest.mark.parametrize(
    ("schedules", "field", "says"),
    [
        # What the schema cannot see: the operator refuses it.
        ([{**EVERY_MINUTE, "jobType": "mail"}], "spec.schedules[0].jobType", "not in spec.jobTypes"),
        ([{**EVERY_MINUTE, "timeZone": "Mars/Olympus"}], "spec.schedules[0].timeZone", "unknown"),
        ([{**EVERY_MINUTE, "payload": {"x": "y" * 70_000}}], "spec.schedules[0].payload", "bytes"),
        ([EVERY_MINUTE, EVERY_MINUTE], "spec.schedules[1].name", "used twice"),
        ([{**EVERY_MINUTE, "cron": "0 0 5-1 * *"}], "spec.schedules[0].cron", "runs backwards"),
        ([{**EVERY_MINUTE, "every": "1s"}], "spec.schedules[0].every", "not a field"),
    ],
)
def test_what_only_the_operator_catches(schedules: list[dict[str, Any]], field: str, says: str) -> None:
    verdict = operator_verdict(with_schedules(*schedules))
    assert verdict is not None and verdict.startswith(field) and says in verdict, verdict


def test_the_refusal_of_every_says_once_a_minute() -> None:
    for cron in ("@every 10s", "*/10 * * * * *"):
        verdict = operator_verdict(with_schedules({**EVERY_MINUTE, "cron": cron}))
        assert verdict is not None and "once a minute" in verdict
        assert any("once a minute" in m for m in api_server_verdict(with_schedules({**EVERY_MINUTE, "cron": cron})))


class Clock:
    """The operators' shared clock, stepped by the test."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now.timestamp()


T0 = datetime(2026, 3, 2, 9, 0, 30, tzinfo=UTC)


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    emu = Emulator().start()
    yield emu
    emu.stop()


@pytest.fixture
def cleanup() -> Iterator[ExitStack]:
    """Operators stopped whatever the test's outcome (before the emulator goes)."""
    with ExitStack() as stack:
        yield stack


@pytest.fixture
def client(emulator: Emulator) -> Iterator[Kube]:
    c = emulator.client()
    yield c
    c.close()


@pytest.fixture
def make_role(dsn: str) -> Iterator[MakeRole]:
    yield from role_maker(dsn)


def _running(emulator: Emulator, options: OperatorOptions) -> Generator[OperatorThread, None, None]:
    return cast(Generator[OperatorThread, None, None], running(emulator, options))


def _options(clock: Clock, identity: str) -> OperatorOptions:
    return OperatorOptions(
        clusterwide=True, standalone=True, metrics_port=None, tick_seconds=0.1, identity=identity, clock=clock
    )


def _jobs(dsn: str) -> list[tuple[str, int]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT idempotency_key, count(*) FROM pgwork.jobs GROUP BY 1 ORDER BY 1").fetchall()
    return [(k, int(n)) for k, n in rows]


def _fired_at(dsn: str) -> datetime:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT max(fired_at) FROM pgwork.schedules").fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


def _key(ns: str, minute: int) -> str:
    return f"schedule:{ns}/ocr/sweep:2026-03-02T09:{minute:02d}:00Z"


def _last_tick(client: Kube, ns: str) -> str | None:
    entries = (stories.jobqueue(client, ns, "ocr").get("status") or {}).get("schedules") or [{}]
    return entries[0].get("lastTick") or (entries[0].get("nextTick") and "seen")


def _wait_for_tick(client: Kube, ns: str, minute: int) -> None:
    eventually(lambda: _last_tick(client, ns) == f"2026-03-02T09:{minute:02d}:00Z", what=f"the 09:{minute:02d} tick")


@pytest.mark.slow
def test_two_operators_enqueue_each_tick_once(emulator: Emulator, client: Kube, dsn: str, cleanup: ExitStack) -> None:
    ns = "sched-two"
    clock = Clock(T0)
    stories.create_secret(client, ns, "queue-db", dsn)
    first = _running(emulator, _options(clock, "one"))
    second = _running(emulator, _options(clock, "two"))
    cleanup.callback(first.close)
    cleanup.callback(second.close)
    next(first)
    next(second)
    stories.create_jobqueue(client, ns, "ocr", stories.spec(schedules=[EVERY_MINUTE]))
    eventually(lambda: _last_tick(client, ns) == "seen", what="the schedule seen")
    for minute in (1, 2, 3):
        clock.now = T0 + timedelta(minutes=minute)
        _wait_for_tick(client, ns, minute)
    # Both keep firing at the same instant for a while: nothing more appears.
    # The operators poll as their (fixed) clock moves: a few more steps, each fired by both.
    for step in range(1, 6):
        since = _fired_at(dsn)
        clock.now = T0 + timedelta(minutes=3, seconds=step)
        eventually(lambda since=since: _fired_at(dsn) > since, what=f"firing at step {step}")  # type: ignore[misc]
    assert _jobs(dsn) == [(_key(ns, m), 1) for m in (1, 2, 3)]
    agents = {c["agent"] for c in emulator.operator_calls()}
    assert {"pgwork-operator/0.1.0 (one)", "pgwork-operator/0.1.0 (two)"} <= agents


@pytest.mark.slow
@pytest.mark.parametrize(("missed", "expected"), [("skip", [4]), ("catchUp", [1, 2, 3, 4])])
def test_an_operator_stopped_across_three_ticks(
    emulator: Emulator, client: Kube, dsn: str, missed: str, expected: list[int], cleanup: ExitStack
) -> None:
    ns = f"sched-{missed.lower()}"
    clock = Clock(T0)
    stories.create_secret(client, ns, "queue-db", dsn)
    operator = _running(emulator, _options(clock, "a"))
    cleanup.callback(operator.close)
    next(operator)
    stories.create_jobqueue(client, ns, "ocr", stories.spec(schedules=[{**EVERY_MINUTE, "missed": missed}]))
    eventually(lambda: _last_tick(client, ns) == "seen", what="the schedule seen")
    with pytest.raises(StopIteration):
        next(operator)
    # Down across 09:01, 09:02 and 09:03; back at 09:04:00, right on a tick.
    clock.now = T0 + timedelta(minutes=3, seconds=30)
    restarted = _running(emulator, _options(clock, "b"))
    cleanup.callback(restarted.close)
    next(restarted)
    _wait_for_tick(client, ns, 4)
    assert _jobs(dsn) == [(_key(ns, m), 1) for m in expected]
    status = stories.jobqueue(client, ns, "ocr")["status"]["schedules"][0]
    assert status["nextTick"] == "2026-03-02T09:05:00Z"
    assert status["skippedTicks"] == (3 if missed == "skip" else 0)


@pytest.mark.parametrize(
    ("previous", "current", "posted"),
    [
        ((), ["schedule a: permission denied"], ["schedule a: permission denied"]),
        (("schedule a: permission denied",), ["schedule a: permission denied"], []),  # every poll: once
        (("schedule a: permission denied",), ["schedule a: permission denied", "schedule b: x"], ["schedule b: x"]),
        (("schedule a: permission denied",), [], []),
        ((), [], []),
    ],
)
def test_a_schedule_problem_is_posted_once_until_it_changes(
    previous: tuple[str, ...], current: list[str], posted: list[str]
) -> None:
    assert new_problems(previous, current) == posted


@pytest.mark.slow
def test_schedules_fire_through_their_own_producer_secret(
    emulator: Emulator,
    client: Kube,
    dsn: str,
    make_role: MakeRole,
    cleanup: ExitStack,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The operator's backlog role is a reader, which may not enqueue: without schedulesSecret one
    event says which field to set; with it the ticks fire through the producer's DSN, whose
    password never reaches an event, the status or a log line."""
    caplog.set_level(logging.INFO)
    ns = "sched-own"
    clock = Clock(T0)
    password = "Qx7vLw2-only-in-the-secret"  # trust auth here: a password libpq sends and nobody checks
    producer = psycopg.conninfo.make_conninfo(make_role("producer"), password=password)
    stories.create_secret(client, ns, "queue-db", make_role("reader"))
    operator = _running(emulator, _options(clock, "own"))
    cleanup.callback(operator.close)
    next(operator)
    stories.create_jobqueue(client, ns, "ocr", stories.spec(schedules=[EVERY_MINUTE]))

    def failures() -> list[str]:
        return [str(e.get("message")) for e in stories.events(client, ns, "ocr") if e.get("reason") == "ScheduleFailed"]

    (refused,) = eventually(failures, what="ScheduleFailed for the reader role")
    assert "permission denied" in refused and "set spec.database.schedulesSecret" in refused
    # Named before it exists: one event naming the Secret and the field.
    stories.patch_jobqueue(client, ns, "ocr", {"spec": {"database": {"schedulesSecret": {"name": "queue-producer"}}}})
    clock.now = T0 + timedelta(seconds=5)  # the operators poll as their (fixed) clock moves
    missing = eventually(lambda: failures()[1:], what="ScheduleFailed for the missing Secret")
    assert missing == [
        f"Secret {ns}/queue-producer key 'dsn' (spec.database.schedulesSecret.name) not found; create it: "
        f"kubectl -n {ns} create secret generic queue-producer --from-literal=dsn=postgresql://..."
    ]
    # A producer DSN that cannot connect: the event says why, scrubbed of the password.
    stories.create_secret(client, ns, "queue-producer", psycopg.conninfo.make_conninfo(producer, port="1"))
    clock.now = T0 + timedelta(seconds=7)
    unreachable = eventually(lambda: failures()[2:], what="ScheduleFailed for the unreachable producer DSN")
    assert unreachable[0].startswith(f"Secret {ns}/queue-producer key 'dsn' (spec.database.schedulesSecret.name): ")
    stories.set_secret(client, ns, "queue-producer", producer)
    clock.now = T0 + timedelta(seconds=10)
    eventually(lambda: _last_tick(client, ns) == "seen", what="the schedule opened by the producer role")
    for minute in (1, 2):
        clock.now = T0 + timedelta(minutes=minute)
        _wait_for_tick(client, ns, minute)
    assert _jobs(dsn) == [(_key(ns, m), 1) for m in (1, 2)]
    assert len(failures()) == 3  # nothing more once it fires
    body = stories.jobqueue(client, ns, "ocr")
    assert (stories.condition(body, "DatabaseReachable") or {}).get("status") == "True"
    seen = json.dumps([body, stories.events(client, ns, "ocr")]) + caplog.text
    assert password not in seen and "Qx7vLw2" not in seen
