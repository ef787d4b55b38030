"""A claim's rows become ClaimedJobs and Leases filled without their __init__ (issue 28): the
objects must equal what the constructors make, field for field, whatever fields are added later."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime

from pgwork.db.roundtrip import claimed_jobs
from pgwork.db.rows import ClaimRow
from pgwork.models import ClaimedJob, Lease

AT = datetime(2026, 12, 5, tzinfo=UTC)
TRACE = {"traceparent": "00-x"}


def _row(job_id: int, priority: int, trace_context: object = TRACE) -> ClaimRow:
    return ClaimRow(
        job_id, "ocr", {"page": job_id}, priority, 2, 5, f"k{job_id}", trace_context, "w1",
        uuid.UUID(int=job_id), AT, AT, "earlier", 30.0, {"step": 3},
    )  # fmt: skip


def test_every_field_is_set_and_equal_to_the_constructors() -> None:
    (got,) = claimed_jobs([_row(7, 1)], "w1")
    lease = Lease(7, uuid.UUID(int=7), "w1", 2, 5, "ocr")
    want = ClaimedJob(
        7, "ocr", {"page": 7}, 1, 2, 5, "k7", {"traceparent": "00-x"}, lease, AT, AT, "earlier", 30.0, {"step": 3}
    )
    assert set(vars(got)) == {f.name for f in dataclasses.fields(ClaimedJob)}
    assert set(vars(got.lease)) == {f.name for f in dataclasses.fields(Lease)}
    assert got == want and got.lease == lease
    assert hash(got.lease) == hash(lease) and repr(got) == repr(want)
    assert dataclasses.astuple(got) == dataclasses.astuple(want)


def test_still_frozen() -> None:
    (got,) = claimed_jobs([_row(7, 1)], "w1")
    try:
        got.attempt = 9  # type: ignore[misc]
    except dataclasses.FrozenInstanceError:
        pass
    else:
        raise AssertionError("a claimed job must stay immutable")
    assert got.attempt == 2


def test_sorted_by_priority_then_id_and_no_trace_context_is_an_empty_map() -> None:
    rows = [_row(9, 1), _row(3, 2), _row(5, 1, trace_context=None)]
    got = claimed_jobs(rows, "w2")
    assert [(j.priority, j.id) for j in got] == [(1, 5), (1, 9), (2, 3)]
    assert got[0].trace_context == {} and got[0].lease.owner == "w2"
