"""Issue 23, item 4: who holds back vacuum on the queue's database (pgwork.horizon, read by
Queue.vacuum_horizon, shown by `pgwork doctor`). Pure decisions as tables; the reading against
real sessions, a role without pg_read_all_stats, and the table's autovacuum setting."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from pgwork.commands.doctor import report, text
from pgwork.db import Queue
from pgwork.horizon import (
    CATALOG_ONLY,
    HELD_WARN_SECONDS,
    Holder,
    Horizon,
    TableVacuum,
    describe,
    figures,
    findings,
    held_seconds,
    remember,
)
from tests.support.db import MakeRole

T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def holder(kind: str = "session", name: str = "42", *, since: datetime | None = None, xmin: str = "100",
           age: int = 10, visible: bool = True, app: str | None = "report", client: str | None = "10.0.0.7",
           state: str | None = "idle in transaction") -> Holder:  # fmt: skip
    return Holder(kind, name, 42 if kind == "session" else None, app, client if visible else None,
                  state if visible else None, since, since if visible else None, xmin, age, visible)  # fmt: skip


def table(*, server: bool = True, own: bool = True, all_stats: bool = True, dead: int = 7) -> TableVacuum:
    return TableVacuum(dead, 100, None, None, server, own, all_stats, T0)


@pytest.mark.parametrize(
    ("h", "seen", "expected"),
    [
        (holder(since=T0 - timedelta(seconds=90)), {}, 90.0),
        # The start is hidden: counted from the first sighting of the same holder and xmin.
        (holder(visible=False), {"session:42:100": T0 - timedelta(seconds=30)}, 30.0),
        # The same pid with a newer xmin is a new snapshot: no memory applies.
        (holder(visible=False, xmin="200"), {"session:42:100": T0 - timedelta(seconds=30)}, None),
        # A slot carries no time at all.
        (holder("replication slot", "standby1"), {}, None),
        # A clock step back never gives a negative age.
        (holder(since=T0 + timedelta(seconds=5)), {}, 0.0),
    ],
)
def test_held_seconds(h: Holder, seen: dict[str, datetime], expected: float | None) -> None:
    assert held_seconds(h, T0, seen) == expected


def test_remember_keeps_first_sightings_and_forgets_gone_holders() -> None:
    old = {"session:42:100": T0 - timedelta(minutes=5), "session:9:50": T0 - timedelta(minutes=9)}
    now = Horizon((holder(visible=False), holder(name="7", xmin="300", visible=False)), table())
    assert remember(now, old) == {"session:42:100": T0 - timedelta(minutes=5), "session:7:300": T0}


def test_figures_take_the_oldest_holder_of_the_jobs_table_not_a_catalog_slot() -> None:
    slot = holder(CATALOG_ONLY, "cdc", age=5000)
    session = holder(since=T0 - timedelta(seconds=400), age=900)
    fig = figures(Horizon((slot, session), table(dead=1234)))
    assert (fig.holder, fig.age_seconds, fig.age_known) == (session, 400.0, True)
    assert (fig.xid_age, fig.dead_tuples) == (900, 1234)
    nobody = figures(Horizon((slot,), table()))
    assert (nobody.holder, nobody.age_seconds, nobody.age_known, nobody.xid_age) == (None, 0.0, True, 0)


@pytest.mark.parametrize(
    ("horizon", "expected"),
    [
        (Horizon((), table()), []),
        (Horizon((), table(server=False)), ["autovacuum is off on this server"]),
        (Horizon((), table(own=False)), ["autovacuum is off for pgwork.jobs"]),
        (Horizon((holder(since=T0 - timedelta(seconds=HELD_WARN_SECONDS - 1)),), table()), []),
        (
            Horizon((holder(since=T0 - timedelta(seconds=HELD_WARN_SECONDS)),), table()),
            ["session pid 42 (report, 10.0.0.7, idle in transaction) has held back vacuum for 300 s"],
        ),
        (Horizon((holder(visible=False),), table(all_stats=False)), ["another role's sessions show no client"]),
    ],
)
def test_findings(horizon: Horizon, expected: list[str]) -> None:
    found = findings(horizon)
    assert len(found) == len(expected)
    for line, start in zip(found, expected, strict=True):
        assert line.startswith(start), line


@pytest.mark.parametrize(
    ("h", "expected"),
    [
        (holder(), "session pid 42 (report, 10.0.0.7, idle in transaction)"),
        (holder(visible=False, app=None), "session pid 42"),
        (holder("prepared transaction", "tx-1", app=None, client=None, state=None), "prepared transaction tx-1"),
    ],
)
def test_describe(h: Holder, expected: str) -> None:
    assert describe(h) == expected


def _hold(dsn: str, sql: str, app: str) -> psycopg.Connection:
    conn = psycopg.connect(dsn, application_name=app)
    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    conn.execute(sql)
    return conn


def test_a_reporting_transaction_is_named_as_the_holder(queue: Queue, dsn: str) -> None:
    queue.enqueue("noop", {})
    with _hold(dsn, "select count(*) from pgwork.jobs", "nightly-report") as conn:
        horizon = queue.vacuum_horizon()
        oldest = horizon.oldest()
        assert oldest is not None and oldest.kind == "session"
        assert oldest.application_name == "nightly-report" and oldest.visible
        assert oldest.state == "idle in transaction" and oldest.client_addr in ("127.0.0.1", "::1", None)
        assert oldest.pid == conn.info.backend_pid
        answer = report(horizon)
        assert answer["holders"][0]["application"] == "nightly-report"
        assert "select count" not in json.dumps(answer, default=str)  # never the query text
        conn.rollback()
    assert all(h.pid != conn.info.backend_pid for h in queue.vacuum_horizon().holders)


def test_a_transaction_that_only_wrote_holds_the_horizon_by_its_xid(queue: Queue, dsn: str) -> None:
    with psycopg.connect(dsn, application_name="writer") as conn:
        conn.execute("create table if not exists public.other (x int)")
        conn.commit()
        conn.execute("insert into public.other values (1)")  # READ COMMITTED, idle: no snapshot, an xid
        holders = [h for h in queue.vacuum_horizon().holders if h.pid == conn.info.backend_pid]
        assert holders and holders[0].application_name == "writer"
        conn.rollback()


def test_a_role_without_read_all_stats_sees_who_but_not_where(dsn: str, make_role: MakeRole) -> None:
    reader = make_role("reader")
    with _hold(dsn, "select 1", "hidden-report"), Queue(reader) as q:
        horizon = q.vacuum_horizon()
        mine = [h for h in horizon.holders if h.application_name == "hidden-report"]
        assert mine and not mine[0].visible
        assert (mine[0].client_addr, mine[0].state, mine[0].since) == (None, None, None)
        assert not horizon.table.reads_all_stats
        assert any("pg_read_all_stats" in f for f in findings(horizon))


def test_autovacuum_off_for_the_jobs_table_is_a_finding(queue: Queue, dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("alter table pgwork.jobs set (autovacuum_enabled = false)")
        server_on = conn.execute("select current_setting('autovacuum')::boolean").fetchone()
    horizon = queue.vacuum_horizon()
    assert not horizon.table.table_autovacuum and not horizon.table.autovacuum
    assert server_on is not None
    expected = "on this server" if not server_on[0] else "for pgwork.jobs"
    assert any(expected in f for f in findings(horizon))


def test_prepared_transaction_is_a_holder(queue: Queue, dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as admin:
        row = admin.execute("select current_setting('max_prepared_transactions')::int").fetchone()
    if not row or row[0] == 0:
        pytest.skip("max_prepared_transactions is 0 on this server")
    with psycopg.connect(dsn) as conn:
        conn.execute("select count(*) from pgwork.jobs")
        conn.execute("PREPARE TRANSACTION 'pgwork-horizon-test'")
    try:
        kinds = {(h.kind, h.holder) for h in queue.vacuum_horizon().holders}
        assert ("prepared transaction", "pgwork-horizon-test") in kinds
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute("ROLLBACK PREPARED 'pgwork-horizon-test'")


def test_doctor_command_prints_the_holder_and_strict_exits_1(dsn: str) -> None:
    with _hold(dsn, "select count(*) from pgwork.jobs", "doctor-test"):
        out = subprocess.run(
            [sys.executable, "-m", "pgwork.cli", "doctor", "--dsn", dsn, "--json"],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        answer = json.loads(out.stdout)
        assert any(h["application"] == "doctor-test" for h in answer["holders"])
        assert "vacuum horizon held" in text(answer)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("alter table pgwork.jobs set (autovacuum_enabled = false)")
    strict = subprocess.run(
        [sys.executable, "-m", "pgwork.cli", "doctor", "--dsn", dsn, "--strict"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert strict.returncode == 1 and "autovacuum is off" in strict.stdout
