"""What the Queue and the AsyncQueue send and make of the answer, shared so both validate and
key jobs alike: the enqueue statement's parameters, and a cancel's report. Pure, no I/O."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from pgwork.db.rows import CancelRow
from pgwork.models import CancelReport
from pgwork.validation import JobRow, check_ids


def unnest_params(rows: Sequence[JobRow], now: datetime | None) -> dict[str, Any]:
    """The one-statement `enqueue`'s parameters for rows already validated (arrays it unnests)."""
    return {
        "now": now,
        "job_types": [r.job_type for r in rows],
        "payloads": [Jsonb(r.payload_json, dumps=identity) for r in rows],
        "priorities": [r.priority for r in rows],
        "max_attempts": [r.max_attempts for r in rows],
        "available_ats": [r.available_at for r in rows],
        "delays": [r.delay for r in rows],
        "keys": [r.key for r in rows],
        "trace_contexts": [Jsonb(r.trace_context) for r in rows],
        "timeouts": [r.timeout for r in rows],
    }


def unique_params(rows: Sequence[JobRow], now: datetime | None) -> dict[str, Any]:
    """`enqueue_unique`'s parameters: the enqueue's arrays and which jobs are unique."""
    return {**unnest_params(rows, now), "uniques": [r.unique for r in rows]}


def any_unique(rows: Sequence[JobRow]) -> bool:
    return any(r.unique for r in rows)


def any_after(rows: Sequence[JobRow]) -> bool:
    return any(r.after for r in rows)


def after_params(rows: Sequence[JobRow], now: datetime | None) -> dict[str, Any]:
    """`enqueue_after`'s parameters: the enqueue's arrays and one (job, parent) entry per parent,
    the job counted from 1, the parent as an id or a key."""
    return {**unnest_params(rows, now), **_after_arrays(rows), "runs": [r.runs_after_failure for r in rows]}


def _after_arrays(rows: Sequence[JobRow], first: int = 1) -> dict[str, Any]:
    ords: list[int] = []
    ids: list[int | None] = []
    keys: list[str | None] = []
    for ordinal, row in enumerate(rows, first):
        for parent in row.after:
            ords.append(ordinal)
            ids.append(parent if isinstance(parent, int) else None)
            keys.append(parent if isinstance(parent, str) else None)
    return {"after_ords": ords, "after_ids": ids, "after_keys": keys}


def followup_params(spawned: Sequence[tuple[int, Sequence[JobRow]]]) -> dict[str, Any]:
    """`succeed_with_followups`' follow-up arrays: each finishing job's follow-ups, grouped by
    it, with their parents counted across the whole call."""
    parents: list[int] = []
    rows: list[JobRow] = []
    for job_id, followups in spawned:
        parents.extend(job_id for _ in followups)
        rows.extend(followups)
    jobs = unnest_params(rows, None)
    del jobs["now"]
    return {
        "f_parents": parents,
        **{f"f_{name}": values for name, values in jobs.items()},
        **_after_arrays(rows),
        "f_runs": [r.runs_after_failure for r in rows],
    }


def cancel_ids(ids: Sequence[int]) -> list[int]:
    return sorted(set(check_ids(ids)))


def cancel_report(wanted: list[int], rows: Sequence[CancelRow]) -> CancelReport:
    pending = {r.id for r in rows if r.was == "pending"}
    running = {r.id for r in rows if r.was == "running"}
    rest = [i for i in wanted if i not in pending and i not in running]
    return CancelReport(sorted(pending), sorted(running), rest)


def identity(text: Any) -> str:
    """A dumps for Jsonb that passes already-serialised JSON through."""
    return str(text)
