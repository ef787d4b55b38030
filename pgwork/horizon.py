"""The vacuum horizon as values (pure): who holds back vacuum on the queue's database, for how
long, and what it has cost the jobs table so far (issue 23). Read by `Queue.vacuum_horizon`
(pgwork.db.horizon), shown by `pgwork doctor`, the operator's status and its gauges.

Every finished claim leaves dead index entries at the head of the claim index; while a snapshot
older than them is open, vacuum cannot remove them and every claim walks over them. The oldest
such snapshot is the horizon; its holder is the session, replication slot or prepared
transaction to end."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

# Holders whose xmin is the catalogs' only (a logical slot's catalog_xmin): they bloat pg_catalog,
# not the jobs table, so they are shown but never taken as the jobs table's horizon.
CATALOG_ONLY = "replication slot (catalogs)"


@dataclass(frozen=True)
class Holder:
    """One snapshot that holds back vacuum. `holder` names it: a pid, a slot, a prepared gid.
    client_addr, state, query_start and since are NULL for another role's session unless the
    reading role is a member of pg_read_all_stats (`visible` False); pid, application_name and
    the xid age are visible to every role. The query text is never read (it may hold secrets)."""

    kind: str
    holder: str
    pid: int | None
    application_name: str | None
    client_addr: str | None
    state: str | None
    query_start: datetime | None
    since: datetime | None
    xmin: str
    xmin_age: int
    visible: bool

    @property
    def holds_jobs(self) -> bool:
        return self.kind != CATALOG_ONLY

    @property
    def key(self) -> str:
        """Identity across readings: the same holder still holding the same xmin."""
        return f"{self.kind}:{self.holder}:{self.xmin}"


@dataclass(frozen=True)
class TableVacuum:
    """The jobs table (with its partitions, if any): dead and live tuples, the last vacuums, and
    whether autovacuum can run on it (the server's `autovacuum` and `track_counts`, and the
    table's own `autovacuum_enabled`)."""

    dead_tuples: int
    live_tuples: int
    last_autovacuum: datetime | None
    last_vacuum: datetime | None
    server_autovacuum: bool
    table_autovacuum: bool
    reads_all_stats: bool
    at: datetime  # the server's clock at the reading

    @property
    def autovacuum(self) -> bool:
        return self.server_autovacuum and self.table_autovacuum


@dataclass(frozen=True)
class Horizon:
    """One reading: the oldest holders (at most a few) and the jobs table."""

    holders: tuple[Holder, ...]
    table: TableVacuum

    @property
    def at(self) -> datetime:
        return self.table.at

    def oldest(self) -> Holder | None:
        held = [h for h in self.holders if h.holds_jobs]
        return max(held, key=lambda h: h.xmin_age) if held else None


def held_seconds(holder: Holder, at: datetime, first_seen: Mapping[str, datetime] | None = None) -> float | None:
    """How long `holder` has held its snapshot: from its transaction's start (or a prepared
    transaction's preparation) when the role may see it, else at least since a reader first saw
    the same holder with the same xmin (`first_seen`), else None (one reading of a hidden
    session, or a replication slot, which carries no time)."""
    start = holder.since
    if start is None and first_seen is not None:
        start = first_seen.get(holder.key)
    if start is None:
        return None
    return max(0.0, (at - start).total_seconds())


def remember(horizon: Horizon, first_seen: Mapping[str, datetime]) -> dict[str, datetime]:
    """The first-seen memory after `horizon` (pure): holders still there keep their first
    sighting, new ones start now, gone ones are forgotten (so it stays as small as a reading)."""
    return {h.key: first_seen.get(h.key, horizon.at) for h in horizon.holders}


@dataclass(frozen=True)
class HorizonFigures:
    """What the operator reports and exports: the oldest holder's age (seconds, or 0 when none or
    unknown), its xid age, the jobs table's dead tuples, autovacuum on or not."""

    age_seconds: float
    age_known: bool
    xid_age: int
    holder: Holder | None
    dead_tuples: int
    autovacuum: bool
    reads_all_stats: bool


def figures(horizon: Horizon, first_seen: Mapping[str, datetime] | None = None) -> HorizonFigures:
    oldest = horizon.oldest()
    seconds = held_seconds(oldest, horizon.at, first_seen) if oldest is not None else 0.0
    return HorizonFigures(
        age_seconds=seconds or 0.0,
        age_known=seconds is not None,
        xid_age=oldest.xmin_age if oldest is not None else 0,
        holder=oldest,
        dead_tuples=horizon.table.dead_tuples,
        autovacuum=horizon.table.autovacuum,
        reads_all_stats=horizon.table.reads_all_stats,
    )


# `pgwork doctor` warns from here on; the alert PgworkVacuumHorizonHeld uses the same figure.
HELD_WARN_SECONDS = 300.0
RESET_AUTOVACUUM = "ALTER TABLE pgwork.jobs RESET (autovacuum_enabled)"


def findings(horizon: Horizon, first_seen: Mapping[str, datetime] | None = None) -> list[str]:
    """The problems `pgwork doctor` names, one line each with what to do (pure)."""
    out: list[str] = []
    table = horizon.table
    if not table.server_autovacuum:
        out.append("autovacuum is off on this server (autovacuum or track_counts): dead claims pile up; turn it on")
    elif not table.table_autovacuum:
        out.append(f"autovacuum is off for pgwork.jobs (autovacuum_enabled=false): {RESET_AUTOVACUUM}")
    oldest = horizon.oldest()
    if oldest is not None:
        seconds = held_seconds(oldest, horizon.at, first_seen)
        if seconds is not None and seconds >= HELD_WARN_SECONDS:
            out.append(
                f"{describe(oldest)} has held back vacuum for {seconds:.0f} s: every claim walks the dead "
                "entries it keeps; end it (pg_terminate_backend, drop the slot, or COMMIT/ROLLBACK PREPARED)"
            )
    if not table.reads_all_stats and any(not h.visible for h in horizon.holders):
        out.append(
            "another role's sessions show no client, state or start: GRANT pg_read_all_stats TO this role to see who"
        )
    return out


def describe(holder: Holder) -> str:
    """`session pid 123 (app report, 10.0.0.7, idle in transaction)` (pure)."""
    what = f"{holder.kind} {holder.holder}" if holder.kind != "session" else f"session pid {holder.holder}"
    details = [d for d in (holder.application_name, holder.client_addr, holder.state) if d]
    return f"{what} ({', '.join(details)})" if details else what


def rows(horizon: Horizon, first_seen: Mapping[str, datetime] | None = None) -> list[dict[str, Any]]:
    """The holders as table rows for `pgwork doctor` (pure)."""
    out = []
    for h in horizon.holders:
        seconds = held_seconds(h, horizon.at, first_seen)
        out.append(
            {
                "kind": h.kind,
                "holder": h.holder,
                "application": h.application_name,
                "client": h.client_addr,
                "state": h.state if h.visible else "(hidden: needs pg_read_all_stats)",
                "query_start": h.query_start,
                "held_seconds": None if seconds is None else round(seconds, 1),
                "xid_age": h.xmin_age,
            }
        )
    return out
